#pragma once
// Plain data for a linear RNN: generalized Householder (GH) factors, transitions, layers with a
// readout, and the network with its wiring (docs/lrnn-format.md describes every field).
#include <cstdint>
#include <string>
#include <vector>

#include "statetrack/lrnn/number.hpp"

namespace statetrack::lrnn {

// G = I - (beta / v.v) v v^T. v is kept unnormalised so that G is rational whenever v and beta are.
// Eigenvalues: 1 (on v's orthogonal complement) and 1 - beta (along v); the bound of PAPER.md is
// beta in [0, 2].
struct GhFactor {
    std::vector<Number> v;
    Number beta;
};

// h -> factors (in list order, factors[0] first), then the diagonal (when present), then + bias:
// A = D G_k ... G_1 and H_t = A H_{t-1} + B.
struct Transition {
    std::vector<GhFactor> factors;
    std::vector<Number> diagonal;  // empty, or one entry in [-1, 1] per coordinate
    std::vector<Number> bias;      // empty (zero), or one entry per coordinate
};

// Turns a hidden state into a label, then (label, input letter) into the layer's output symbol.
struct Readout {
    enum class Kind : std::uint8_t { argmax, nearest };
    Kind kind = Kind::argmax;
    std::vector<std::vector<Number>> anchors;  // nearest: candidate states (nearest in Euclidean distance wins)
    std::vector<std::uint32_t> labels;         // argmax: per coordinate; nearest: per anchor
    std::size_t num_labels = 0;
    // Row-major [label * num_inputs + input] -> output symbol; empty means "the output is the label".
    std::vector<std::uint32_t> outputs;
    std::size_t num_outputs = 0;
};

struct Layer {
    std::size_t dim = 0;
    std::vector<Number> h0;
    // Input letter = previous layer's output symbol * |alphabet| + token (layer 0: the token).
    std::size_t num_inputs = 0;
    std::vector<Transition> transitions;       // distinct transitions
    std::vector<std::uint32_t> input_transition;  // per input letter: index into transitions
    Readout readout;
    std::uint32_t initial_output = 0;  // the output symbol before any token (what the next layer reads at t = 1)
};

// shift: layer i+1 at time t reads layer i's output of time t-1 (a one-step causal shift; at t = 1
// the output that the readout gives for H_0). literal: it reads layer i's output of time t, as the
// paper's Theorem 4 is written (wrong for cascades; kept to demonstrate the counterexample).
enum class Wiring : std::uint8_t { shift, literal };
const char* to_string(Wiring wiring);

inline constexpr std::int64_t no_dfa_state = -1;

struct Network {
    std::string name;
    std::string construction;           // e.g. "onehot", "parity", "rotation", "theorem6", "cascade"
    std::vector<std::string> alphabet;  // the tokens
    Wiring wiring = Wiring::shift;
    std::vector<Layer> layers;
    // Per output symbol of the last layer: the DFA state it stands for (no_dfa_state if none) and
    // whether the prefix read so far is accepted.
    std::vector<std::int64_t> states;
    std::vector<bool> accept;
};

// Throws InputError(origin, JSON pointer, ...) on any inconsistency: sizes, indices out of range,
// a zero v, beta outside [0, 2] or a diagonal entry outside [-1, 1] (the eigenvalue bound).
void validate(const Network& network, const std::string& origin = "<model>");

std::size_t total_dimension(const Network& network);

}  // namespace statetrack::lrnn
