#pragma once
// Classic DFA algorithms as free functions over Dfa.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "statetrack/automata/dfa.hpp"

namespace statetrack::automata {

// Keeps only the states reachable from the start, renumbered in breadth-first order.
Dfa trim(const Dfa& dfa);
// The minimal complete DFA of the same language (trim, then Hopcroft's O(n |Sigma| log n)
// partition refinement); states numbered in breadth-first order from the start, so equal
// languages give identical tables.
Dfa minimize(const Dfa& dfa);
bool is_minimal(const Dfa& dfa);

// A shortest word on which the two DFAs (same alphabet) disagree, or nullopt when equivalent.
std::optional<std::vector<Letter>> distinguishing_word(const Dfa& a, const Dfa& b);
inline bool equivalent(const Dfa& a, const Dfa& b) { return !distinguishing_word(a, b).has_value(); }

Dfa complement(const Dfa& dfa);
Dfa intersection(const Dfa& a, const Dfa& b);  // product construction, reachable part only
Dfa union_of(const Dfa& a, const Dfa& b);
Dfa difference(const Dfa& a, const Dfa& b);

// Calls visit(word) for every word of exactly `length` letters in lexicographic order; stops
// early when visit returns false.
void enumerate_words(std::size_t num_letters, std::size_t length,
                     const std::function<bool(const std::vector<Letter>&)>& visit);

// Seeded random DFAs (reproducible for a given seed).
enum class RandomKind { uniform, permutation, mixed };
struct RandomDfaOptions {
    std::size_t states = 5;
    std::size_t letters = 2;
    RandomKind kind = RandomKind::uniform;
    std::uint64_t seed = 1;
    double accepting_probability = 0.5;
};
// uniform: every target uniform; permutation: every letter a random permutation; mixed: each
// letter is a permutation, a reset (constant map) or an arbitrary map, chosen at random.
Dfa random_dfa(const RandomDfaOptions& options);

}  // namespace statetrack::automata
