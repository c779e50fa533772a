#include "statetrack/lrnn/format.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"

namespace statetrack::lrnn {

using nlohmann::json;

namespace {

json number_json(const Number& x) {
    if (x.is_exact()) return x.exact;
    json j = json::object();
    j["approx"] = fmt::format("{}", x.approx);
    if (!x.high.empty()) j["high"] = x.high;
    return j;
}

json vector_json(const std::vector<Number>& v) {
    std::size_t nonzero = 0;
    for (const auto& x : v) nonzero += x.is_zero() ? 0 : 1;
    if (v.size() >= 8 && 2 * nonzero < v.size()) {
        json indices = json::array(), values = json::array();
        for (std::size_t i = 0; i < v.size(); ++i)
            if (!v[i].is_zero()) {
                indices.push_back(i);
                values.push_back(number_json(v[i]));
            }
        return json{{"indices", indices}, {"values", values}};
    }
    json out = json::array();
    for (const auto& x : v) out.push_back(number_json(x));
    return out;
}

struct Reader {
    const std::string& origin;

    [[noreturn]] void fail(const std::string& at, const std::string& message) const { throw InputError(origin, at.empty() ? "/" : at, message); }

    const json& field(const json& j, const std::string& at, const char* key) const {
        if (!j.is_object()) fail(at, "expected an object");
        auto it = j.find(key);
        if (it == j.end()) fail(at, fmt::format("missing field \"{}\"", key));
        return *it;
    }
    std::string string(const json& j, const std::string& at) const {
        if (!j.is_string()) fail(at, "expected a string");
        return j.get<std::string>();
    }
    std::uint64_t index(const json& j, const std::string& at, std::uint64_t limit) const {
        if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<std::int64_t>() >= 0))
            fail(at, "expected a non-negative integer");
        const auto v = j.get<std::uint64_t>();
        if (v > limit) fail(at, fmt::format("{} exceeds the limit {}", v, limit));
        return v;
    }
    Number number(const json& j, const std::string& at) const {
        if (j.is_string()) return parse_number(j.get<std::string>(), origin, at);
        if (j.is_object()) {
            Number n;
            n.approx = parse_number(string(field(j, at, "approx"), at + "/approx"), origin, at + "/approx").approx;
            if (j.contains("high")) {
                n.high = string(j["high"], at + "/high");
                parse_number(n.high, origin, at + "/high");
            }
            return n;
        }
        fail(at, "expected a number as a string (\"p\", \"p/q\", a decimal) or {\"approx\", \"high\"}");
    }
    std::vector<Number> vector(const json& j, const std::string& at, std::size_t dim) const {
        std::vector<Number> v;
        if (j.is_array()) {
            if (j.size() != dim) fail(at, fmt::format("has {} entries, the layer dimension is {}", j.size(), dim));
            for (std::size_t i = 0; i < j.size(); ++i) v.push_back(number(j[i], fmt::format("{}/{}", at, i)));
            return v;
        }
        if (!j.is_object()) fail(at, "expected an array or {\"indices\", \"values\"}");
        const json& idx = field(j, at, "indices");
        const json& val = field(j, at, "values");
        if (!idx.is_array() || !val.is_array() || idx.size() != val.size())
            fail(at, "\"indices\" and \"values\" must be arrays of the same length");
        v.assign(dim, integer(0));
        std::vector<bool> seen(dim, false);
        for (std::size_t k = 0; k < idx.size(); ++k) {
            const std::string ip = fmt::format("{}/indices/{}", at, k);
            const auto i = index(idx[k], ip, dim == 0 ? 0 : dim - 1);
            if (seen[i]) fail(ip, fmt::format("index {} repeated", i));
            seen[i] = true;
            v[i] = number(val[k], fmt::format("{}/values/{}", at, k));
        }
        return v;
    }
    std::vector<std::uint32_t> indices(const json& j, const std::string& at, std::uint64_t limit) const {
        if (!j.is_array()) fail(at, "expected an array");
        std::vector<std::uint32_t> out;
        out.reserve(j.size());
        for (std::size_t k = 0; k < j.size(); ++k) out.push_back(std::uint32_t(index(j[k], fmt::format("{}/{}", at, k), limit)));
        return out;
    }
    const json& array(const json& j, const std::string& at) const {
        if (!j.is_array()) fail(at, "expected an array");
        return j;
    }
};

// Documented limits (docs/lrnn-format.md): keep hostile files from exhausting memory.
constexpr std::uint64_t max_dim = 1u << 16, max_inputs = 1u << 24, max_symbols = 1u << 24;
// Vectors are stored dense, so a short sparse entry stands for `dim` numbers. Their total is
// counted on the parsed JSON before anything is built, so a small file cannot exhaust memory.
constexpr std::uint64_t max_numbers = std::uint64_t(1) << 23;

std::uint64_t numbers_declared(const json& layers) {
    std::uint64_t total = 0;
    for (const json& l : layers) {
        if (!l.is_object() || !l.contains("dim") || !l["dim"].is_number_unsigned()) continue;
        std::uint64_t vectors = 1;  // h0
        if (l.contains("transitions") && l["transitions"].is_array())
            for (const json& t : l["transitions"])
                if (t.is_object())
                    vectors += (t.contains("factors") && t["factors"].is_array() ? t["factors"].size() : 0) +
                               t.contains("diagonal") + t.contains("bias");
        if (l.contains("readout") && l["readout"].is_object() && l["readout"].contains("anchors") && l["readout"]["anchors"].is_array())
            vectors += l["readout"]["anchors"].size();
        total += std::min(l["dim"].get<std::uint64_t>(), max_dim) * vectors;
    }
    return total;
}

}  // namespace

std::string write_network_json(const Network& network) {
    json j;
    j["format"] = lrnn_format_id;
    j["name"] = network.name;
    j["construction"] = network.construction;
    j["alphabet"] = network.alphabet;
    j["wiring"] = to_string(network.wiring);
    json layers = json::array();
    for (const auto& layer : network.layers) {
        json l;
        l["dim"] = layer.dim;
        l["h0"] = vector_json(layer.h0);
        l["inputs"] = layer.num_inputs;
        json ts = json::array();
        for (const auto& t : layer.transitions) {
            json tj = json::object();
            json fs = json::array();
            for (const auto& f : t.factors) fs.push_back(json{{"v", vector_json(f.v)}, {"beta", number_json(f.beta)}});
            tj["factors"] = fs;
            if (!t.diagonal.empty()) tj["diagonal"] = vector_json(t.diagonal);
            if (!t.bias.empty()) tj["bias"] = vector_json(t.bias);
            ts.push_back(tj);
        }
        l["transitions"] = ts;
        l["input_transition"] = layer.input_transition;
        const Readout& r = layer.readout;
        json rj;
        rj["kind"] = r.kind == Readout::Kind::argmax ? "argmax" : "nearest";
        if (r.kind == Readout::Kind::nearest) {
            json anchors = json::array();
            for (const auto& a : r.anchors) anchors.push_back(vector_json(a));
            rj["anchors"] = anchors;
        }
        rj["labels"] = r.labels;
        rj["num_labels"] = r.num_labels;
        if (!r.outputs.empty()) rj["outputs"] = r.outputs;
        rj["num_outputs"] = r.num_outputs;
        l["readout"] = rj;
        l["initial_output"] = layer.initial_output;
        layers.push_back(l);
    }
    j["layers"] = layers;
    j["states"] = network.states;
    json accept = json::array();
    for (bool a : network.accept) accept.push_back(a);
    j["accept"] = accept;
    return j.dump(1) + "\n";
}

Network read_network_json(const std::string& text, const std::string& origin) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::parse_error& e) {
        throw InputError(origin, fmt::format("byte {}", e.byte), "invalid JSON");
    } catch (const json::exception& e) {
        // json::parse also throws out_of_range.406 for a number beyond double range (1e999); found by fuzzing.
        throw InputError(origin, "", fmt::format("invalid JSON: {}", e.what()));
    }
    Reader r{origin};
    const std::string format = r.string(r.field(j, "", "format"), "/format");
    if (format != lrnn_format_id) r.fail("/format", fmt::format("unknown format \"{}\" (expected \"{}\")", format, lrnn_format_id));
    Network net;
    if (j.contains("name")) net.name = r.string(j["name"], "/name");
    if (j.contains("construction")) net.construction = r.string(j["construction"], "/construction");
    const json& alphabet = r.array(r.field(j, "", "alphabet"), "/alphabet");
    for (std::size_t a = 0; a < alphabet.size(); ++a) net.alphabet.push_back(r.string(alphabet[a], fmt::format("/alphabet/{}", a)));
    for (std::size_t a = 0; a < net.alphabet.size(); ++a)
        for (std::size_t b = 0; b < a; ++b)
            if (net.alphabet[a] == net.alphabet[b]) r.fail(fmt::format("/alphabet/{}", a), fmt::format("duplicate symbol '{}'", net.alphabet[a]));
    const std::string wiring = j.contains("wiring") ? r.string(j["wiring"], "/wiring") : "shift";
    if (wiring != "shift" && wiring != "literal") r.fail("/wiring", "expected \"shift\" or \"literal\"");
    net.wiring = wiring == "shift" ? Wiring::shift : Wiring::literal;
    const json& layers = r.array(r.field(j, "", "layers"), "/layers");
    if (const auto numbers = numbers_declared(layers); numbers > max_numbers)
        throw LimitError(origin, "/layers", fmt::format("the model holds {} numbers (every vector counts its full dimension), "
                                                        "beyond the limit of {}", numbers, max_numbers));
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const std::string at = fmt::format("/layers/{}", i);
        const json& lj = layers[i];
        Layer layer;
        layer.dim = r.index(r.field(lj, at, "dim"), at + "/dim", max_dim);
        layer.h0 = r.vector(r.field(lj, at, "h0"), at + "/h0", layer.dim);
        layer.num_inputs = r.index(r.field(lj, at, "inputs"), at + "/inputs", max_inputs);
        const json& ts = r.array(r.field(lj, at, "transitions"), at + "/transitions");
        for (std::size_t t = 0; t < ts.size(); ++t) {
            const std::string tat = fmt::format("{}/transitions/{}", at, t);
            Transition tr;
            const json& fs = r.array(r.field(ts[t], tat, "factors"), tat + "/factors");
            for (std::size_t f = 0; f < fs.size(); ++f) {
                const std::string fat = fmt::format("{}/factors/{}", tat, f);
                GhFactor g;
                g.v = r.vector(r.field(fs[f], fat, "v"), fat + "/v", layer.dim);
                g.beta = r.number(r.field(fs[f], fat, "beta"), fat + "/beta");
                tr.factors.push_back(std::move(g));
            }
            if (ts[t].contains("diagonal")) tr.diagonal = r.vector(ts[t]["diagonal"], tat + "/diagonal", layer.dim);
            if (ts[t].contains("bias")) tr.bias = r.vector(ts[t]["bias"], tat + "/bias", layer.dim);
            layer.transitions.push_back(std::move(tr));
        }
        layer.input_transition = r.indices(r.field(lj, at, "input_transition"), at + "/input_transition", max_inputs);
        const std::string rat = at + "/readout";
        const json& rj = r.field(lj, at, "readout");
        const std::string kind = r.string(r.field(rj, rat, "kind"), rat + "/kind");
        if (kind != "argmax" && kind != "nearest") r.fail(rat + "/kind", "expected \"argmax\" or \"nearest\"");
        layer.readout.kind = kind == "argmax" ? Readout::Kind::argmax : Readout::Kind::nearest;
        if (layer.readout.kind == Readout::Kind::nearest) {
            const json& anchors = r.array(r.field(rj, rat, "anchors"), rat + "/anchors");
            for (std::size_t k = 0; k < anchors.size(); ++k)
                layer.readout.anchors.push_back(r.vector(anchors[k], fmt::format("{}/anchors/{}", rat, k), layer.dim));
        }
        layer.readout.labels = r.indices(r.field(rj, rat, "labels"), rat + "/labels", max_symbols);
        layer.readout.num_labels = r.index(r.field(rj, rat, "num_labels"), rat + "/num_labels", max_symbols);
        layer.readout.num_outputs = r.index(r.field(rj, rat, "num_outputs"), rat + "/num_outputs", max_symbols);
        if (rj.contains("outputs")) {
            if (layer.readout.num_labels * layer.num_inputs > (std::uint64_t(1) << 28))
                r.fail(rat + "/outputs", "the output table exceeds the limit of 2^28 entries");
            layer.readout.outputs = r.indices(rj["outputs"], rat + "/outputs", max_symbols);
        }
        layer.initial_output = std::uint32_t(r.index(r.field(lj, at, "initial_output"), at + "/initial_output", max_symbols));
        net.layers.push_back(std::move(layer));
    }
    const json& states = r.array(r.field(j, "", "states"), "/states");
    for (std::size_t k = 0; k < states.size(); ++k) {
        if (!states[k].is_number_integer() || states[k].get<std::int64_t>() < -1)
            r.fail(fmt::format("/states/{}", k), "expected a DFA state index or -1");
        net.states.push_back(states[k].get<std::int64_t>());
    }
    const json& accept = r.array(r.field(j, "", "accept"), "/accept");
    for (std::size_t k = 0; k < accept.size(); ++k) {
        if (!accept[k].is_boolean()) r.fail(fmt::format("/accept/{}", k), "expected true or false");
        net.accept.push_back(accept[k].get<bool>());
    }
    validate(net, origin);
    return net;
}

Network load_network(const std::string& path) { return read_network_json(read_text_file(path), path); }

}  // namespace statetrack::lrnn
