#pragma once
// Private: the template definitions of evaluate.hpp, included by the three TUs that instantiate
// them (eval_ieee.cpp, eval_mpfr.cpp, eval_exact.cpp). A scalar type plugs in through
// ScalarTraits<T>: conversion from a Number, and the comparisons a readout needs (certain or not).
#include <fmt/format.h>

#include <numeric>
#include <optional>

#include "numeric.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/lrnn/scalars.hpp"

namespace statetrack::lrnn::detail {

template <class T>
struct ScalarTraits;  // from_number, coefficient, less (a < b for sure), text

// An exact integer of at most 9 digits (the entries of every compiled network), else nullopt.
inline std::optional<long long> small_integer(const std::string& exact) {
    if (exact.empty() || exact.size() > 10 || exact.find('/') != std::string::npos) return std::nullopt;
    return std::stoll(exact);
}

// beta / v.v as a Number: exact when every input is, else at high precision.
inline Number factor_coefficient(const GhFactor& f) {
    bool exact = f.beta.is_exact();
    for (const auto& [i, x] : f.v.entries) exact = exact && x.is_exact();
    if (exact) {
        // Small integer entries and beta = p/q small (projections, reflections): in machine integers.
        long long dot = 0;
        bool small = true;
        for (const auto& [i, x] : f.v.entries) {
            const auto value = small_integer(x.exact);
            small = small && value && *value > -46341 && *value < 46341;  // squares below 2^31
            if (!small) break;
            dot += *value * *value;
        }
        const auto slash = f.beta.exact.find('/');
        const auto p = small_integer(f.beta.exact.substr(0, slash));
        const auto q = slash == std::string::npos ? std::optional<long long>(1) : small_integer(f.beta.exact.substr(slash + 1));
        if (small && p && q && *q > 0 && *q < (1LL << 31) && dot > 0 && dot < (1LL << 31) && *q * dot < (1LL << 53)) {
            long long num = *p, den = *q * dot;
            const long long g = std::gcd(num < 0 ? -num : num, den);
            num /= g, den /= g;
            if (den == 1) return integer(num);
            // Both below 2^53: the division is the correctly rounded nearest double.
            return Number{fmt::format("{}/{}", num, den), double(num) / double(den), {}};
        }
        Rational d = 0;
        for (const auto& [i, x] : f.v.entries) d += exact_value(x) * exact_value(x);
        return from_rational(exact_value(f.beta) / d);
    }
    mpfr_t dot, y, c;
    mpfr_inits2(high_bits, dot, y, c, static_cast<mpfr_ptr>(nullptr));
    mpfr_set_zero(dot, 1);
    for (const auto& [i, x] : f.v.entries) {
        set_value(y, x);
        mpfr_sqr(y, y, MPFR_RNDN);
        mpfr_add(dot, dot, y, MPFR_RNDN);
    }
    set_value(c, f.beta);
    mpfr_div(c, c, dot, MPFR_RNDN);
    Number result = from_mpfr(c);
    mpfr_clears(dot, y, c, static_cast<mpfr_ptr>(nullptr));
    return result;
}

inline bool is_zero_number(const Number& x) { return x.is_exact() ? x.is_zero() : x.approx == 0 && x.high.empty(); }

}  // namespace statetrack::lrnn::detail

namespace statetrack::lrnn {

template <class T>
PreparedNetwork<T> prepare(const Network& network) {
    using Tr = detail::ScalarTraits<T>;
    PreparedNetwork<T> p;
    p.network = &network;
    p.classes = num_token_classes(network);
    for (const auto& layer : network.layers) {
        PreparedLayer<T> pl;
        for (const auto& x : layer.h0) pl.h0.push_back(Tr::from_number(x));
        for (const auto& t : layer.transitions) {
            PreparedTransition<T> pt;
            std::size_t entries = 0;
            for (const auto& f : t.factors) entries += f.v.entries.size();
            pt.support.reserve(entries);
            pt.v.reserve(entries);
            pt.factors.reserve(t.factors.size());
            for (const auto& f : t.factors) {
                PreparedFactor<T> pf;
                pf.begin = std::uint32_t(pt.support.size());
                for (const auto& [i, x] : f.v.entries)
                    if (!detail::is_zero_number(x)) {
                        pt.support.push_back(i);
                        pt.v.push_back(Tr::from_number(x));
                    }
                pf.end = std::uint32_t(pt.support.size());
                pf.coefficient = Tr::coefficient(f);
                pt.factors.push_back(std::move(pf));
            }
            for (const auto& d : t.diagonal) pt.diagonal.push_back(Tr::from_number(d));
            for (std::size_t i = 0; i < t.bias.size(); ++i)
                if (!detail::is_zero_number(t.bias[i])) {
                    pt.bias_support.push_back(std::uint32_t(i));
                    pt.bias.push_back(Tr::from_number(t.bias[i]));
                }
            pl.transitions.push_back(std::move(pt));
        }
        for (const auto& a : layer.readout.anchors) {
            std::vector<T> anchor;
            for (const auto& x : a) anchor.push_back(Tr::from_number(x));
            pl.anchors.push_back(std::move(anchor));
        }
        p.layers.push_back(std::move(pl));
    }
    return p;
}

template <class T>
NetworkState<T> initial_state(const PreparedNetwork<T>& prepared) {
    NetworkState<T> s;
    for (std::size_t i = 0; i < prepared.layers.size(); ++i) {
        s.hidden.push_back(prepared.layers[i].h0);
        s.outputs.push_back(prepared.network->layers[i].initial_output);
    }
    return s;
}

template <class T>
std::uint32_t read_label(const PreparedNetwork<T>& prepared, std::size_t layer, const std::vector<T>& h, bool& certain) {
    using Tr = detail::ScalarTraits<T>;
    const Readout& r = prepared.network->layers[layer].readout;
    std::size_t best = 0;
    if (r.kind == Readout::Kind::argmax) {
        for (std::size_t i = 1; i < h.size(); ++i)
            if (Tr::less(h[best], h[i])) best = i;
        if constexpr (Tr::is_interval)
            for (std::size_t i = 0; i < h.size(); ++i)
                if (i != best && !Tr::surely_less(h[i], h[best])) certain = false;
        return r.labels[best];
    }
    const auto& anchors = prepared.layers[layer].anchors;
    std::vector<T> dist(anchors.size());
    for (std::size_t k = 0; k < anchors.size(); ++k) {
        T d = T(0);
        for (std::size_t i = 0; i < h.size(); ++i) {
            const T e = T(h[i] - anchors[k][i]);
            d = T(d + T(e * e));
        }
        dist[k] = d;
        if (Tr::less(d, dist[best])) best = k;
    }
    if constexpr (Tr::is_interval)
        for (std::size_t k = 0; k < anchors.size(); ++k)
            if (k != best && r.labels[k] != r.labels[best] && !Tr::surely_less(dist[best], dist[k])) certain = false;
    return r.labels[best];
}

template <class T>
std::uint32_t step(const PreparedNetwork<T>& prepared, NetworkState<T>& state, automata::Letter token) {
    const Network& net = *prepared.network;
    const bool shift = net.wiring == Wiring::shift;
    std::uint32_t upstream_before = 0, upstream_after = 0;
    for (std::size_t i = 0; i < prepared.layers.size(); ++i) {
        const Layer& layer = net.layers[i];
        const std::size_t input = input_letter(net, prepared.classes, i, shift ? upstream_before : upstream_after, token);
        const PreparedTransition<T>& t = prepared.layers[i].transitions[layer.input_transition[input]];
        std::vector<T>& h = state.hidden[i];
        for (const auto& f : t.factors) {
            T dot = T(0);
            for (std::uint32_t k = f.begin; k < f.end; ++k) dot = T(dot + T(t.v[k] * h[t.support[k]]));
            const T scale = T(f.coefficient * dot);
            for (std::uint32_t k = f.begin; k < f.end; ++k) {
                T& x = h[t.support[k]];
                x = T(x - T(scale * t.v[k]));
            }
        }
        if (!t.diagonal.empty())
            for (std::size_t k = 0; k < h.size(); ++k) h[k] = T(t.diagonal[k] * h[k]);
        for (std::size_t k = 0; k < t.bias_support.size(); ++k) {
            T& x = h[t.bias_support[k]];
            x = T(x + t.bias[k]);
        }
        bool certain = true;
        const std::uint32_t label = read_label(prepared, i, h, certain);
        state.certain = state.certain && certain;
        const std::uint32_t out = output_symbol(layer.readout, label, input);
        upstream_before = state.outputs[i];
        state.outputs[i] = out;
        upstream_after = out;
    }
    return state.outputs.back();
}

template <class T>
std::string to_text(const T& value) {
    return detail::ScalarTraits<T>::text(value);
}

#define STATETRACK_LRNN_EVAL_INSTANTIATE(T)                                                       \
    template PreparedNetwork<T> prepare<T>(const Network&);                                       \
    template NetworkState<T> initial_state<T>(const PreparedNetwork<T>&);                         \
    template std::uint32_t step<T>(const PreparedNetwork<T>&, NetworkState<T>&, automata::Letter); \
    template std::uint32_t read_label<T>(const PreparedNetwork<T>&, std::size_t, const std::vector<T>&, bool&); \
    template std::string to_text<T>(const T&);

}  // namespace statetrack::lrnn
