#include "statetrack/lrnn/network.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "statetrack/automata/error.hpp"

namespace statetrack::lrnn {

const char* to_string(Wiring wiring) { return wiring == Wiring::shift ? "shift" : "literal"; }

SparseVector sparse_vector(const std::vector<Number>& dense) {
    SparseVector v;
    v.dim = dense.size();
    for (std::size_t i = 0; i < dense.size(); ++i)
        if (!dense[i].is_zero()) v.entries.push_back({std::uint32_t(i), dense[i]});
    return v;
}

std::vector<Number> dense_vector(const SparseVector& v) {
    std::vector<Number> dense(v.dim, integer(0));
    for (const auto& e : v.entries) dense[e.index] = e.value;
    return dense;
}

SparseVector unit_vector(std::size_t dim, std::size_t i) { return SparseVector{dim, {{std::uint32_t(i), integer(1)}}}; }

std::uint32_t output_symbol(const Readout& r, std::uint32_t label, std::size_t input) {
    if (r.output_start.empty()) return label;
    const auto first = r.outputs.begin() + r.output_start[input], last = r.outputs.begin() + r.output_start[input + 1];
    const auto it = std::lower_bound(first, last, label, [](const LabelOutput& e, std::uint32_t l) { return e.label < l; });
    return it != last && it->label == label ? it->output : 0;
}

std::size_t num_token_classes(const Network& network) {
    if (network.token_class.empty()) return network.alphabet.size();
    std::uint32_t top = 0;
    for (auto c : network.token_class) top = std::max(top, c);
    return std::size_t(top) + 1;
}

std::size_t total_dimension(const Network& network) {
    std::size_t n = 0;
    for (const auto& layer : network.layers) n += layer.dim;
    return n;
}

namespace {

void check_sparse(const SparseVector& v, std::size_t dim, const std::string& origin, const std::string& place) {
    if (v.dim != dim) throw InputError(origin, place, fmt::format("has dimension {}, the layer dimension is {}", v.dim, dim));
    for (std::size_t k = 0; k < v.entries.size(); ++k) {
        if (v.entries[k].index >= dim)
            throw InputError(origin, fmt::format("{}/indices/{}", place, k), fmt::format("index {} out of range 0..{}", v.entries[k].index, dim - 1));
        if (k > 0 && v.entries[k].index <= v.entries[k - 1].index)
            throw InputError(origin, fmt::format("{}/indices/{}", place, k), "indices must be strictly increasing");
    }
}

void check_vector(const std::vector<Number>& v, std::size_t dim, const std::string& origin, const std::string& place) {
    if (v.size() != dim) throw InputError(origin, place, fmt::format("has {} entries, the layer dimension is {}", v.size(), dim));
}

void validate_transition(const Transition& t, std::size_t dim, const std::string& origin, const std::string& at) {
    for (std::size_t f = 0; f < t.factors.size(); ++f) {
        const auto& factor = t.factors[f];
        const std::string place = fmt::format("{}/factors/{}", at, f);
        check_sparse(factor.v, dim, origin, place + "/v");
        bool nonzero = false;
        for (const auto& [i, x] : factor.v.entries) nonzero = nonzero || (x.is_exact() ? !x.is_zero() : x.approx != 0);
        if (!nonzero) throw InputError(origin, place + "/v", "v is zero");
        if (compare(factor.beta, integer(0)) < 0 || compare(factor.beta, integer(2)) > 0)
            throw InputError(origin, place + "/beta",
                             fmt::format("beta = {} breaks the eigenvalue bound: beta must lie in [0, 2] (eigenvalue 1 - beta in [-1, 1])",
                                         to_string(factor.beta)));
    }
    if (!t.diagonal.empty()) {
        check_vector(t.diagonal, dim, origin, at + "/diagonal");
        for (std::size_t i = 0; i < dim; ++i)
            if (compare(t.diagonal[i], integer(-1)) < 0 || compare(t.diagonal[i], integer(1)) > 0)
                throw InputError(origin, fmt::format("{}/diagonal/{}", at, i),
                                 fmt::format("diagonal entry {} breaks the eigenvalue bound [-1, 1]", to_string(t.diagonal[i])));
    }
    if (!t.bias.empty()) check_vector(t.bias, dim, origin, at + "/bias");
}

}  // namespace

void validate(const Network& network, const std::string& origin) {
    const std::size_t tokens = network.alphabet.size();
    if (tokens == 0) throw InputError(origin, "/alphabet", "the alphabet is empty");
    if (network.layers.empty()) throw InputError(origin, "/layers", "the network has no layers");
    if (!network.token_class.empty()) {
        if (network.token_class.size() != tokens)
            throw InputError(origin, "/token_classes", fmt::format("{} entries, expected one per token ({})", network.token_class.size(), tokens));
        std::vector<bool> used(tokens, false);
        for (std::size_t a = 0; a < tokens; ++a) {
            if (network.token_class[a] >= tokens)
                throw InputError(origin, fmt::format("/token_classes/{}", a), fmt::format("class {} out of range 0..{}", network.token_class[a], tokens - 1));
            used[network.token_class[a]] = true;
        }
        for (std::size_t c = 0; c < num_token_classes(network); ++c)
            if (!used[c]) throw InputError(origin, "/token_classes", fmt::format("class {} has no token (classes are numbered 0..C-1)", c));
    }
    const std::size_t classes = num_token_classes(network);
    std::size_t upstream = 1;
    for (std::size_t i = 0; i < network.layers.size(); ++i) {
        const Layer& layer = network.layers[i];
        const std::string at = fmt::format("/layers/{}", i);
        if (layer.dim == 0) throw InputError(origin, at + "/dim", "the dimension must be positive");
        check_vector(layer.h0, layer.dim, origin, at + "/h0");
        if (layer.num_inputs != upstream * classes)
            throw InputError(origin, at + "/inputs",
                             fmt::format("{} input letters, expected {} (previous outputs) x {} ({})", layer.num_inputs, upstream, classes,
                                         network.token_class.empty() ? "tokens" : "token classes"));
        if (layer.transitions.empty()) throw InputError(origin, at + "/transitions", "no transitions");
        for (std::size_t t = 0; t < layer.transitions.size(); ++t)
            validate_transition(layer.transitions[t], layer.dim, origin, fmt::format("{}/transitions/{}", at, t));
        if (layer.input_transition.size() != layer.num_inputs)
            throw InputError(origin, at + "/input_transition",
                             fmt::format("{} entries, expected one per input letter ({})", layer.input_transition.size(), layer.num_inputs));
        for (std::size_t a = 0; a < layer.num_inputs; ++a)
            if (layer.input_transition[a] >= layer.transitions.size())
                throw InputError(origin, fmt::format("{}/input_transition/{}", at, a),
                                 fmt::format("transition {} out of range 0..{}", layer.input_transition[a], layer.transitions.size() - 1));
        const Readout& r = layer.readout;
        const std::string rat = at + "/readout";
        if (r.num_labels == 0) throw InputError(origin, rat + "/labels", "no labels");
        if (r.kind == Readout::Kind::argmax) {
            if (r.labels.size() != layer.dim)
                throw InputError(origin, rat + "/labels", fmt::format("argmax needs one label per coordinate ({})", layer.dim));
        } else {
            if (r.anchors.empty()) throw InputError(origin, rat + "/anchors", "nearest needs at least one anchor");
            for (std::size_t k = 0; k < r.anchors.size(); ++k)
                check_vector(r.anchors[k], layer.dim, origin, fmt::format("{}/anchors/{}", rat, k));
            if (r.labels.size() != r.anchors.size())
                throw InputError(origin, rat + "/labels", fmt::format("nearest needs one label per anchor ({})", r.anchors.size()));
        }
        for (std::size_t k = 0; k < r.labels.size(); ++k)
            if (r.labels[k] >= r.num_labels)
                throw InputError(origin, fmt::format("{}/labels/{}", rat, k), fmt::format("label {} out of range 0..{}", r.labels[k], r.num_labels - 1));
        if (r.output_start.empty()) {
            if (r.num_outputs != r.num_labels || !r.outputs.empty())
                throw InputError(origin, rat + "/num_outputs", "without an output table the outputs are the labels");
        } else {
            bool covered = r.output_start.size() == layer.num_inputs + 1 && r.output_start.front() == 0 && r.output_start.back() == r.outputs.size();
            for (std::size_t x = 0; covered && x < layer.num_inputs; ++x) covered = r.output_start[x] <= r.output_start[x + 1];
            if (!covered) throw InputError(origin, rat + "/outputs", "the output table does not cover every input letter once");
            for (std::size_t x = 0; x < layer.num_inputs; ++x)
                for (std::size_t k = r.output_start[x]; k < r.output_start[x + 1]; ++k) {
                    const LabelOutput& e = r.outputs[k];
                    const std::size_t key = std::size_t(e.label) * layer.num_inputs + x;  // the entry's place in the dense table
                    if (e.label >= r.num_labels || (k > r.output_start[x] && e.label <= r.outputs[k - 1].label))
                        throw InputError(origin, fmt::format("{}/outputs/{}", rat, key), "labels out of range or out of order");
                    if (e.output >= r.num_outputs)
                        throw InputError(origin, fmt::format("{}/outputs/{}", rat, key), fmt::format("output {} out of range 0..{}", e.output, r.num_outputs - 1));
                }
        }
        if (r.num_outputs == 0) throw InputError(origin, rat + "/num_outputs", "no outputs");
        if (layer.initial_output >= r.num_outputs)
            throw InputError(origin, at + "/initial_output", fmt::format("output {} out of range 0..{}", layer.initial_output, r.num_outputs - 1));
        upstream = r.num_outputs;
    }
    if (network.states.size() != upstream || network.accept.size() != upstream)
        throw InputError(origin, "/states", fmt::format("need one DFA state and one accept flag per output of the last layer ({})", upstream));
}

}  // namespace statetrack::lrnn
