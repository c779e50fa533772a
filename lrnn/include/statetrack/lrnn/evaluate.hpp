#pragma once
// Scalar-generic evaluation. A Network is first prepared for a scalar type T (every number
// converted once, GH factors reduced to their support and coefficient beta / v.v), then stepped
// token by token. T is one of the types in scalars.hpp, explicitly instantiated in the library;
// `run_network` hides the type behind a Precision.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"
#include "statetrack/lrnn/network.hpp"
#include "statetrack/lrnn/precision.hpp"

namespace statetrack::lrnn {

template <class T>
struct PreparedFactor {
    std::uint32_t begin = 0, end = 0;  // v's non-zero entries: the transition's support[begin..end) and v[begin..end)
    T coefficient;                     // beta / v.v, computed exactly or at high precision, then cast
};

template <class T>
struct PreparedTransition {
    std::vector<PreparedFactor<T>> factors;
    std::vector<std::uint32_t> support;  // every factor's non-zero coordinates, factor after factor (one allocation)
    std::vector<T> v;                    // v on the support
    std::vector<T> diagonal;  // empty: none
    std::vector<std::uint32_t> bias_support;
    std::vector<T> bias;      // on bias_support
};

template <class T>
struct PreparedLayer {
    std::vector<T> h0;
    std::vector<PreparedTransition<T>> transitions;
    std::vector<std::vector<T>> anchors;
};

template <class T>
struct PreparedNetwork {
    const Network* network = nullptr;  // must outlive this
    std::size_t classes = 0;           // num_token_classes(*network)
    std::vector<PreparedLayer<T>> layers;
};

// The whole state of a network between tokens: every layer's hidden vector and every layer's
// latest output symbol (what the next layer reads under the shift wiring).
template <class T>
struct NetworkState {
    std::vector<std::vector<T>> hidden;
    std::vector<std::uint32_t> outputs;
    bool certain = true;  // intervals: false once a readout could not be decided
};

template <class T>
PreparedNetwork<T> prepare(const Network& network);
template <class T>
NetworkState<T> initial_state(const PreparedNetwork<T>& prepared);
// Reads one token; returns the last layer's output symbol (index into network.states / accept).
template <class T>
std::uint32_t step(const PreparedNetwork<T>& prepared, NetworkState<T>& state, automata::Letter token);
// The readout label of a hidden vector (used for H_0 and by checks).
template <class T>
std::uint32_t read_label(const PreparedNetwork<T>& prepared, std::size_t layer, const std::vector<T>& hidden, bool& certain);
template <class T>
std::string to_text(const T& value);

struct RunOutput {
    std::vector<std::optional<bool>> accept;  // per prefix (after each token); nullopt: undecided (intervals)
    std::vector<std::int64_t> states;         // per prefix: the DFA state the network reads out
    // With trace: per prefix, per layer, the hidden vector as text.
    std::vector<std::vector<std::vector<std::string>>> trace;
    std::vector<std::vector<std::uint32_t>> outputs;  // with trace: per prefix, per layer, the output symbol
};

// Evaluates on a word of token indices (checked against the alphabet). Throws InputError when the
// precision cannot represent the network (exact with irrational entries).
RunOutput run_network(const Network& network, std::span<const automata::Letter> word, const Precision& precision,
                      bool trace = false);

}  // namespace statetrack::lrnn
