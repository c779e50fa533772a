#pragma once
// Plain data for a linear RNN: generalized Householder (GH) factors, transitions, layers with a
// readout, and the network with its wiring (docs/lrnn-format.md describes every field).
#include <cstdint>
#include <string>
#include <vector>

#include "statetrack/lrnn/number.hpp"

namespace statetrack::lrnn {

// A vector of dimension `dim` that stores only its non-zero entries, sorted by index: a reset's
// projections I - e_i e_i^T cost one number each instead of dim (O(nnz) memory and work).
struct SparseEntry {
    std::uint32_t index = 0;
    Number value;
};
struct SparseVector {
    std::size_t dim = 0;
    std::vector<SparseEntry> entries;  // strictly increasing indices below dim; never an exact zero
};
// The sparse form of a dense vector (exact zeros dropped), and back.
SparseVector sparse_vector(const std::vector<Number>& dense);
std::vector<Number> dense_vector(const SparseVector& v);
// e_i of dimension dim.
SparseVector unit_vector(std::size_t dim, std::size_t i);

// G = I - (beta / v.v) v v^T. v is kept unnormalised so that G is rational whenever v and beta are.
// Eigenvalues: 1 (on v's orthogonal complement) and 1 - beta (along v); the bound of PAPER.md is
// beta in [0, 2]. Applying G to h costs O(nnz(v)): h -= (beta / v.v) (v.h) v.
struct GhFactor {
    SparseVector v;
    Number beta;
};

// h -> factors (in list order, factors[0] first), then the diagonal (when present), then + bias:
// A = D G_k ... G_1 and H_t = A H_{t-1} + B.
struct Transition {
    std::vector<GhFactor> factors;
    std::vector<Number> diagonal;  // empty, or one entry in [-1, 1] per coordinate
    std::vector<Number> bias;      // empty (zero), or one entry per coordinate
};

// One entry of a readout's output table: on its input letter, `label` gives `output`.
struct LabelOutput {
    std::uint32_t label = 0;
    std::uint32_t output = 0;
};

// Turns a hidden state into a label, then (label, input letter) into the layer's output symbol.
struct Readout {
    enum class Kind : std::uint8_t { argmax, nearest };
    Kind kind = Kind::argmax;
    std::vector<std::vector<Number>> anchors;  // nearest: candidate states (nearest in Euclidean distance wins)
    std::vector<std::uint32_t> labels;         // argmax: per coordinate; nearest: per anchor
    std::size_t num_labels = 0;
    // The output table (label, input letter) -> output symbol, stored per input letter x as the
    // entries outputs[output_start[x] .. output_start[x + 1]), sorted by label; a label not listed
    // gives output 0. Only the pairs that occur are stored (a cascade layer's dense table would be
    // labels x inputs). Empty output_start: no table, the output is the label.
    std::vector<std::uint32_t> output_start;
    std::vector<LabelOutput> outputs;
    std::size_t num_outputs = 0;
};
// The output symbol for `label` on input letter `input` (the readout's table, or the label).
std::uint32_t output_symbol(const Readout& readout, std::uint32_t label, std::size_t input);

struct Layer {
    std::size_t dim = 0;
    std::vector<Number> h0;
    // Input letter = previous layer's output symbol * token classes + class of the token (layer 0:
    // the token's class); see Network::token_class.
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
    // Tokens that act alike share one input embedding: token_class[a] is token a's class, classes
    // numbered 0..C-1. Empty: every token is its own class (C = |alphabet|). A 64-letter DFA whose
    // letters act in 5 ways then has layers of 5 x (outputs above) input letters instead of 64 x.
    std::vector<std::uint32_t> token_class;
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
// C: the number of token classes (1 + the largest class, or |alphabet| without classes).
std::size_t num_token_classes(const Network& network);
// The input letter of layer `layer` for `token`, given the output symbol it reads from the layer
// above (ignored for layer 0); `classes` is num_token_classes(network), computed once by the caller.
inline std::size_t input_letter(const Network& network, std::size_t classes, std::size_t layer, std::uint32_t upstream,
                                std::uint32_t token) {
    const std::size_t c = network.token_class.empty() ? token : network.token_class[token];
    return layer == 0 ? c : std::size_t(upstream) * classes + c;
}

}  // namespace statetrack::lrnn
