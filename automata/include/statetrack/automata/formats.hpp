#pragma once
// Reading and writing DFAs: statetrack.dfa/1 JSON, AT&T text (as in MLRegTest), DOT (output only).
// Every reader throws InputError naming the origin and the place (JSON pointer or line number).
// docs/formats.md describes the formats and their conventions.
#include <cstddef>
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

// Documented limit (docs/formats.md): a transition table of more than this many entries
// (states x letters) is refused with a LimitError before anything is allocated.
inline constexpr std::size_t max_table_entries = std::size_t(1) << 28;

Dfa read_dfa_json(const std::string& text, const std::string& origin, LoadNotes* notes = nullptr);
std::string write_dfa_json(const Dfa& dfa);  // statetrack.dfa/1, deterministic output

// AT&T: `src dst in out` arcs (in == out), `q` or `q weight` marks q accepting; state 0 starts.
// Symbols get their names in order of first appearance unless `alphabet` is given.
Dfa read_att(const std::string& text, const std::string& origin, LoadNotes* notes = nullptr,
             const std::vector<std::string>* alphabet = nullptr);
// Every arc of the complete table, then the accepting states. Throws InputError when a symbol
// cannot be written (empty or containing whitespace).
std::string write_att(const Dfa& dfa);
// An OpenFst symbol table (`symbol number` per line, as alph4.txt in MLRegTest): the symbols in
// file order, without the epsilon symbol (number 0).
std::vector<std::string> read_att_symbols(const std::string& text, const std::string& origin);
// For `DIR/NN.rest.att` (MLRegTest naming) the path `DIR/alphN.txt` when that file exists, else "".
std::string att_alphabet_file_for(const std::string& att_path);

// Graphviz: accepting states doublecircle, an arrow into the start state, parallel arcs merged
// into one edge labelled with all their symbols.
std::string write_dot(const Dfa& dfa);
// A human-readable transition table ("->" marks the start, "*" accepting states).
std::string write_table(const Dfa& dfa);

// A DFA argument of the CLI: a path ending in .json or .att, or zoo:NAME[:ARGS]. For .att files the
// MLRegTest alphabet file beside it is used when att_alphabet_file_for finds one. The result is
// validated; completion with a sink is reported in `notes`.
Dfa load_dfa(const std::string& spec, LoadNotes* notes = nullptr);

}  // namespace statetrack::automata
