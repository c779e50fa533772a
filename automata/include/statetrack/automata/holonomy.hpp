#pragma once
// The holonomy decomposition (Zeiger, Eilenberg; computational form of Egri-Nagy and Nehaniv,
// arXiv 1508.06345, as implemented in SgpDec): the skeleton of a DFA (image orbit, subduction
// classes, depths, tiles, holonomy groups) and the permutation-reset cascade built from it.
// The base set is the set of states reachable from the start (closed under every letter), so
// unreachable states never add levels. docs/cascades.md explains every step.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "statetrack/automata/cascade.hpp"
#include "statetrack/automata/dfa.hpp"

namespace statetrack::automata {

inline constexpr std::size_t default_orbit_limit = 200'000;         // image sets
inline constexpr std::size_t default_cascade_state_limit = 2'000'000;  // reachable cascade states

using SetIndex = std::uint32_t;

// One subduction class: a strongly connected component of the orbit graph (A ~ B when each is an
// image of the other).
struct SkeletonClass {
    SetIndex representative = 0;     // the first member found by the breadth-first orbit search
    std::vector<SetIndex> members;
    std::size_t height = 0;          // 0 for singletons; else 1 + the largest height below
    std::size_t level = 0;           // cascade level (0 = top) for non-singleton classes
    std::vector<SetIndex> tiles;     // maximal proper subsets of the representative in the orbit
    Point first_point = 0;           // where this class's tiles start among the level's points
    LevelGroup group;                // the holonomy group acting on the tiles
};

struct Skeleton {
    std::size_t num_states = 0;             // of the DFA
    std::size_t num_letters = 0;
    std::size_t words = 0;                  // 64-bit words per set
    std::vector<State> base;                // the reachable states, sorted
    std::vector<std::uint64_t> bits;        // set i occupies bits[i*words .. (i+1)*words)
    std::vector<std::uint32_t> sizes;       // cardinality of each set
    std::vector<SetIndex> image;            // image[i*num_letters + a]: index of set i under letter a
    std::vector<std::uint32_t> class_of;    // subduction class of each set
    std::vector<SkeletonClass> classes;
    std::vector<std::vector<State>> from_rep;  // set i = from_rep[i][k] over the sorted representative's k-th state
    std::size_t levels = 0;                 // height of the class of the base set
    std::vector<std::size_t> level_points;  // points of each level
    SetIndex top = 0;                       // the base set

    bool contains(SetIndex set, State q) const { return (bits[set * words + q / 64] >> (q % 64)) & 1U; }
    std::vector<State> elements(SetIndex set) const;
};

// The states reachable from the start, sorted: the base set every construction decomposes.
std::vector<State> base_states(const Dfa& dfa);

// Thrown as LimitError (origin = dfa.name) when the orbit exceeds `orbit_limit` sets.
Skeleton holonomy_skeleton(const Dfa& dfa, std::size_t orbit_limit = default_orbit_limit);

// The holonomy cascade over the skeleton: level l hosts the classes at that level, its points are
// their representatives' tiles. A level a tile chain jumps over holds point 0. LimitError when the
// reachable cascade states exceed `state_limit`.
Cascade holonomy_cascade(const Dfa& dfa, const Skeleton& skeleton,
                         std::size_t state_limit = default_cascade_state_limit);

// Permutation groups given by generators on points 0..degree-1 (p^g = g[p]).
// The order by Schreier-Sims (exact for any degree that fits in memory).
std::size_t group_order(const std::vector<std::vector<Point>>& generators, std::size_t degree);
// A short name for small groups: C_k, S_n, A_n, D_n, "C_2 x C_2", else "order N".
std::string group_name(const std::vector<std::vector<Point>>& generators, std::size_t degree);

}  // namespace statetrack::automata
