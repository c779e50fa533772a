#pragma once
// Exporting a trained model's per-token transitions for one word in the statetrack.lrnn/1 layout
// (docs/training.md, "Exporting learned transitions"), so lrnn's analysis and evaluation tools can
// read what the model learned.
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"
#include "statetrack/gpu/checkpoint.hpp"
#include "statetrack/lrnn/network.hpp"

namespace statetrack::gpu {

// Longest exported word and largest head state (head_dim^2 coordinates, lrnn's dimension limit).
inline constexpr std::size_t max_export_positions = 4096;
inline constexpr std::size_t max_export_dimension = 65536;
// Memory bounds. Written: layers * heads * |word| * (F + 1) * head_dim^2 non-zero numbers; the JSON
// writer builds a DOM, ~2 KB per number (256 letters of a 2-layer d_model 16 deltanet: 2^18
// numbers, a 19 MB file, 0.5 GB). Held: the Network stores every factor's v densely,
// layers * heads * |word| * (F * head_dim + 2) * head_dim^2 numbers of ~72 bytes.
inline constexpr std::size_t max_export_numbers = std::size_t(1) << 20;
inline constexpr std::size_t max_export_held_numbers = std::size_t(1) << 24;

// One lrnn layer per (layer, head), index layer * heads + head, whose state is the head's matrix
// state S (row-major, coordinate r * head_dim + c) and H_0 = 0. Input letter "t<i>" (one per
// position i = 1..|word|) carries the transition at position i, computed in fp64 by the CPU forward
// pass: the GH factors (e_c (x) k_j, beta_j |k_j|^2) for j = 1..F, c = 0..head_dim-1 (deltanet,
// deltaproduct) or the diagonal a (mamba), plus the bias B = the write terms flattened. Readouts are
// one constant label: the model's readout (norms, MLP, head) is not linear. Validated before it is
// returned. Throws InputError for the LSTM, an empty or too long word, a letter outside the task's
// alphabet, or a head too large.
lrnn::Network export_transitions(const Checkpoint& checkpoint, const std::vector<automata::Letter>& word,
                                 const std::string& name);

// The lrnn layer index of (layer, head).
inline std::size_t export_layer_index(const Checkpoint& checkpoint, std::size_t layer, std::size_t head) {
    return layer * checkpoint.options.model.heads + head;
}

}  // namespace statetrack::gpu
