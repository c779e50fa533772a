#pragma once
// Krohn-Rhodes decomposition of a DFA into a cascade of permutation-reset automata: the holonomy
// decomposition (holonomy.hpp), the banned-state construction, and the choice between them.
#include <cstddef>
#include <functional>
#include <string>

#include "statetrack/automata/cascade.hpp"
#include "statetrack/automata/dfa.hpp"
#include "statetrack/automata/holonomy.hpp"

namespace statetrack::automata {

// The banned-state construction: with m reachable states, m-1 levels of m, m-1, ..., 2 points.
// Level k holds a state b_k the DFA is not in, chosen among the states not banned by the levels
// above; the DFA's state is the one state no level bans. A letter that is injective on the states
// level k may still hold permutes them, any other letter resets the level to a state outside its
// image. LimitError when the reachable cascade states exceed `state_limit`.
Cascade banned_state_cascade(const Dfa& dfa, std::size_t state_limit = default_cascade_state_limit);

// A group automaton (every letter a permutation of the reachable states) as one level: the DFA itself.
bool is_group_automaton(const Dfa& dfa);
Cascade single_level_cascade(const Dfa& dfa);

enum class DecomposeMethod { holonomy, banned };

struct DecomposeOptions {
    DecomposeMethod method = DecomposeMethod::holonomy;
    std::size_t orbit_limit = default_orbit_limit;        // beyond it, holonomy falls back to banned
    std::size_t state_limit = default_cascade_state_limit;
    std::function<void(const std::string&)> progress;     // optional: phase messages
};

// holonomy: a group automaton gives method "single"; an orbit over the limit falls back to the
// banned-state construction (method "banned", and `fallback_reason` says why). banned: always banned.
struct Decomposition {
    Cascade cascade;
    std::string fallback_reason;  // empty unless holonomy fell back
    std::size_t orbit_sets = 0;   // size of the image orbit (holonomy only)
};
Decomposition decompose(const Dfa& dfa, const DecomposeOptions& options = {});

}  // namespace statetrack::automata
