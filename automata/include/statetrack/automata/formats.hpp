#pragma once
// Reading and writing DFAs: statetrack.dfa/1 JSON, AT&T text (as in MLRegTest), DOT (output only).
// Every reader throws InputError naming the origin and the place (JSON pointer or line number).
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"

namespace statetrack::automata {

// What a loader had to do to the input beyond reading it (e.g. "added a rejecting sink state 7 for
// 12 missing arcs"). Empty when the input was already a complete DFA.
struct LoadNotes {
    bool added_sink = false;
    std::size_t missing_arcs = 0;
    std::vector<std::string> messages;
};

Dfa read_dfa_json(const std::string& text, const std::string& origin, LoadNotes* notes = nullptr);
std::string write_dfa_json(const Dfa& dfa);  // statetrack.dfa/1, deterministic output

// AT&T: `src dst in out` arcs (in == out), `q` or `q weight` marks q accepting; state 0 starts.
// Symbols get their names in order of first appearance unless `alphabet` is given.
Dfa read_att(const std::string& text, const std::string& origin, LoadNotes* notes = nullptr,
             const std::vector<std::string>* alphabet = nullptr);
std::string write_att(const Dfa& dfa);
std::string write_dot(const Dfa& dfa);

// A DFA argument of the CLI: a path ending in .json or .att, or zoo:NAME[:ARGS].
Dfa load_dfa(const std::string& spec, LoadNotes* notes = nullptr);

}  // namespace statetrack::automata
