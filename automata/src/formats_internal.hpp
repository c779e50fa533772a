#pragma once
// Shared by the DFA readers (formats_*.cpp); not part of the public API.
#include <string>

#include "statetrack/automata/formats.hpp"

namespace statetrack::automata::detail {

// `dfa.delta` may hold no_state for missing arcs: redirect them to a new rejecting sink state
// (appended last) and record that in `notes`. Does nothing when no arc is missing.
void complete_with_sink(Dfa& dfa, LoadNotes* notes);

// Throws LimitError (file = origin) when states x letters exceeds max_table_entries.
void check_table_size(std::size_t states, std::size_t letters, const std::string& origin, const std::string& place);

}  // namespace statetrack::automata::detail
