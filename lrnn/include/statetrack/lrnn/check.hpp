#pragma once
// Checks of a network against a DFA: exhaustive on all short words, on random words, and the exact
// all-length closure (the certificate the compiler and `statetrack verify` rely on).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"
#include "statetrack/lrnn/evaluate.hpp"
#include "statetrack/lrnn/network.hpp"
#include "statetrack/lrnn/precision.hpp"

namespace statetrack::lrnn {

// Throws InputError when the network's alphabet differs from the DFA's (same symbols, same order).
void check_same_alphabet(const Network& network, const automata::Dfa& dfa);

// True when every stored number (h0, factors, diagonals, biases, anchors) is an exact rational:
// the exact closure applies and exact evaluation is possible.
bool is_rational(const Network& network);

// The text key that identifies a pair (DFA state, network state) in the exact closure: equal keys
// iff equal DFA states, equal output symbols and equal hidden vectors (to_text of every entry).
// Instantiated for every scalar type of scalars.hpp.
template <class T>
std::string state_key(automata::State q, const NetworkState<T>& state);

// The letters a closure must try: one per group of letters that the network reads as one token
// class and the DFA moves alike (every state to the same state), the first of each group. Words
// over the others take the same paths, so the closure and its shortest counterexample are the same.
std::vector<automata::Letter> closure_letters(const Network& network, const automata::Dfa& dfa);

struct ClosureOptions {
    std::size_t max_pairs = 2'000'000;
    bool check_states = true;  // also require the read-out DFA state to equal the DFA's state
};

// Breadth-first closure over pairs (DFA state, exact rational network state: every layer's hidden
// vector and output symbol, which includes what the shift wiring carries) from the start pair.
// When it completes, the network agrees with the DFA on every word of every length iff no edge
// reaches a disagreeing pair; a disagreement gives a shortest counterexample word.
struct ClosureResult {
    bool applicable = true;  // false: the network has irrational entries (no exact states)
    bool complete = false;   // false: stopped at max_pairs (or not applicable)
    bool certified = false;  // complete and no disagreement
    std::size_t pairs = 0;
    std::optional<std::vector<automata::Letter>> counterexample;
    std::string message;
};
ClosureResult exact_closure(const Network& network, const automata::Dfa& dfa, const ClosureOptions& options = {});

struct WordCheck {
    bool ok = true;
    std::size_t words = 0;       // words (or prefixes) compared
    std::size_t max_length = 0;  // longest length compared
    std::optional<std::vector<automata::Letter>> counterexample;  // a failing word (its last prefix fails)
    std::string precision;
};
// Every word of length 1..max_length (prefixes share their computation).
WordCheck check_all_words(const Network& network, const automata::Dfa& dfa, std::size_t max_length,
                          const Precision& precision, bool check_states = true);
// `count` random words of length 1..max_length (fixed seed); every prefix is compared.
WordCheck check_random_words(const Network& network, const automata::Dfa& dfa, std::size_t count, std::size_t max_length,
                             std::uint64_t seed, const Precision& precision, bool check_states = true);
// The largest L such that all words of length <= L are at most `budget` steps.
std::size_t exhaustive_length(std::size_t letters, std::size_t budget);

// What the compiler runs before it writes a network: all words up to a length (exact, or
// interval:256 for irrational networks), then the exact closure (rational networks) or random
// long words in mpfr:256 (irrational ones: intervals widen geometrically under rotations).
struct CompileCheck {
    bool ok = false;
    WordCheck words;
    ClosureResult closure;
    std::optional<WordCheck> random;
    std::optional<std::vector<automata::Letter>> counterexample;
};
CompileCheck check_against_dfa(const Network& network, const automata::Dfa& dfa);

}  // namespace statetrack::lrnn
