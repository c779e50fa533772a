#include "statetrack/automata/cascade_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "statetrack/automata/error.hpp"
#include "hash_mix.hpp"

namespace statetrack::automata {

namespace {

// Set bits of x. std::popcount is a library call unless the build targets the popcnt
// instruction; this inline form keeps the numbering loop fast either way.
inline std::uint32_t count_bits(std::uint64_t x) {
#if defined(__POPCNT__)
    return std::uint32_t(std::popcount(x));
#else
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return std::uint32_t((x * 0x0101010101010101ULL) >> 56);
#endif
}

using detail::mix;

}  // namespace

// ---- letter classes ------------------------------------------------------------------------

LetterClasses dfa_letter_classes(const Dfa& dfa) {
    const std::size_t n = dfa.num_states();
    return letter_classes(dfa.num_letters(), [&](Letter a, Letter b) {
        for (State q = 0; q < n; ++q)
            if (dfa.next(q, a) != dfa.next(q, b)) return false;
        return true;
    });
}

LetterClasses cascade_letter_classes(const Dfa& dfa, const Cascade& cascade) {
    const std::size_t letters = dfa.num_letters();
    const LetterClasses by_dfa = dfa_letter_classes(dfa);
    if (by_dfa.size() == letters) return by_dfa;  // no two columns equal: nothing to refine
    // A hash of each letter's actions over every list first: letters that differ almost always
    // differ there, so the exact comparison runs about once per letter.
    std::vector<std::uint64_t> signature(letters, 0);
    for (const auto& level : cascade.levels)
        for (const auto& list : level.actions.lists())
            for (Letter a = 0; a < letters && a < list.size(); ++a) {
                std::uint64_t h = mix(signature[a] + std::uint64_t(list[a].kind) + 0x9e3779b97f4a7c15ULL);
                for (Point p : list[a].map) h = mix(h + p);
                signature[a] = h;
            }
    return letter_classes(letters, [&](Letter a, Letter b) {
        if (by_dfa.class_of[a] != by_dfa.class_of[b] || signature[a] != signature[b]) return false;
        for (const auto& level : cascade.levels)
            for (const auto& list : level.actions.lists())
                if (std::max(a, b) >= list.size() || !(list[a] == list[b])) return false;
        return true;
    });
}

// ---- action tables ---------------------------------------------------------------------------

std::uint32_t ActionTable::code(const LevelAction& action) {
    switch (action.kind) {
        case LevelAction::Kind::identity:
            return identity;
        case LevelAction::Kind::constant:
            if (action.map.size() != 1 || action.map[0] >= points) break;
            return constant_flag | action.map[0];
        case LevelAction::Kind::permutation: {
            if (action.map.size() != points || maps.size() + points >= constant_flag) break;
            for (Point p : action.map)
                if (p >= points) throw std::logic_error("ActionTable::code: a permutation image outside the level");
            const auto offset = std::uint32_t(maps.size());
            maps.insert(maps.end(), action.map.begin(), action.map.end());
            return offset;
        }
    }
    throw std::logic_error("ActionTable::code: a malformed action");
}

std::uint32_t ActionTable::add_row(std::span<const std::uint32_t> row) {
    if (row.size() != letters) throw std::logic_error("ActionTable::add_row: one code per letter");
    codes.insert(codes.end(), row.begin(), row.end());
    return std::uint32_t(rows() - 1);
}

// ---- KeyIndex --------------------------------------------------------------------------------

void KeyIndex::grow() {
    std::vector<std::uint64_t> keys = std::move(keys_);
    std::vector<std::uint32_t> values = std::move(values_);
    const std::size_t slots = std::max<std::size_t>(16, 2 * values.size());
    keys_.assign(slots, 0);
    values_.assign(slots, absent);
    mask_ = slots - 1;
    for (std::size_t s = 0; s < values.size(); ++s) {
        if (values[s] == absent) continue;
        std::size_t t = slot(keys[s]);
        while (values_[t] != absent) t = (t + 1) & mask_;
        keys_[t] = keys[s];
        values_[t] = values[s];
    }
}

// ---- PrefixTree --------------------------------------------------------------------------------

void PrefixTree::add_level(const PrefixLevel& level) {
    const std::size_t parents = point.empty() ? 1 : point.back().size();
    point.push_back(level.point);
    auto& first = first_child.emplace_back(parents + 1, 0);
    for (std::uint32_t parent : level.parent) ++first[parent + 1];
    for (std::size_t u = 0; u < parents; ++u) first[u + 1] += first[u];
}

Coordinates PrefixTree::coordinates(std::size_t d, std::uint32_t u) const {
    Coordinates coords(d + 1);
    for (std::size_t j = d + 1; j-- > 0;) {
        coords[j] = point[j][u];
        if (j == 0) break;
        // The parent: the last tuple of level j-1 whose children start at or before u.
        const auto& first = first_child[j];
        u = std::uint32_t(std::upper_bound(first.begin(), first.end(), u) - first.begin() - 1);
    }
    return coords;
}

std::uint32_t PrefixTree::Finder::find(std::span<const Point> coords) {
    const std::size_t n = coords.size();
    if (n == 0 || n > tree_.levels()) return none;
    if (path_.size() < tree_.levels()) {
        path_.resize(tree_.levels());
        ids_.resize(tree_.levels());
    }
    // Coordinates shared with the previous query keep their tuples.
    std::size_t d = 0;
    const std::size_t known = std::min(n, depth_);
    while (d < known && path_[d] == coords[d]) ++d;
    depth_ = d;
    for (; d < n; ++d) {
        // Among the parent's children (consecutive, sorted by point; usually a few): a scan.
        const std::uint32_t parent = d == 0 ? 0 : ids_[d - 1];
        const Point* points = tree_.point[d].data();
        std::uint32_t child = tree_.first_child[d][parent];
        const std::uint32_t end = tree_.first_child[d][parent + 1];
        while (child < end && points[child] < coords[d]) ++child;
        if (child == end || points[child] != coords[d]) return none;
        path_[d] = coords[d];
        ids_[d] = child;
        depth_ = d + 1;
    }
    return ids_[n - 1];
}

// ---- the level-by-level search -------------------------------------------------------------------

void next_prefix_level(const PrefixLevel& above, std::span<const std::uint32_t> row_of, const ActionTable& table,
                       Point start_point, std::size_t limit, const std::string& origin, const std::string& what,
                       PrefixSearch& search, PrefixLevel& out, bool transitions) {
    // The reachable (tuple above, point) pairs as one bitset row of `points` bits per tuple above:
    // membership is one bit, and the lexicographic number of a pair is the number of set bits
    // before it in the rows. Each tuple's slot holds its reached bits, then as many words of bits
    // reached but not yet expanded (after the search: the pairs of the tuples before it), so that
    // the words a step touches share a cache line.
    const std::size_t letters = table.letters, words = (table.points + 63) / 64, n_above = above.size();
    const std::size_t stride = 2 * words;
    const std::uint32_t* const codes = table.codes.data();
    const std::uint32_t* const above_next = above.next.data();
    const std::uint32_t* const rows_of = row_of.data();
    if (start_point >= table.points) throw std::logic_error("next_prefix_level: start point outside the level");
    limit = std::min<std::size_t>(limit, PrefixLevel::bad_tuple - 1);
    auto& slots = search.rows;
    auto& pending = search.queue;  // tuples above with pairs to expand, one bit each
    slots.assign(n_above * stride, 0);
    pending.assign((n_above + 63) / 64, 0);

    // Discovery in sweeps over the tuples above in increasing order rather than breadth-first:
    // the level above is then read nearly sequentially. A pair found for a tuple not yet passed is
    // expanded in the same sweep; one found behind the sweep waits for the next. When sweeps have
    // become sparse (a long chain of steps backwards would cost one sweep each), the rest goes
    // through a worklist.
    std::size_t found = 0;
    auto reach = [&](std::uint32_t w, Point p) {  // true when w becomes pending
        std::uint64_t* slot = slots.data() + std::size_t(w) * stride;
        const std::uint64_t bit = std::uint64_t(1) << (p % 64);
        if (slot[p / 64] & bit) return false;
        slot[p / 64] |= bit;
        slot[words + p / 64] |= bit;
        ++found;
        std::uint64_t& flag = pending[w / 64];
        const std::uint64_t w_bit = std::uint64_t(1) << (w % 64);
        const bool newly = !(flag & w_bit);
        flag |= w_bit;
        return newly;
    };
    // Expands the new points of w (whose pending flag the caller cleared); on_pending(nw) for each
    // tuple that becomes pending.
    auto expand = [&](std::uint32_t w, auto&& on_pending) {
        const std::uint32_t* next = above_next + std::size_t(w) * letters;
        const std::uint32_t* row = codes + std::size_t(rows_of[w]) * letters;
        std::uint64_t* fresh = slots.data() + std::size_t(w) * stride + words;
        for (std::size_t k = 0; k < words; ++k) {
            const std::uint64_t bits = fresh[k];
            fresh[k] = 0;
            for (std::uint64_t y = bits; y; y &= y - 1) {
                const auto p = Point(k * 64 + std::size_t(std::countr_zero(y)));
                for (std::size_t a = 0; a < letters; ++a) {
                    const std::uint32_t nw = next[a], code = row[a];
                    if ((nw & PrefixLevel::bad_tuple) || ActionTable::is_bad(code)) continue;
                    if (reach(nw, table.apply(code, p))) on_pending(nw);
                }
            }
        }
        if (found > limit) throw LimitError(origin, what, fmt::format("more than {} reachable cascade states", limit));
    };
    reach(above.start, start_point);
    bool again = true;
    std::size_t scanned = 0, expanded = 0;  // flag words read by the sweeps, tuples expanded
    while (again) {
        again = false;
        scanned += pending.size();
        for (std::size_t j = 0; j < pending.size(); ++j)
            for (std::uint64_t x; (x = pending[j]) != 0;) {
                pending[j] = x & (x - 1);
                ++expanded;
                expand(std::uint32_t(j * 64 + std::size_t(std::countr_zero(x))),
                       [&](std::uint32_t nw) { again = again || nw / 64 < j; });
            }
        if (again && scanned > 8 * expanded + 4096) {  // the sweeps cost more than the work they do
            auto& work = search.work;
            work.clear();
            for (std::size_t j = 0; j < pending.size(); ++j)
                for (std::uint64_t x = pending[j]; x; x &= x - 1) work.push_back(std::uint32_t(j * 64 + std::size_t(std::countr_zero(x))));
            for (std::size_t i = 0; i < work.size(); ++i) {
                const std::uint32_t w = work[i];
                pending[w / 64] &= ~(std::uint64_t(1) << (w % 64));
                expand(w, [&](std::uint32_t nw) { work.push_back(nw); });
            }
            break;
        }
    }

    // Numbers: the pairs of the tuples before (kept in the slot's second half, now empty), plus
    // the bits before the point in its row.
    std::uint32_t total = 0;
    for (std::size_t w = 0; w < n_above; ++w) {
        std::uint64_t* slot = slots.data() + w * stride;
        slot[words] = total;
        for (std::size_t j = 0; j < words; ++j) total += count_bits(slot[j]);
    }
    auto number = [&](std::uint32_t w, Point p) {
        const std::uint64_t* slot = slots.data() + std::size_t(w) * stride;
        auto k = std::uint32_t(slot[words]);
        for (std::size_t j = 0; j < p / 64; ++j) k += count_bits(slot[j]);
        return k + count_bits(slot[p / 64] & ((std::uint64_t(1) << (p % 64)) - 1));
    };
    const std::size_t n = total;
    out.parent.resize(n);
    out.point.resize(n);
    out.next.resize(transitions ? n * letters : 0);
    std::uint32_t* out_next = out.next.data();
    std::size_t index = 0;
    for (std::size_t w = 0; w < n_above; ++w) {
        const std::uint64_t* slot = slots.data() + w * stride;
        const std::uint32_t* next = above_next + w * letters;
        const std::uint32_t* row = codes + std::size_t(rows_of[w]) * letters;
        for (std::size_t j = 0; j < words; ++j)
            for (std::uint64_t x = slot[j]; x; x &= x - 1) {
                const auto p = Point(j * 64 + std::size_t(std::countr_zero(x)));
                out.parent[index] = std::uint32_t(w);
                out.point[index] = p;
                ++index;
                if (!transitions) continue;
                for (std::size_t a = 0; a < letters; ++a) {
                    const std::uint32_t nw = next[a], code = row[a];
                    out_next[a] = (nw & PrefixLevel::bad_tuple)   ? nw
                                  : ActionTable::is_bad(code) ? PrefixLevel::bad_tuple | (code & ActionTable::bad_limit)
                                                                  : number(nw, table.apply(code, p));
                }
                out_next += letters;
            }
    }
    out.start = number(above.start, start_point);
}

}  // namespace statetrack::automata
