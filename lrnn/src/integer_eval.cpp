// The integer fast path (integer_eval.hpp): exact evaluation of integer networks without GMP.
#include "statetrack/lrnn/integer_eval.hpp"

#include <algorithm>
#include <cstdlib>

namespace statetrack::lrnn {

namespace {

// v entries stay below 2^15 so that a dot product over at most 2^16 coordinates of values below
// 2^30 fits in int64 without checks; everything after it is overflow-checked.
constexpr std::int64_t v_guard = std::int64_t(1) << 15;

std::optional<std::int64_t> as_integer(const Number& x, std::int64_t guard = integer_value_guard) {
    if (!x.is_exact() || x.exact.find('/') != std::string::npos || x.exact.size() > 12) return std::nullopt;
    const std::int64_t value = std::strtoll(x.exact.c_str(), nullptr, 10);
    if (value > guard || value < -guard) return std::nullopt;
    return value;
}

// beta / v.v as an integer, if it is one.
std::optional<std::int64_t> integer_coefficient(const GhFactor& f, IntegerFactor& out) {
    std::int64_t dot = 0;
    for (const auto& [i, value] : f.v.entries) {
        const auto x = as_integer(value, v_guard);
        if (!x) return std::nullopt;
        if (*x == 0) continue;
        out.support.push_back(i);
        out.v.push_back(*x);
        dot += *x * *x;
    }
    if (!f.beta.is_exact() || dot == 0) return std::nullopt;
    // beta = p / q: the coefficient p / (q dot) is an integer iff q dot divides p.
    const auto slash = f.beta.exact.find('/');
    const Number p{slash == std::string::npos ? f.beta.exact : f.beta.exact.substr(0, slash), 0, {}};
    const Number q{slash == std::string::npos ? "1" : f.beta.exact.substr(slash + 1), 0, {}};
    const auto pn = as_integer(p), qn = as_integer(q);
    if (!pn || !qn) return std::nullopt;
    std::int64_t denominator = 0;
    if (__builtin_mul_overflow(*qn, dot, &denominator) || *pn % denominator != 0) return std::nullopt;
    return *pn / denominator;
}

bool fits(std::int64_t x) { return x <= integer_value_guard && x >= -integer_value_guard; }

}  // namespace

std::optional<IntegerNetwork> prepare_integer(const Network& network) {
    if (network.layers.empty()) return std::nullopt;
    IntegerNetwork p;
    p.network = &network;
    p.classes = num_token_classes(network);
    for (const auto& layer : network.layers) p.initial.push_back(std::int32_t(layer.initial_output));
    for (const auto& layer : network.layers) {
        IntegerLayer il;
        il.offset = p.initial.size();
        for (const auto& x : layer.h0) {
            const auto value = as_integer(x);
            if (!value) return std::nullopt;
            p.initial.push_back(std::int32_t(*value));
        }
        for (const auto& t : layer.transitions) {
            IntegerTransition it;
            for (const auto& f : t.factors) {
                IntegerFactor factor;
                const auto c = integer_coefficient(f, factor);
                if (!c || !fits(*c)) return std::nullopt;
                factor.coefficient = *c;
                if (factor.support.size() == 1 && factor.coefficient * factor.v[0] * factor.v[0] == 1) {
                    if (it.factors.empty() || !it.factors.back().zeroes) it.factors.push_back(IntegerFactor{{}, {}, 0, true, 0, 0});
                    it.factors.back().support.push_back(factor.support[0]);
                    continue;
                }
                it.factors.push_back(std::move(factor));
            }
            for (auto& f : it.factors)  // a run over consecutive coordinates (a reset's n projections) becomes a range
                if (f.zeroes && f.support.size() > 1 && f.support.back() - f.support.front() + 1 == f.support.size() &&
                    std::is_sorted(f.support.begin(), f.support.end())) {
                    f.zero_begin = f.support.front();
                    f.zero_end = f.support.back() + 1;
                    f.support.clear();
                }
            for (const auto& d : t.diagonal) {
                const auto value = as_integer(d);
                if (!value) return std::nullopt;
                it.diagonal.push_back(*value);
            }
            for (std::size_t i = 0; i < t.bias.size(); ++i) {
                const auto value = as_integer(t.bias[i]);
                if (!value) return std::nullopt;
                if (*value == 0) continue;
                it.bias_support.push_back(std::uint32_t(i));
                it.bias.push_back(*value);
            }
            il.transitions.push_back(std::move(it));
        }
        for (const auto& a : layer.readout.anchors) {
            std::vector<std::int64_t> anchor;
            for (const auto& x : a) {
                const auto value = as_integer(x);
                if (!value) return std::nullopt;
                anchor.push_back(*value);
            }
            il.anchors.push_back(std::move(anchor));
        }
        p.layers.push_back(std::move(il));
    }
    return p;
}

std::optional<std::uint32_t> step_integer_layer(const IntegerNetwork& p, std::size_t i, std::int32_t* h, std::size_t input) {
    const Layer& layer = p.network->layers[i];
    const IntegerLayer& il = p.layers[i];
    const IntegerTransition& t = il.transitions[layer.input_transition[input]];
    for (const auto& f : t.factors) {
        if (f.zeroes) {
            if (f.support.empty()) std::fill(h + f.zero_begin, h + f.zero_end, 0);
            for (std::uint32_t k : f.support) h[k] = 0;
            continue;
        }
        std::int64_t dot = 0;
        for (std::size_t k = 0; k < f.support.size(); ++k) dot += f.v[k] * h[f.support[k]];
        if (dot == 0) continue;
        std::int64_t scale = 0;
        if (__builtin_mul_overflow(f.coefficient, dot, &scale)) return std::nullopt;
        for (std::size_t k = 0; k < f.support.size(); ++k) {
            std::int64_t delta = 0;
            if (__builtin_mul_overflow(scale, f.v[k], &delta)) return std::nullopt;
            std::int64_t x = 0;
            if (__builtin_sub_overflow(std::int64_t(h[f.support[k]]), delta, &x) || !fits(x)) return std::nullopt;
            h[f.support[k]] = std::int32_t(x);
        }
    }
    if (!t.diagonal.empty())
        for (std::size_t k = 0; k < layer.dim; ++k) h[k] = std::int32_t(t.diagonal[k] * h[k]);  // entries in {-1, 0, 1}
    for (std::size_t k = 0; k < t.bias_support.size(); ++k) {
        const std::int64_t x = h[t.bias_support[k]] + t.bias[k];
        if (!fits(x)) return std::nullopt;
        h[t.bias_support[k]] = std::int32_t(x);
    }
    const Readout& r = layer.readout;
    std::size_t best = 0;
    if (r.kind == Readout::Kind::argmax) {
        // The first largest coordinate: the maximum first (a loop that vectorizes), then its place.
        std::int32_t top = h[0];
        for (std::size_t k = 1; k < layer.dim; ++k) top = std::max(top, h[k]);
        while (h[best] != top) ++best;
    } else {
        std::int64_t best_distance = 0;
        for (std::size_t a = 0; a < il.anchors.size(); ++a) {
            std::int64_t d = 0;
            for (std::size_t k = 0; k < layer.dim; ++k) {
                const std::int64_t e = h[k] - il.anchors[a][k];  // both below 2^30 in magnitude
                if (__builtin_add_overflow(d, e * e, &d)) return std::nullopt;
            }
            if (a == 0 || d < best_distance) best = a, best_distance = d;
        }
    }
    return output_symbol(r, r.labels[best], input);
}

std::optional<std::uint32_t> step_integer(const IntegerNetwork& p, std::span<std::int32_t> state, automata::Letter token) {
    const Network& net = *p.network;
    const bool shift = net.wiring == Wiring::shift;
    std::uint32_t upstream_before = 0, upstream_after = 0;
    for (std::size_t i = 0; i < p.layers.size(); ++i) {
        const std::size_t input = input_letter(net, p.classes, i, shift ? upstream_before : upstream_after, token);
        const auto out = step_integer_layer(p, i, state.data() + p.layers[i].offset, input);
        if (!out) return std::nullopt;
        upstream_before = std::uint32_t(state[i]);
        state[i] = std::int32_t(*out);
        upstream_after = *out;
    }
    return std::uint32_t(state[p.layers.size() - 1]);
}

}  // namespace statetrack::lrnn
