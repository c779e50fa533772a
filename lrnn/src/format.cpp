#include "statetrack/lrnn/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

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

// The sparse form for dimension >= 8 with fewer than half the entries non-zero, else the array.
json vector_json(const SparseVector& v) {
    if (v.dim >= 8 && 2 * v.entries.size() < v.dim) {
        json indices = json::array(), values = json::array();
        for (const auto& e : v.entries) {
            indices.push_back(e.index);
            values.push_back(number_json(e.value));
        }
        return json{{"indices", indices}, {"values", values}};
    }
    json out = json::array();
    std::size_t k = 0;
    for (std::size_t i = 0; i < v.dim; ++i)
        out.push_back(k < v.entries.size() && v.entries[k].index == i ? number_json(v.entries[k++].value) : json("0"));
    return out;
}
json vector_json(const std::vector<Number>& v) { return vector_json(sparse_vector(v)); }

// Version 1 wrote every output table as the dense array [label * inputs + input]; tables up to
// 2^16 entries, or at least half non-zero, still are (same bytes); larger mostly-zero ones as
// {"indices", "values"} of their non-zero entries (a cascade layer's table is mostly zeros).
constexpr std::uint64_t max_dense_output_table = std::uint64_t(1) << 16;

json outputs_json(const Readout& r, std::size_t inputs) {
    const std::uint64_t dense = std::uint64_t(r.num_labels) * inputs;
    std::uint64_t nonzero = 0;
    for (const auto& e : r.outputs) nonzero += e.output != 0;
    if (dense <= max_dense_output_table || 2 * nonzero >= dense) {
        std::vector<std::uint32_t> table(dense, 0);
        for (std::size_t x = 0; x < inputs; ++x)
            for (std::size_t k = r.output_start[x]; k < r.output_start[x + 1]; ++k) table[r.outputs[k].label * inputs + x] = r.outputs[k].output;
        return table;
    }
    std::vector<std::pair<std::uint64_t, std::uint32_t>> entries;
    for (std::size_t x = 0; x < inputs; ++x)
        for (std::size_t k = r.output_start[x]; k < r.output_start[x + 1]; ++k)
            if (r.outputs[k].output != 0) entries.emplace_back(std::uint64_t(r.outputs[k].label) * inputs + x, r.outputs[k].output);
    std::sort(entries.begin(), entries.end());
    json indices = json::array(), values = json::array();
    for (const auto& [key, value] : entries) indices.push_back(key), values.push_back(value);
    return json{{"indices", indices}, {"values", values}};
}

// Appends JSON as nlohmann's dump(indent) would print it nested at `depth` (indent < 0: compact),
// so that large models can be written piece by piece without one document in memory.
struct JsonWriter {
    std::string out;
    int indent = 1;
    void newline(int depth) {
        if (indent < 0) return;
        out += '\n';
        out.append(std::size_t(depth * indent), ' ');
    }
    void value(const json& j, int depth) {
        const std::string text = j.dump(indent);
        if (indent < 0 || depth == 0) {
            out += text;
            return;
        }
        for (char c : text) {  // raw newlines only separate elements (strings escape theirs)
            out += c;
            if (c == '\n') out.append(std::size_t(depth * indent), ' ');
        }
    }
    // Members of an object, in the order given (keys sorted, as nlohmann prints them).
    void key(const char* name, bool first, int depth) {
        if (!first) out += ',';
        newline(depth + 1);
        out += json(name).dump();
        out += indent < 0 ? ":" : ": ";
    }
};

// Documented limits (docs/lrnn-format.md): keep hostile files from exhausting memory.
constexpr std::uint64_t max_dim = 1u << 16, max_inputs = 1u << 24, max_symbols = 1u << 24;
constexpr std::uint64_t max_output_table = std::uint64_t(1) << 28;

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
    // A factor's v, read straight into the sparse form (never `dim` numbers for a sparse entry).
    SparseVector sparse(const json& j, const std::string& at, std::size_t dim) const {
        SparseVector v;
        v.dim = dim;
        if (j.is_array()) {
            if (j.size() != dim) fail(at, fmt::format("has {} entries, the layer dimension is {}", j.size(), dim));
            for (std::size_t i = 0; i < j.size(); ++i) {
                Number x = number(j[i], fmt::format("{}/{}", at, i));
                if (!x.is_zero()) v.entries.push_back({std::uint32_t(i), std::move(x)});
            }
            return v;
        }
        const auto [idx, val] = index_value_arrays(j, at);
        std::vector<std::pair<std::uint32_t, std::size_t>> order;  // (index, position in the file)
        for (std::size_t k = 0; k < idx.size(); ++k)
            order.emplace_back(std::uint32_t(index(idx[k], fmt::format("{}/indices/{}", at, k), dim == 0 ? 0 : dim - 1)), k);
        std::sort(order.begin(), order.end());
        for (std::size_t k = 1; k < order.size(); ++k)
            if (order[k].first == order[k - 1].first)
                fail(fmt::format("{}/indices/{}", at, order[k].second), fmt::format("index {} repeated", order[k].first));
        for (const auto& [i, k] : order) {
            Number x = number(val[k], fmt::format("{}/values/{}", at, k));
            if (!x.is_zero()) v.entries.push_back({i, std::move(x)});
        }
        return v;
    }
    // h0, diagonals, biases and anchors are held dense.
    std::vector<Number> vector(const json& j, const std::string& at, std::size_t dim) const { return dense_vector(sparse(j, at, dim)); }
    // The two arrays of a sparse form {"indices": [...], "values": [...]}.
    std::pair<const json&, const json&> index_value_arrays(const json& j, const std::string& at) const {
        if (!j.is_object()) fail(at, "expected an array or {\"indices\", \"values\"}");
        const json& idx = field(j, at, "indices");
        const json& val = field(j, at, "values");
        if (!idx.is_array() || !val.is_array() || idx.size() != val.size())
            fail(at, "\"indices\" and \"values\" must be arrays of the same length");
        return {idx, val};
    }
    // An output table: the dense array [label * inputs + input] (version 1) or {"indices", "values"}
    // of its non-zero entries; either way stored per input letter.
    void output_table(const json& j, const std::string& at, Readout& r, std::size_t inputs) const {
        const std::uint64_t dense = std::uint64_t(r.num_labels) * inputs;
        std::vector<std::tuple<std::size_t, std::uint32_t, std::uint32_t>> entries;  // (input, label, output)
        auto add = [&](std::uint64_t key, const json& value, auto&& place) {  // place: built only for an error
            std::uint64_t out = r.num_outputs;
            if (value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0)) out = value.get<std::uint64_t>();
            else index(value, place(), max_symbols);  // throws: not a non-negative integer
            if (out >= r.num_outputs) fail(place(), fmt::format("output {} out of range 0..{}", out, r.num_outputs == 0 ? 0 : r.num_outputs - 1));
            if (out != 0) entries.emplace_back(std::size_t(key % inputs), std::uint32_t(key / inputs), std::uint32_t(out));
        };
        if (j.is_array()) {
            if (dense > max_output_table) fail(at, "the output table exceeds the limit of 2^28 entries");
            if (j.size() != dense) fail(at, fmt::format("{} entries, expected labels x input letters = {}", j.size(), dense));
            for (std::size_t k = 0; k < j.size(); ++k) add(k, j[k], [&] { return fmt::format("{}/{}", at, k); });
        } else {
            const auto [idx, val] = index_value_arrays(j, at);
            if (idx.size() > max_output_table) fail(at, "the output table exceeds the limit of 2^28 entries");
            for (std::size_t k = 0; k < idx.size(); ++k) {
                const std::string ip = fmt::format("{}/indices/{}", at, k);
                if (!idx[k].is_number_unsigned()) fail(ip, "expected a non-negative integer");
                const auto key = idx[k].get<std::uint64_t>();
                if (key >= dense) fail(ip, fmt::format("{} is beyond labels x input letters = {}", key, dense));
                add(key, val[k], [&] { return fmt::format("{}/values/{}", at, k); });
            }
        }
        std::sort(entries.begin(), entries.end());
        r.output_start.assign(inputs + 1, 0);
        r.outputs.clear();
        r.outputs.reserve(entries.size());
        for (std::size_t k = 0; k < entries.size(); ++k) {
            const auto& [x, label, out] = entries[k];
            if (k > 0 && std::get<0>(entries[k - 1]) == x && std::get<1>(entries[k - 1]) == label)
                fail(at, fmt::format("the entry for label {} and input letter {} is repeated", label, x));
            r.outputs.push_back({label, out});
            ++r.output_start[x + 1];
        }
        for (std::size_t x = 0; x < inputs; ++x) r.output_start[x + 1] += r.output_start[x];
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

// What a model holds once read, counted on the parsed JSON before anything is built: h0,
// diagonals, biases and anchors are held dense (a short sparse entry in the file stands for `dim`
// numbers), a factor's v only its listed entries (plus beta). A small file cannot exhaust memory.
constexpr std::uint64_t max_numbers = std::uint64_t(1) << 23;

std::uint64_t numbers_declared(const json& layers) {
    auto stored = [](const json& v) -> std::uint64_t {  // a factor's v: the array's entries, or the listed ones
        if (v.is_array()) return v.size();
        if (v.is_object() && v.contains("indices") && v["indices"].is_array()) return v["indices"].size();
        return 0;
    };
    std::uint64_t total = 0;
    for (const json& l : layers) {
        if (!l.is_object() || !l.contains("dim") || !l["dim"].is_number_unsigned()) continue;
        const std::uint64_t dim = std::min(l["dim"].get<std::uint64_t>(), max_dim);
        std::uint64_t dense = 1;  // h0
        if (l.contains("transitions") && l["transitions"].is_array())
            for (const json& t : l["transitions"]) {
                if (!t.is_object()) continue;
                dense += t.contains("diagonal") + t.contains("bias");
                if (t.contains("factors") && t["factors"].is_array())
                    for (const json& f : t["factors"]) total += 1 + (f.is_object() && f.contains("v") ? stored(f["v"]) : 0);
            }
        if (l.contains("readout") && l["readout"].is_object() && l["readout"].contains("anchors") && l["readout"]["anchors"].is_array())
            dense += l["readout"]["anchors"].size();
        total += dim * dense;
    }
    return total;
}

// Models beyond this many stored numbers and table entries are written compact (no indentation):
// the indentation alone would double the largest MLRegTest cascades' files.
constexpr std::uint64_t max_indented_size = std::uint64_t(1) << 22;

std::uint64_t stored_size(const Network& network) {
    std::uint64_t total = 0;
    for (const auto& layer : network.layers) {
        total += layer.h0.size() + layer.input_transition.size();
        for (const auto& e : layer.readout.outputs) total += e.output != 0;  // what a re-read keeps: same layout again
        for (const auto& t : layer.transitions) {
            for (const auto& f : t.factors) total += 1 + f.v.entries.size();
            total += t.diagonal.size() + t.bias.size();
        }
        for (const auto& a : layer.readout.anchors) total += a.size();
    }
    return total;
}

json readout_json(const Layer& layer) {
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
    if (!r.output_start.empty()) rj["outputs"] = outputs_json(r, layer.num_inputs);
    rj["num_outputs"] = r.num_outputs;
    return rj;
}

json transition_json(const Transition& t) {
    json tj = json::object();
    json fs = json::array();
    for (const auto& f : t.factors) fs.push_back(json{{"v", vector_json(f.v)}, {"beta", number_json(f.beta)}});
    tj["factors"] = fs;
    if (!t.diagonal.empty()) tj["diagonal"] = vector_json(t.diagonal);
    if (!t.bias.empty()) tj["bias"] = vector_json(t.bias);
    return tj;
}

void write_layer(JsonWriter& w, const Layer& layer, int depth) {
    w.out += '{';
    w.key("dim", true, depth), w.value(layer.dim, depth + 1);
    w.key("h0", false, depth), w.value(vector_json(layer.h0), depth + 1);
    w.key("initial_output", false, depth), w.value(layer.initial_output, depth + 1);
    w.key("input_transition", false, depth), w.value(layer.input_transition, depth + 1);
    w.key("inputs", false, depth), w.value(layer.num_inputs, depth + 1);
    w.key("readout", false, depth), w.value(readout_json(layer), depth + 1);
    w.key("transitions", false, depth);
    if (layer.transitions.empty()) {
        w.out += "[]";
    } else {
        w.out += '[';
        for (std::size_t t = 0; t < layer.transitions.size(); ++t) {
            if (t) w.out += ',';
            w.newline(depth + 2);
            w.value(transition_json(layer.transitions[t]), depth + 2);
        }
        w.newline(depth + 1);
        w.out += ']';
    }
    w.newline(depth);
    w.out += '}';
}

}  // namespace

std::string write_network_json(const Network& network) {
    JsonWriter w;
    w.indent = stored_size(network) > max_indented_size ? -1 : 1;
    json accept = json::array();
    for (bool a : network.accept) accept.push_back(a);
    // The document's members in nlohmann's (sorted) key order; layers are written one at a time.
    w.out += '{';
    w.key("accept", true, 0), w.value(accept, 1);
    w.key("alphabet", false, 0), w.value(network.alphabet, 1);
    w.key("construction", false, 0), w.value(network.construction, 1);
    w.key("format", false, 0), w.value(lrnn_format_id, 1);
    w.key("layers", false, 0);
    if (network.layers.empty()) {
        w.out += "[]";
    } else {
        w.out += '[';
        for (std::size_t i = 0; i < network.layers.size(); ++i) {
            if (i) w.out += ',';
            w.newline(2);
            write_layer(w, network.layers[i], 2);
        }
        w.newline(1);
        w.out += ']';
    }
    w.key("name", false, 0), w.value(network.name, 1);
    w.key("states", false, 0), w.value(network.states, 1);
    if (!network.token_class.empty()) w.key("token_classes", false, 0), w.value(network.token_class, 1);
    w.key("wiring", false, 0), w.value(to_string(network.wiring), 1);
    w.newline(0);
    w.out += "}\n";
    return std::move(w.out);
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
    if (j.contains("token_classes"))
        net.token_class = r.indices(j["token_classes"], "/token_classes", net.alphabet.empty() ? 0 : net.alphabet.size() - 1);
    const std::string wiring = j.contains("wiring") ? r.string(j["wiring"], "/wiring") : "shift";
    if (wiring != "shift" && wiring != "literal") r.fail("/wiring", "expected \"shift\" or \"literal\"");
    net.wiring = wiring == "shift" ? Wiring::shift : Wiring::literal;
    const json& layers = r.array(r.field(j, "", "layers"), "/layers");
    if (const auto numbers = numbers_declared(layers); numbers > max_numbers)
        throw LimitError(origin, "/layers", fmt::format("the model holds {} numbers (h0, diagonals, biases and anchors at their full "
                                                        "dimension, factors by their listed entries), beyond the limit of {}", numbers, max_numbers));
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
                g.v = r.sparse(r.field(fs[f], fat, "v"), fat + "/v", layer.dim);
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
        if (rj.contains("outputs")) r.output_table(rj["outputs"], rat + "/outputs", layer.readout, layer.num_inputs);
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
