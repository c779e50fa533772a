#pragma once
// Classic DFA algorithms as free functions over Dfa. Inputs must be valid DFAs (validate() passes,
// as it does for everything the loaders, the zoo and random_dfa return).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"

namespace statetrack::automata {

// Keeps only the states reachable from the start, renumbered in breadth-first order (letters in
// alphabet order). State names are kept.
Dfa trim(const Dfa& dfa);

// Language equivalence of the states of `dfa` (reachable or not), by Hopcroft's partition
// refinement in O(n |Sigma| log n): class_of[q] == class_of[p] iff q and p accept the same words.
// Classes are numbered 0..num_classes-1 in order of their first state.
struct StateClasses {
    std::vector<State> class_of;
    std::size_t num_classes = 0;
};
StateClasses language_classes(const Dfa& dfa);

// The minimal complete DFA of the same language (trim, then Hopcroft); states numbered in
// breadth-first order from the start, so equal languages give identical tables. State names are
// dropped (a merged state has no single name); the name and alphabet are kept.
Dfa minimize(const Dfa& dfa);
// Every state reachable and no two states language-equivalent.
bool is_minimal(const Dfa& dfa);

// A shortest word on which the two DFAs disagree, or nullopt when equivalent (breadth-first search
// over the reachable product). The alphabets must hold the same symbols; b's letters are matched to
// a's by name. Throws InputError when the symbol sets differ.
std::optional<std::vector<Letter>> distinguishing_word(const Dfa& a, const Dfa& b);
inline bool equivalent(const Dfa& a, const Dfa& b) { return !distinguishing_word(a, b).has_value(); }

// Boolean operations. Binary ones use the product construction (reachable part only, states in
// breadth-first order) and the same alphabet rule as distinguishing_word; results have no state names.
Dfa complement(const Dfa& dfa);
Dfa intersection(const Dfa& a, const Dfa& b);
Dfa union_of(const Dfa& a, const Dfa& b);
Dfa difference(const Dfa& a, const Dfa& b);  // L(a) minus L(b)

// Calls visit(word) for every word of exactly `length` letters in lexicographic order; stops
// early when visit returns false.
void enumerate_words(std::size_t num_letters, std::size_t length,
                     const std::function<bool(const std::vector<Letter>&)>& visit);

// Seeded random DFAs, reproducible for a given seed on every platform: std::mt19937_64 with our own
// integer mapping (not std::uniform_int_distribution, whose output differs between libraries).
enum class RandomKind { uniform, permutation, mixed };
const char* to_string(RandomKind kind);
RandomKind parse_random_kind(const std::string& text);  // "uniform" | "permutation" | "mixed", else InputError
struct RandomDfaOptions {
    std::size_t states = 5;
    std::size_t letters = 2;
    RandomKind kind = RandomKind::uniform;
    std::uint64_t seed = 1;
    double accepting_probability = 0.5;
};
inline constexpr std::size_t max_random_dfa_states = std::size_t(1) << 28;
inline constexpr std::size_t max_random_dfa_letters = 1024;
// uniform: every target uniform; permutation: every letter a random permutation; mixed: each
// letter is a permutation, a reset (constant map) or an arbitrary map, chosen at random, and with
// two or more letters at least one permutation and one reset. Start 0; symbols "0", "1", ...
// Throws InputError (LimitError beyond the max_* limits) for zero states or letters, or a
// probability outside [0, 1].
Dfa random_dfa(const RandomDfaOptions& options);

}  // namespace statetrack::automata
