#pragma once
// The deterministic finite automaton: the plain data type every other module reads.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace statetrack::automata {

using State = std::uint32_t;
using Letter = std::uint32_t;
inline constexpr State no_state = static_cast<State>(-1);

// A complete DFA (Sigma, Q, q0, delta, F). The transition table is total and stored row-major:
// delta[q * alphabet.size() + a] is the target of state q on letter a. Partial automata are
// completed by the loaders (an explicit rejecting sink) and the completion is reported.
struct Dfa {
    std::string name;
    std::vector<std::string> alphabet;     // symbol names, distinct, non-empty
    std::vector<std::string> state_names;  // empty, or one (possibly empty) name per state
    State start = 0;
    std::vector<bool> accepting;           // one flag per state; its size is the number of states
    std::vector<State> delta;              // num_states() * num_letters() targets

    std::size_t num_states() const { return accepting.size(); }
    std::size_t num_letters() const { return alphabet.size(); }
    State next(State q, Letter a) const { return delta[std::size_t(q) * alphabet.size() + a]; }
    State& next(State q, Letter a) { return delta[std::size_t(q) * alphabet.size() + a]; }
};

// A DFA with n states over the given alphabet, every arc a self-loop, nothing accepting.
Dfa make_dfa(std::size_t num_states, std::vector<std::string> alphabet, std::string name = {});

// Throws InputError (file = origin) when the DFA breaks an invariant: empty alphabet, duplicate or
// empty symbol, no states, start or a target out of range, table or names of the wrong size.
void validate(const Dfa& dfa, const std::string& origin = "<dfa>");

// The state reached from `from` by reading `word`.
State run(const Dfa& dfa, std::span<const Letter> word, State from);
inline State run(const Dfa& dfa, std::span<const Letter> word) { return run(dfa, word, dfa.start); }
inline bool accepts(const Dfa& dfa, std::span<const Letter> word) { return dfa.accepting[run(dfa, word)]; }

// Letter index of a symbol name, or throws InputError naming the word position.
Letter letter_index(const Dfa& dfa, const std::string& symbol);
// Parses a word given as symbols separated by spaces (or, when every symbol is one character,
// also as a plain string like "0110"). Throws InputError for unknown symbols, naming the position.
std::vector<Letter> parse_word(const Dfa& dfa, const std::string& text, const std::string& origin = "word");
std::string format_word(const Dfa& dfa, std::span<const Letter> word);  // symbols joined by spaces

std::string state_label(const Dfa& dfa, State q);  // its name, or its index as text

}  // namespace statetrack::automata
