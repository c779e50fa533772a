#pragma once
// The transition monoid of a DFA: every map delta(., w), each with a shortest word producing it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "statetrack/automata/dfa.hpp"

namespace statetrack::automata {

using Transformation = std::vector<State>;  // image of every state

struct TransitionMonoid {
    bool complete = false;                          // false: the size limit was reached
    std::size_t limit = 0;
    std::vector<Transformation> elements;           // identity first (the empty word)
    std::vector<std::vector<Letter>> words;         // a shortest word for each element
};

inline constexpr std::size_t default_monoid_limit = 1'000'000;

// Breadth-first closure under right multiplication by letters; stops once `limit` elements exist.
TransitionMonoid transition_monoid(const Dfa& dfa, std::size_t limit = default_monoid_limit);

enum class MonoidClass { group, aperiodic, mixed };
const char* to_string(MonoidClass c);

struct MonoidSummary {
    std::optional<std::size_t> size;                // nullopt: over the limit
    std::optional<MonoidClass> classification;      // nullopt when it could not be decided
    std::vector<std::size_t> group_orders;          // orders of the maximal subgroups found (distinct, sorted)
    std::string message;                            // e.g. "over the limit of 1000000 elements"
};
MonoidSummary summarize_monoid(const Dfa& dfa, std::size_t limit = default_monoid_limit);

}  // namespace statetrack::automata
