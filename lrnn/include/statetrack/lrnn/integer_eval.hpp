#pragma once
// The integer fast path of exact evaluation. Every network the compiler builds by default (one-hot,
// parity, cascade) is an *integer network*: every stored number is an integer and every GH
// coefficient beta / v.v is one too, so every reachable hidden vector is an integer vector and
// evaluation in machine integers is exact. Same semantics as step<Rational> (evaluate.hpp): factors
// in order, then the diagonal, then the bias; argmax takes the first largest coordinate, nearest
// the first closest anchor; shift or literal wiring.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "statetrack/automata/dfa.hpp"
#include "statetrack/lrnn/network.hpp"

namespace statetrack::lrnn {

// Values a hidden coordinate may reach before the fast path gives up (the caller then falls back
// to rationals); no construction of the toolkit comes near it.
inline constexpr std::int64_t integer_value_guard = std::int64_t(1) << 30;

struct IntegerFactor {
    std::vector<std::uint32_t> support;  // coordinates where v is not zero
    std::vector<std::int64_t> v;         // v on the support
    std::int64_t coefficient = 0;        // beta / v.v, an integer
    // A run of consecutive projections onto single coordinates (beta / v.v * v_k^2 = 1, which set
    // h_k to 0): `support` lists those coordinates and `v` is empty. A reset's n projections
    // become one such run; when its coordinates are consecutive, `support` is empty and the run is
    // zero_begin .. zero_end - 1.
    bool zeroes = false;
    std::uint32_t zero_begin = 0, zero_end = 0;
};

struct IntegerTransition {
    std::vector<IntegerFactor> factors;
    std::vector<std::int64_t> diagonal;  // empty: none
    std::vector<std::uint32_t> bias_support;
    std::vector<std::int64_t> bias;      // on bias_support
};

struct IntegerLayer {
    std::size_t offset = 0;  // where this layer's hidden vector starts in the packed state
    std::vector<IntegerTransition> transitions;
    std::vector<std::vector<std::int64_t>> anchors;
};

// The packed state of a network: [output symbol of every layer..., hidden of layer 0..., hidden of
// layer 1..., ...], one int32 each, so that a state is one flat key (the closure hashes it).
struct IntegerNetwork {
    const Network* network = nullptr;  // must outlive this
    std::size_t classes = 0;            // num_token_classes(*network)
    std::vector<IntegerLayer> layers;
    std::vector<std::int32_t> initial;  // the packed start state
    std::size_t state_size() const { return initial.size(); }
};

// The integer form of an integer network; nullopt when some entry or coefficient is not an integer
// (or beyond integer_value_guard).
std::optional<IntegerNetwork> prepare_integer(const Network& network);

// Reads one token into the packed state; returns the last layer's output symbol, or nullopt when a
// coordinate left [-integer_value_guard, integer_value_guard] (the state is then unspecified).
std::optional<std::uint32_t> step_integer(const IntegerNetwork& network, std::span<std::int32_t> state, automata::Letter token);
// One layer of that step: input letter `input` into layer `layer`'s hidden vector h; its output
// symbol, or nullopt past the guard.
std::optional<std::uint32_t> step_integer_layer(const IntegerNetwork& network, std::size_t layer, std::int32_t* h, std::size_t input);

}  // namespace statetrack::lrnn
