#pragma once
// The DFA -> LRNN compiler (PAPER.md Theorems 1-6; docs/lrnn-format.md describes the output).
#include <string>

#include "statetrack/automata/dfa.hpp"
#include "statetrack/lrnn/network.hpp"

namespace statetrack::lrnn {

// automatic: a 2-state group automaton -> "parity" (the scalar -1); any other group automaton ->
//   "onehot"; everything else -> "cascade". Every automatic network has only the entries 0, +-1
//   (exact in every precision, and certifiable for all lengths by exact_closure).
// onehot: group automata, one layer on the reachable states, each letter p - c reflections.
// rotation: cyclic-group automata (m >= 2 states), one 2-D layer, two reflections per letter.
// theorem6: cyclic-group automata, PAPER.md Theorem 6 (two layers, one reflection per letter each).
// cascade: the holonomy cascade, one one-hot layer per level.
enum class Construction { automatic, onehot, parity, rotation, theorem6, cascade };
enum class ResetEncoding { projections, diagonal };

struct CompileOptions {
    Construction construction = Construction::automatic;
    ResetEncoding reset = ResetEncoding::projections;  // cascade resets: n projections (beta = 1), or one zero diagonal
    Wiring wiring = Wiring::shift;
};

const char* to_string(Construction c);
// "auto", "onehot", "parity", "rotation", "theorem6", "cascade"; InputError otherwise.
Construction parse_construction(const std::string& text);

// Builds the network (no checking: see check.hpp). Throws InputError when the requested
// construction does not apply to this DFA (e.g. rotation for a non-cyclic one).
Network compile_dfa(const automata::Dfa& dfa, const CompileOptions& options = {});

// The offsets of a cyclic-group automaton: states q_i = g^i(start) and letter a acting as
// q_i -> q_{i + offset[a] mod m}. Empty when the reachable part is not a cyclic group automaton.
struct CyclicStructure {
    std::vector<automata::State> states;  // q_0 = start, q_1, ..., q_{m-1}
    std::vector<std::size_t> offsets;     // per letter
};
CyclicStructure cyclic_structure(const automata::Dfa& dfa);

}  // namespace statetrack::lrnn
