#pragma once
// A cascade of permutation-reset automata (PAPER.md, Definition 1 and Theorem 5) and its exact
// simulator. Level 0 is the top level. Level i reads the letter and the coordinates of levels
// 0..i-1 *before* they update, and acts on its own points by a permutation, a constant map (a
// reset to one point) or the identity.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"

namespace statetrack::automata {

using Point = std::uint32_t;
using Coordinates = std::vector<Point>;  // one point per level, top level first

struct LevelAction {
    enum class Kind : std::uint8_t { identity, permutation, constant };
    Kind kind = Kind::identity;
    std::vector<Point> map;  // permutation: map[p] is the image of p; constant: {r}; identity: {}
    Point apply(Point p) const {
        return kind == Kind::identity ? p : kind == Kind::constant ? map[0] : map[p];
    }
};

struct CascadeLevel {
    std::size_t points = 0;
    // The dependency function: for the coordinates of the levels above (a prefix of length i),
    // one action per letter. Prefixes not listed act as the identity for every letter.
    std::map<Coordinates, std::vector<LevelAction>> actions;
};

struct Cascade {
    std::string method;                   // "holonomy", "banned" or "single" (a group automaton)
    std::vector<std::string> alphabet;
    std::vector<CascadeLevel> levels;
    Coordinates start;                    // coordinates of the DFA's start state
    std::map<Coordinates, State> decode;  // every reachable cascade state -> the DFA state it stands for
};

// The action of `letter` on level `level` given the coordinates of the levels above.
const LevelAction& level_action(const Cascade& cascade, std::size_t level, std::span<const Point> above, Letter letter);
// One step of the cascade: every level reads the coordinates above it before they update.
Coordinates step(const Cascade& cascade, const Coordinates& coords, Letter letter);

}  // namespace statetrack::automata
