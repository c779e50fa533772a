#pragma once
// The flat machinery behind the holonomy construction and the all-word verification: letters that
// act alike are searched once (LetterClasses), actions are 32-bit codes into one table per level
// (ActionTable), and the reachable prefixes of a level come from those of the level above in
// reused buffers (PrefixSearch). docs/cascades.md ("Speed") explains the choices.
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "statetrack/automata/cascade.hpp"
#include "statetrack/automata/dfa.hpp"

namespace statetrack::automata {

// A partition of the alphabet. Classes are numbered in the order of their smallest letter, which
// is their representative; so a search over representatives in class order meets words in the
// same order as a search over every letter.
struct LetterClasses {
    std::vector<Letter> class_of;        // per letter
    std::vector<Letter> representative;  // per class: its smallest letter
    std::size_t size() const { return representative.size(); }
};
// Letters a ~ b when same(a, b); `same` must be an equivalence. Each letter is compared with the
// representatives before it only.
template <typename Same>
LetterClasses letter_classes(std::size_t letters, Same&& same) {
    LetterClasses classes;
    classes.class_of.resize(letters);
    for (Letter a = 0; a < letters; ++a) {
        std::size_t c = 0;
        while (c < classes.size() && !same(classes.representative[c], a)) ++c;
        if (c == classes.size()) classes.representative.push_back(a);
        classes.class_of[a] = Letter(c);
    }
    return classes;
}
// Letters with equal columns in the DFA's table (equal maps on every state).
LetterClasses dfa_letter_classes(const Dfa& dfa);
// Letters with equal columns in the DFA and equal actions in every action list of every level of
// the cascade. Reading one letter of a class moves every (DFA state, cascade state) pair exactly as
// reading another, so a search over pairs needs the representatives only.
LetterClasses cascade_letter_classes(const Dfa& dfa, const Cascade& cascade);

// The actions of one level as 32-bit codes, one row of `letters` codes per action list. Row 0 is
// the identity for every letter (prefixes that are not listed). A code is a permutation (an
// offset into `maps`, which holds the level's `points` images), a constant (constant_flag | r),
// the identity, or a marked action the search must not apply (bad_flag | k, k < bad_limit).
struct ActionTable {
    static constexpr std::uint32_t constant_flag = 0x80000000U;
    static constexpr std::uint32_t bad_flag = 0xC0000000U;
    static constexpr std::uint32_t identity = 0xFFFFFFFFU;
    static constexpr std::uint32_t bad_limit = 0x3FFFFFFFU;

    std::size_t letters = 0;
    std::size_t points = 0;
    std::vector<std::uint32_t> codes;  // row k: codes[k*letters .. (k+1)*letters)
    std::vector<Point> maps;           // the permutations, `points` images each

    ActionTable() = default;
    ActionTable(std::size_t letters_, std::size_t points_)
        : letters(letters_), points(points_), codes(letters_, identity) {}
    std::size_t rows() const { return letters ? codes.size() / letters : 0; }
    std::span<const std::uint32_t> row(std::uint32_t k) const { return {codes.data() + std::size_t(k) * letters, letters}; }
    // The code of a well-formed action of this level (a permutation map of `points` images whose
    // values are below `points`; the caller checks that).
    std::uint32_t code(const LevelAction& action);
    // Appends a row and returns its index.
    std::uint32_t add_row(std::span<const std::uint32_t> row);

    static bool is_bad(std::uint32_t code) { return code >= bad_flag && code != identity; }
    // The image of point p; never called with a bad code.
    Point apply(std::uint32_t code, Point p) const {
        if (code < constant_flag) [[unlikely]] return maps[code + p];
        return code == identity ? p : code & ~constant_flag;  // a select, not a branch
    }
};

// A hash index from 64-bit keys to 32-bit values: open addressing with linear probing, at most
// half full, two flat arrays (no allocation per entry). `absent` is not a storable value.
class KeyIndex {
public:
    static constexpr std::uint32_t absent = 0xFFFFFFFFU;
    std::size_t size() const { return size_; }
    // The value of `key`, or absent.
    std::uint32_t find(std::uint64_t key) const {
        if (values_.empty()) return absent;
        for (std::size_t s = slot(key);; s = (s + 1) & mask_)
            if (values_[s] == absent || keys_[s] == key) return values_[s];
    }
    // The value of `key`, set to `value` when it had none; second is true when it was set.
    std::pair<std::uint32_t, bool> insert(std::uint64_t key, std::uint32_t value) {
        if (2 * (size_ + 1) > values_.size()) grow();
        std::size_t s = slot(key);
        for (; values_[s] != absent; s = (s + 1) & mask_)
            if (keys_[s] == key) return {values_[s], false};
        keys_[s] = key;
        values_[s] = value;
        ++size_;
        return {value, true};
    }
    void clear() {  // keeps the capacity
        std::fill(values_.begin(), values_.end(), absent);
        size_ = 0;
    }

private:
    std::size_t slot(std::uint64_t key) const {
        key = (key ^ (key >> 31)) * 0x9e3779b97f4a7c15ULL;
        return std::size_t(key >> 17) & mask_;
    }
    void grow();
    std::vector<std::uint64_t> keys_;
    std::vector<std::uint32_t> values_;
    std::size_t size_ = 0, mask_ = 0;
};

// Reused buffers of the level-by-level search (no allocation per level once they have grown).
struct PrefixSearch {
    std::vector<std::uint64_t> rows;    // one row of point bits per tuple above
    std::vector<std::uint64_t> queue;   // (tuple above << 32) | point, in discovery order
    std::vector<std::uint32_t> work;    // tuples above to expand, when sweeps have become sparse
};

// The reachable prefixes of every level as a tree: tuple u of level d has a point and a parent
// tuple of level d-1 (the root, a single empty prefix, above level 0). Tuples are numbered in
// lexicographic order, so the children of a tuple are consecutive and sorted by point. Coordinates
// are found by walking the tree instead of being stored flat (levels x tuples points).
struct PrefixTree {
    static constexpr std::uint32_t none = 0xFFFFFFFFU;
    std::vector<std::vector<Point>> point;                // per level
    std::vector<std::vector<std::uint32_t>> first_child;  // level d: children of u are first_child[d][u] .. first_child[d][u + 1] - 1

    std::size_t levels() const { return point.size(); }
    // Appends the tuples of `level` (its parents on the last level of the tree, or the root).
    void add_level(const PrefixLevel& level);
    // The coordinates of tuple u of level d (d + 1 points).
    Coordinates coordinates(std::size_t d, std::uint32_t u) const;
    // Calls visit(d, u, path) for every tuple, parents before children and each level in
    // increasing order; path holds its d + 1 coordinates.
    template <typename Visit>
    void visit_in_order(Visit&& visit) const;

    // Finds the tuples of coordinates given in increasing order, reusing the common prefix with the
    // previous one.
    class Finder {
    public:
        explicit Finder(const PrefixTree& tree) : tree_(tree) {}
        // The tuple of level coords.size() - 1 with these coordinates, or none (also for the empty
        // or a too long one).
        std::uint32_t find(std::span<const Point> coords);

    private:
        const PrefixTree& tree_;
        std::vector<Point> path_;          // the previous coordinates, as far as they were found
        std::vector<std::uint32_t> ids_;   // their tuples
        std::size_t depth_ = 0;            // how many of them
    };
};

template <typename Visit>
void PrefixTree::visit_in_order(Visit&& visit) const {
    const std::size_t n = levels();
    if (n == 0) return;
    std::vector<std::size_t> position(n), end(n);
    std::vector<Point> path(n);
    end[0] = point[0].size();
    for (std::size_t d = 0;;) {
        if (position[d] == end[d]) {
            if (d == 0) return;
            ++position[--d];
            continue;
        }
        const auto u = std::uint32_t(position[d]);
        path[d] = point[d][u];
        visit(d, u, std::span<const Point>(path.data(), d + 1));
        if (d + 1 == n) {
            ++position[d];
            continue;
        }
        position[d + 1] = first_child[d + 1][u];
        end[d + 1] = first_child[d + 1][u + 1];
        ++d;
    }
}

// Level d's reachable tuples and transitions (PrefixLevel, cascade.hpp) into `out`, reusing its
// storage: from level d-1 (`above`, whose transitions have one column per table letter), the
// table row of each tuple above (`row_of`), the start's point and the level's number of points.
// A transition through a bad code becomes bad_tuple | k; a bad transition above stays as it is.
// With `transitions` false, out.next is left empty (the last level of a construction needs the
// tuples only). LimitError (origin, what) beyond `limit` tuples.
void next_prefix_level(const PrefixLevel& above, std::span<const std::uint32_t> row_of, const ActionTable& table,
                       Point start_point, std::size_t limit, const std::string& origin, const std::string& what,
                       PrefixSearch& search, PrefixLevel& out, bool transitions = true);

}  // namespace statetrack::automata
