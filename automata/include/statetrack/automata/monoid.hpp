#pragma once
// The transition monoid of a DFA: every map delta(., w), each with a shortest word producing it.
// docs/zoo.md ("Transition monoids") says exactly what summarize_monoid reports.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"

namespace statetrack::automata {

using Transformation = std::vector<State>;  // image of every state

struct TransitionMonoid {
    bool complete = false;                          // false: the size limit was reached
    std::size_t limit = 0;                          // the limit that applied (see monoid_element_limit)
    std::vector<Transformation> elements;           // identity first (the empty word), then in BFS order
    std::vector<std::vector<Letter>> words;         // a shortest word for each element
};

// 10^6 elements: a random 9-state 3-letter DFA (monoid ~10^8) is cut off in well under a second
// (docs/PERFORMANCE.md, "Transition monoid").
inline constexpr std::size_t default_monoid_limit = 1'000'000;
// The closure also stops when its elements would take more than this many bytes, so DFAs with many
// states can neither exhaust memory nor take long (the time is about proportional to the bytes);
// the element limit then shrinks accordingly (below the default 10^6 from 25 states on).
inline constexpr std::size_t monoid_memory_budget_bytes = std::size_t(64) << 20;

// The element limit that applies to a DFA with this many states: min(limit, what fits the memory
// budget), and at least 1 (the identity).
std::size_t monoid_element_limit(std::size_t num_states, std::size_t limit = default_monoid_limit);

// Breadth-first closure under right multiplication by letters (element w, letter a -> wa, i.e.
// first w then a); complete when the closure has at most `limit` elements.
TransitionMonoid transition_monoid(const Dfa& dfa, std::size_t limit = default_monoid_limit);

enum class MonoidClass { group, aperiodic, mixed };
const char* to_string(MonoidClass c);

struct MonoidSummary {
    std::optional<std::size_t> size;                // nullopt: over the limit
    std::optional<MonoidClass> classification;      // nullopt when it could not be decided
    // Complete monoids only: the orders of the non-trivial maximal subgroups (the H-classes of the
    // idempotents), distinct, sorted. Empty for an aperiodic monoid and whenever over the limit.
    std::vector<std::size_t> group_orders;
    // A shortest word whose transformation x has a non-trivial period (x^k != x^(k+1) for all k),
    // proving the monoid is not aperiodic; period is the order of the cyclic group x generates
    // (the lcm of the cycle lengths of x, saturated at SIZE_MAX). Empty / 0 when there is none.
    std::vector<Letter> witness;
    std::size_t witness_period = 0;
    std::size_t elements_seen = 0;                  // elements enumerated (the size when complete)
    std::string message;                            // e.g. "over the limit of 1000000 elements; ..."
};
// Classification: group when every letter is a permutation of the states (and the monoid is not
// trivial); aperiodic when no element has a non-trivial period (the trivial monoid counts as
// aperiodic); mixed otherwise. Over the limit it still decides group (all letters permutations)
// and mixed (a witness seen and some letter not a permutation), and says so in the message.
MonoidSummary summarize_monoid(const Dfa& dfa, std::size_t limit = default_monoid_limit);

}  // namespace statetrack::automata
