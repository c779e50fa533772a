#include "statetrack/automata/holonomy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "statetrack/automata/cascade_search.hpp"
#include "statetrack/automata/error.hpp"

namespace statetrack::automata {

namespace {

constexpr SetIndex no_set = static_cast<SetIndex>(-1);

// Sets of states as bitsets stored flat in one vector, with an open-addressing index so an image
// set is found in O(words).
class SetTable {
public:
    SetTable(std::vector<std::uint64_t>& bits, std::size_t words) : bits_(bits), words_(words) {
        std::size_t slots = 1024;
        while (slots < 2 * std::size_t(count())) slots *= 2;  // at most half full
        slots_.assign(slots, no_set);
        for (SetIndex i = 0; i < count(); ++i) place(i);
    }
    SetIndex count() const { return SetIndex(bits_.size() / words_); }
    SetIndex find(const std::uint64_t* set) const {
        for (std::size_t s = hash(set) & (slots_.size() - 1);; s = (s + 1) & (slots_.size() - 1)) {
            if (slots_[s] == no_set) return no_set;
            if (std::equal(set, set + words_, bits_.data() + std::size_t(slots_[s]) * words_)) return slots_[s];
        }
    }
    // Index of the set, appending it when new; second is true when it was appended.
    std::pair<SetIndex, bool> insert(const std::uint64_t* set) {
        if (SetIndex i = find(set); i != no_set) return {i, false};
        const SetIndex i = count();
        bits_.insert(bits_.end(), set, set + words_);
        if (2 * (std::size_t(i) + 1) > slots_.size()) {
            slots_.assign(slots_.size() * 2, no_set);
            for (SetIndex j = 0; j <= i; ++j) place(j);
        } else {
            place(i);
        }
        return {i, true};
    }

private:
    std::size_t hash(const std::uint64_t* set) const {
        std::uint64_t h = 0x9e3779b97f4a7c15ULL;
        for (std::size_t w = 0; w < words_; ++w) {
            h ^= set[w] + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
            h *= 0xff51afd7ed558ccdULL;
        }
        return std::size_t(h ^ (h >> 32));
    }
    void place(SetIndex i) {
        std::size_t s = hash(bits_.data() + std::size_t(i) * words_) & (slots_.size() - 1);
        while (slots_[s] != no_set) s = (s + 1) & (slots_.size() - 1);
        slots_[s] = i;
    }
    std::vector<std::uint64_t>& bits_;
    std::size_t words_;
    std::vector<SetIndex> slots_;
};

template <typename F>
void for_each_bit(const std::uint64_t* set, std::size_t words, F&& f) {
    for (std::size_t w = 0; w < words; ++w)
        for (std::uint64_t x = set[w]; x; x &= x - 1) f(State(w * 64 + std::size_t(std::countr_zero(x))));
}

bool is_subset(const std::uint64_t* a, const std::uint64_t* b, std::size_t words) {
    for (std::size_t w = 0; w < words; ++w)
        if (a[w] & ~b[w]) return false;
    return true;
}

// Number of elements of `set` below q: the index of q among the set's sorted elements.
std::uint32_t rank_in(const std::uint64_t* set, State q) {
    std::uint32_t r = 0;
    for (std::size_t w = 0; w < q / 64; ++w) r += std::uint32_t(std::popcount(set[w]));
    return r + std::uint32_t(std::popcount(set[q / 64] & ((std::uint64_t(1) << (q % 64)) - 1)));
}

}  // namespace

std::vector<State> base_states(const Dfa& dfa) {
    std::vector<bool> seen(dfa.num_states(), false);
    std::vector<State> order{dfa.start};
    seen[dfa.start] = true;
    for (std::size_t i = 0; i < order.size(); ++i)
        for (Letter a = 0; a < dfa.num_letters(); ++a)
            if (State t = dfa.next(order[i], a); !seen[t]) {
                seen[t] = true;
                order.push_back(t);
            }
    std::sort(order.begin(), order.end());
    return order;
}

namespace {

// Tarjan's strongly connected components, iterative (orbits can be deep).
std::vector<std::uint32_t> strongly_connected(const std::vector<SetIndex>& image, std::size_t nodes, std::size_t letters,
                                              std::size_t& count) {
    constexpr std::uint32_t unset = static_cast<std::uint32_t>(-1);
    std::vector<std::uint32_t> index(nodes, unset), low(nodes, 0), component(nodes, unset);
    std::vector<SetIndex> stack;
    std::vector<std::pair<SetIndex, std::size_t>> calls;
    std::uint32_t next_index = 0;
    count = 0;
    for (SetIndex root = 0; root < nodes; ++root) {
        if (index[root] != unset) continue;
        calls.emplace_back(root, 0);
        index[root] = low[root] = next_index++;
        stack.push_back(root);
        while (!calls.empty()) {
            auto& [v, edge] = calls.back();
            if (edge < letters) {
                const SetIndex w = image[std::size_t(v) * letters + edge++];
                if (index[w] == unset) {
                    index[w] = low[w] = next_index++;
                    stack.push_back(w);
                    calls.emplace_back(w, 0);
                } else if (component[w] == unset) {
                    low[v] = std::min(low[v], index[w]);
                }
                continue;
            }
            const SetIndex done = v;
            calls.pop_back();
            if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[done]);
            if (low[done] == index[done]) {
                SetIndex w;
                do {
                    w = stack.back();
                    stack.pop_back();
                    component[w] = std::uint32_t(count);
                } while (w != done);
                ++count;
            }
        }
    }
    return component;
}

// ---- permutation groups ----------------------------------------------------------------------

using Perm = std::vector<Point>;

Perm compose(const Perm& g, const Perm& h) {  // first g, then h
    Perm r(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) r[i] = h[g[i]];
    return r;
}
Perm inverse(const Perm& g) {
    Perm r(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) r[g[i]] = Point(i);
    return r;
}
bool is_identity(const Perm& g) {
    for (std::size_t i = 0; i < g.size(); ++i)
        if (g[i] != i) return false;
    return true;
}

// A base and strong generating set (Schreier-Sims, the deterministic version of Holt's handbook,
// section 4.4.2): level i has a base point, the strong generators fixing the earlier base points,
// and the transversal of the base point's orbit under them.
struct StabilizerChain {
    std::size_t degree = 0;
    std::vector<Point> base;
    std::vector<std::vector<Perm>> generators;
    std::vector<std::unordered_map<Point, Perm>> transversal;  // orbit point p -> u with base^u = p

    void orbit(std::size_t i) {
        auto& t = transversal[i];
        t.clear();
        t.emplace(base[i], identity());
        std::vector<Point> queue{base[i]};
        for (std::size_t k = 0; k < queue.size(); ++k) {
            const Perm u = t.at(queue[k]);
            for (const Perm& s : generators[i]) {
                const Point p = s[queue[k]];
                if (!t.count(p)) {
                    t.emplace(p, compose(u, s));
                    queue.push_back(p);
                }
            }
        }
    }
    Perm identity() const {
        Perm e(degree);
        std::iota(e.begin(), e.end(), Point(0));
        return e;
    }
    // Sifts g through levels from..end: the residue and the level where it stopped.
    std::pair<Perm, std::size_t> strip(Perm g, std::size_t from) const {
        for (std::size_t i = from; i < base.size(); ++i) {
            const auto it = transversal[i].find(g[base[i]]);
            if (it == transversal[i].end()) return {g, i};
            g = compose(g, inverse(it->second));
        }
        return {g, base.size()};
    }
    void add_level(const Perm& moved_by) {
        Point b = 0;
        while (moved_by[b] == b) ++b;
        base.push_back(b);
        generators.emplace_back();
        transversal.emplace_back();
    }
};

StabilizerChain schreier_sims(const std::vector<Perm>& gens, std::size_t degree) {
    StabilizerChain chain;
    chain.degree = degree;
    for (const Perm& g : gens) {
        if (is_identity(g)) continue;
        if (chain.base.empty()) chain.add_level(g);
        bool fixes_all = true;
        for (Point b : chain.base) fixes_all = fixes_all && g[b] == b;
        if (fixes_all) chain.add_level(g);
        chain.generators[0].push_back(g);
    }
    if (chain.base.empty()) return chain;
    // Strong generators of level i are those fixing base[0..i-1].
    for (std::size_t i = 1; i < chain.base.size(); ++i)
        for (const Perm& g : chain.generators[0]) {
            bool fixes = true;
            for (std::size_t j = 0; j < i; ++j) fixes = fixes && g[chain.base[j]] == chain.base[j];
            if (fixes) chain.generators[i].push_back(g);
        }
    for (std::size_t i = 0; i < chain.base.size(); ++i) chain.orbit(i);
    std::size_t i = chain.base.size();
    while (i-- > 0) {
    restart:
        bool added = false;
        for (const auto& [p, u] : chain.transversal[i]) {
            for (const Perm& s : chain.generators[i]) {
                const Perm us = compose(u, s);
                const Perm schreier = compose(us, inverse(chain.transversal[i].at(us[chain.base[i]])));
                auto [h, j] = chain.strip(schreier, i + 1);
                if (is_identity(h)) continue;
                if (j == chain.base.size()) chain.add_level(h);
                for (std::size_t l = i + 1; l <= j; ++l) {
                    chain.generators[l].push_back(h);
                    chain.orbit(l);
                }
                i = j;
                added = true;
                break;
            }
            if (added) break;
        }
        if (added) goto restart;
    }
    return chain;
}

std::size_t chain_order(const StabilizerChain& chain) {
    std::size_t order = 1;
    for (const auto& t : chain.transversal) order *= t.size();
    return order;
}

// All elements, for naming small groups.
std::vector<Perm> elements_of(const std::vector<Perm>& gens, std::size_t degree) {
    Perm e(degree);
    std::iota(e.begin(), e.end(), Point(0));
    std::vector<Perm> all{e};
    std::set<Perm> seen{e};
    for (std::size_t k = 0; k < all.size(); ++k)
        for (const Perm& g : gens) {
            Perm x = compose(all[k], g);
            if (seen.insert(x).second) all.push_back(std::move(x));
        }
    return all;
}

std::size_t element_order(const Perm& g) {
    std::size_t order = 1;
    std::vector<bool> done(g.size(), false);
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (done[i]) continue;
        std::size_t len = 0;
        for (std::size_t j = i; !done[j]; j = g[j]) {
            done[j] = true;
            ++len;
        }
        order = std::lcm(order, len);
    }
    return order;
}

std::size_t factorial(std::size_t n) {
    std::size_t f = 1;
    for (std::size_t i = 2; i <= n; ++i) f *= i;
    return f;
}

}  // namespace

std::size_t group_order(const std::vector<std::vector<Point>>& generators, std::size_t degree) {
    return chain_order(schreier_sims(generators, degree));
}

std::string group_name(const std::vector<std::vector<Point>>& generators, std::size_t degree) {
    const std::size_t order = group_order(generators, degree);
    if (order == 1) return "1";
    std::size_t moved = 0;  // points actually moved: S_n and A_n are named by them
    for (std::size_t p = 0; p < degree; ++p) {
        bool m = false;
        for (const auto& g : generators) m = m || g[p] != p;
        moved += m;
    }
    if (moved <= 20 && moved >= 3 && order == factorial(moved)) return fmt::format("S_{}", moved);
    if (order > 5040) {
        if (moved <= 20 && moved >= 4 && 2 * order == factorial(moved)) return fmt::format("A_{}", moved);
        return fmt::format("order {}", order);
    }
    const auto all = elements_of(generators, degree);
    std::map<std::size_t, std::size_t> orders;  // element order -> how many elements have it
    for (const auto& g : all) ++orders[element_order(g)];
    const std::size_t max_element = orders.rbegin()->first;
    if (max_element == order) return fmt::format("C_{}", order);
    // Abstract signatures (element orders with counts) of the small symmetric and alternating
    // groups, so that regular representations (symreg:N, altreg:N) are named too.
    using Signature = std::map<std::size_t, std::size_t>;
    static const std::vector<std::pair<Signature, const char*>> known = {
        {{{1, 1}, {2, 3}, {3, 2}}, "S_3"},
        {{{1, 1}, {2, 9}, {3, 8}, {4, 6}}, "S_4"},
        {{{1, 1}, {2, 25}, {3, 20}, {4, 30}, {5, 24}, {6, 20}}, "S_5"},
        {{{1, 1}, {2, 3}, {3, 8}}, "A_4"},
        {{{1, 1}, {2, 15}, {3, 20}, {5, 24}}, "A_5"},
    };
    for (const auto& [signature, name] : known)
        if (orders == signature) return name;
    if (moved >= 4 && 2 * order == factorial(moved)) return fmt::format("A_{}", moved);
    bool abelian = true;
    for (const auto& g : generators)
        for (const auto& h : generators) abelian = abelian && compose(g, h) == compose(h, g);
    if (order == 4 && abelian) return "C_2 x C_2";
    // Dihedral of order 2k: a cyclic subgroup of index 2 and only involutions outside it.
    if (!abelian && order % 2 == 0 && max_element == order / 2) {
        const std::size_t k = order / 2;
        // Inside C_k there is one involution when k is even; outside all k elements are involutions.
        if (orders[2] == k + (k % 2 == 0 ? 1 : 0)) return fmt::format("D_{}", k);
    }
    return fmt::format("order {}", order);
}

std::vector<State> Skeleton::elements(SetIndex set) const {
    std::vector<State> out;
    out.reserve(sizes[set]);
    for_each_bit(bits.data() + std::size_t(set) * words, words, [&](State q) { out.push_back(q); });
    return out;
}

Skeleton holonomy_skeleton(const Dfa& dfa, std::size_t orbit_limit) {
    Skeleton sk;
    sk.num_states = dfa.num_states();
    sk.num_letters = dfa.num_letters();
    sk.words = (sk.num_states + 63) / 64;
    sk.base = base_states(dfa);
    const std::size_t W = sk.words, L = sk.num_letters;
    SetTable table(sk.bits, W);

    // 1. The image orbit of the base set, then every singleton (images of singletons are singletons).
    const LetterClasses classes = dfa_letter_classes(dfa);
    std::vector<std::uint64_t> scratch(W);
    auto clear = [&] { std::fill(scratch.begin(), scratch.end(), 0); };
    auto add_bit = [&](State q) { scratch[q / 64] |= std::uint64_t(1) << (q % 64); };
    clear();
    for (State q : sk.base) add_bit(q);
    sk.top = table.insert(scratch.data()).first;
    bool singletons_added = false;
    for (SetIndex i = 0;; ++i) {
        if (i == table.count()) {
            if (singletons_added) break;
            singletons_added = true;
            for (State q : sk.base) {
                clear();
                add_bit(q);
                table.insert(scratch.data());
            }
            if (i == table.count()) break;
        }
        for (Letter a = 0; a < L; ++a) {
            // A letter with the column of an earlier one has its image (found already).
            if (const Letter r = classes.representative[classes.class_of[a]]; r != a) {
                sk.image.push_back(sk.image[std::size_t(i) * L + r]);
                continue;
            }
            clear();
            for_each_bit(sk.bits.data() + std::size_t(i) * W, W, [&](State q) { add_bit(dfa.next(q, a)); });
            const SetIndex j = table.insert(scratch.data()).first;
            sk.image.push_back(j);
            if (table.count() > orbit_limit)
                throw LimitError(dfa.name, "holonomy",
                                 fmt::format("the image orbit exceeds the limit of {} sets", orbit_limit));
        }
    }
    const std::size_t N = table.count();
    sk.sizes.resize(N);
    for (SetIndex i = 0; i < N; ++i) {
        std::uint32_t c = 0;
        for (std::size_t w = 0; w < W; ++w) c += std::uint32_t(std::popcount(sk.bits[i * W + w]));
        sk.sizes[i] = c;
    }

    // 2. Subduction classes: strongly connected components of the orbit graph. The representative
    // is the member found first by the breadth-first search (the base set for its class).
    std::size_t num_classes = 0;
    sk.class_of = strongly_connected(sk.image, N, L, num_classes);
    sk.classes.resize(num_classes);
    for (SetIndex i = 0; i < N; ++i) sk.classes[sk.class_of[i]].members.push_back(i);
    for (auto& c : sk.classes) c.representative = c.members.front();

    // 3. from_rep: a bijection from each class's representative onto every member, realised by a
    // word inside the class (breadth-first from the representative along edges inside the class).
    sk.from_rep.assign(N, {});
    for (std::size_t c = 0; c < num_classes; ++c) {
        const SetIndex rep = sk.classes[c].representative;
        sk.from_rep[rep] = sk.elements(rep);
        std::vector<SetIndex> queue{rep};
        for (std::size_t k = 0; k < queue.size(); ++k)
            for (Letter a = 0; a < L; ++a) {
                const SetIndex t = sk.image[std::size_t(queue[k]) * L + a];
                if (sk.class_of[t] != c || !sk.from_rep[t].empty()) continue;
                auto& f = sk.from_rep[t];
                f.reserve(sk.from_rep[queue[k]].size());
                for (State q : sk.from_rep[queue[k]]) f.push_back(dfa.next(q, a));
                queue.push_back(t);
            }
    }

    // 4. Tiles of each representative: the maximal orbit sets strictly inside it. Tiles of the
    // other members are their images under from_rep, so only representatives need them.
    std::vector<std::vector<SetIndex>> by_size(sk.num_states + 1);
    for (SetIndex i = 0; i < N; ++i) by_size[sk.sizes[i]].push_back(i);
    auto set_bits = [&](SetIndex i) { return sk.bits.data() + std::size_t(i) * W; };
    // The OR of a set's words: B inside A implies fold(B) inside fold(A), a one-word rejection.
    std::vector<std::uint64_t> fold(N, 0);
    for (SetIndex i = 0; i < N; ++i)
        for (std::size_t w = 0; w < W; ++w) fold[i] |= sk.bits[std::size_t(i) * W + w];
    auto inside = [&](SetIndex b, SetIndex a) { return (fold[b] & ~fold[a]) == 0 && is_subset(set_bits(b), set_bits(a), W); };
    for (auto& c : sk.classes) {
        const SetIndex rep = c.representative;
        if (sk.sizes[rep] < 2) continue;
        for (std::size_t size = sk.sizes[rep] - 1; size >= 1; --size)
            for (SetIndex b : by_size[size]) {
                if (!inside(b, rep)) continue;
                bool inside_tile = false;
                for (SetIndex t : c.tiles)
                    if (inside(b, t)) {
                        inside_tile = true;
                        break;
                    }
                if (!inside_tile) c.tiles.push_back(b);
            }
    }

    // 5. Heights over the generalised inclusion (tiles and images in other classes), then levels:
    // the top class is level 0, a class of height h sits on level height(top) - h (SgpDec's depth - 1).
    std::vector<bool> done(num_classes, false);
    std::function<std::size_t(std::size_t)> height = [&](std::size_t c) -> std::size_t {
        if (done[c]) return sk.classes[c].height;
        std::size_t h = 0;
        if (sk.sizes[sk.classes[c].representative] >= 2) {
            std::size_t below = 0;
            for (SetIndex t : sk.classes[c].tiles) below = std::max(below, height(sk.class_of[t]));
            for (SetIndex m : sk.classes[c].members)
                for (Letter a = 0; a < L; ++a)
                    if (std::size_t d = sk.class_of[sk.image[std::size_t(m) * L + a]]; d != c)
                        below = std::max(below, height(d));
            h = below + 1;
        }
        sk.classes[c].height = h;
        done[c] = true;
        return h;
    };
    for (std::size_t c = 0; c < num_classes; ++c) height(c);
    sk.levels = sk.classes[sk.class_of[sk.top]].height;
    sk.level_points.assign(sk.levels, 0);
    for (auto& c : sk.classes) {
        if (c.height == 0) continue;
        c.level = sk.levels - c.height;
        c.first_point = Point(sk.level_points[c.level]);
        sk.level_points[c.level] += c.tiles.size();
    }

    // 6. Holonomy groups: the permutations of the representative's tiles induced by the round trips
    // rep -> A -a-> A.a -> rep for every member A and letter a staying inside the class (Schreier
    // generators of the class's stabiliser action; the whole monoid is never enumerated).
    std::vector<std::int32_t> tile_pos(N, -1);
    std::vector<State> to_rep(sk.num_states);
    for (auto& c : sk.classes) {
        if (c.height == 0) continue;
        const SetIndex rep = c.representative;
        const auto& rep_elems = sk.from_rep[rep];
        for (std::size_t j = 0; j < c.tiles.size(); ++j) tile_pos[c.tiles[j]] = std::int32_t(j);
        std::set<Perm> gens;
        for (SetIndex m : c.members)
            for (Letter a : classes.representative) {  // equal columns give equal round trips
                const SetIndex t = sk.image[std::size_t(m) * L + a];
                if (sk.class_of[t] != sk.class_of[rep]) continue;
                for (std::size_t k = 0; k < rep_elems.size(); ++k) to_rep[sk.from_rep[t][k]] = rep_elems[k];
                // The round trip as a map of rep onto itself, applied to every tile.
                Perm perm(c.tiles.size());
                for (std::size_t j = 0; j < c.tiles.size(); ++j) {
                    clear();
                    for_each_bit(set_bits(c.tiles[j]), W, [&](State q) {
                        const State x = sk.from_rep[m][rank_in(set_bits(rep), q)];
                        add_bit(to_rep[dfa.next(x, a)]);
                    });
                    const SetIndex img = table.find(scratch.data());
                    if (img == no_set || tile_pos[img] < 0) throw std::logic_error("holonomy: a round trip left the tiles");
                    perm[j] = Point(tile_pos[img]);
                }
                if (!is_identity(perm)) gens.insert(std::move(perm));
            }
        for (SetIndex t : c.tiles) tile_pos[t] = -1;
        c.group.first = c.first_point;
        c.group.points = c.tiles.size();
        c.group.generators.assign(gens.begin(), gens.end());
        c.group.order = group_order(c.group.generators, c.tiles.size());
        c.group.name = c.group.order == 1 ? "1" : group_name(c.group.generators, c.tiles.size());
    }
    return sk;
}

// ---- the cascade over the skeleton ---------------------------------------------------------

namespace {

struct HolonomyBuilder {
    const Dfa& dfa;
    const Skeleton& sk;
    std::vector<std::uint64_t> bits;  // a copy the table can own
    SetTable table;
    std::size_t W, L;
    std::vector<std::uint64_t> scratch;
    std::vector<State> to_rep;
    std::vector<std::size_t> tile_offset;                             // set -> start of its tiles in real_tiles
    std::vector<SetIndex> real_tiles;                                 // (set, tile) -> set, no_set until computed
    std::vector<std::int32_t> permutation_of;                         // (set, letter) -> index in permutations, -1
    std::vector<Perm> permutations;
    std::vector<bool> permutation_is_identity;
    std::unordered_map<std::uint64_t, Point> constant_cache;          // (image, target set) -> tile
    std::vector<std::unordered_map<SetIndex, Point>> tile_index;      // per class

    HolonomyBuilder(const Dfa& d, const Skeleton& s)
        : dfa(d), sk(s), bits(s.bits), table(bits, s.words), W(s.words), L(s.num_letters), scratch(s.words),
          to_rep(s.num_states) {
        tile_offset.resize(sk.sizes.size() + 1, 0);
        for (SetIndex i = 0; i < sk.sizes.size(); ++i) tile_offset[i + 1] = tile_offset[i] + cls(i).tiles.size();
        real_tiles.assign(tile_offset.back(), no_set);
        permutation_of.assign(sk.sizes.size() * L, -1);
        tile_index.resize(sk.classes.size());
        for (std::size_t c = 0; c < sk.classes.size(); ++c)
            for (std::size_t j = 0; j < sk.classes[c].tiles.size(); ++j) tile_index[c][sk.classes[c].tiles[j]] = Point(j);
    }
    const std::uint64_t* set_bits(SetIndex i) const { return sk.bits.data() + std::size_t(i) * W; }
    const SkeletonClass& cls(SetIndex set) const { return sk.classes[sk.class_of[set]]; }
    bool on_level(SetIndex set, std::size_t level) const { return sk.sizes[set] >= 2 && cls(set).level == level; }
    void clear() { std::fill(scratch.begin(), scratch.end(), 0); }
    void add_bit(State q) { scratch[q / 64] |= std::uint64_t(1) << (q % 64); }
    SetIndex lookup() const {
        const SetIndex i = table.find(scratch.data());
        if (i == no_set) throw std::logic_error("holonomy: a set left the orbit");
        return i;
    }
    void load_to_rep(SetIndex set) {
        const auto& rep = sk.from_rep[cls(set).representative];
        for (std::size_t k = 0; k < rep.size(); ++k) to_rep[sk.from_rep[set][k]] = rep[k];
    }

    // The tile of `set` that the representative's tile number `tile` stands for.
    SetIndex real_tile(SetIndex set, Point tile) {
        SetIndex& cached = real_tiles[tile_offset[set] + tile];
        if (cached != no_set) return cached;
        const auto& c = cls(set);
        clear();
        for_each_bit(set_bits(c.tiles[tile]), W,
                     [&](State q) { add_bit(sk.from_rep[set][rank_in(set_bits(c.representative), q)]); });
        return cached = lookup();
    }

    // P.a == Q in one class: the induced permutation of the representative's tiles.
    const Perm& tile_permutation(SetIndex p, Letter a) {
        std::int32_t& cached = permutation_of[std::size_t(p) * L + a];
        if (cached >= 0) return permutations[std::size_t(cached)];
        const SetIndex q = sk.image[std::size_t(p) * L + a];
        const auto& c = cls(p);
        load_to_rep(q);
        Perm perm(c.tiles.size());
        for (std::size_t j = 0; j < c.tiles.size(); ++j) {
            clear();
            for_each_bit(set_bits(c.tiles[j]), W, [&](State r) {
                add_bit(to_rep[dfa.next(sk.from_rep[p][rank_in(set_bits(c.representative), r)], a)]);
            });
            perm[j] = tile_index[sk.class_of[p]].at(lookup());
        }
        cached = std::int32_t(permutations.size());
        permutation_is_identity.push_back(is_identity(perm));
        permutations.push_back(std::move(perm));
        return permutations.back();
    }

    // image strictly inside q (q on its level): the first representative tile holding its pull-back.
    Point constant_tile(SetIndex image, SetIndex q) {
        const std::uint64_t key = (std::uint64_t(image) << 32) | q;
        if (auto it = constant_cache.find(key); it != constant_cache.end()) return it->second;
        const auto& c = cls(q);
        load_to_rep(q);
        clear();
        for_each_bit(set_bits(image), W, [&](State x) { add_bit(to_rep[x]); });
        for (std::size_t j = 0; j < c.tiles.size(); ++j)
            if (is_subset(scratch.data(), set_bits(c.tiles[j]), W)) return constant_cache[key] = Point(j);
        throw std::logic_error("holonomy: no tile holds an image set");
    }

    // The coordinates of a tile chain from the base set down to {q}, taking the first tile that
    // holds q at every step; levels the chain jumps over hold 0.
    Coordinates encode(State q) {
        Coordinates coords(sk.levels, 0);
        SetIndex p = sk.top;
        while (sk.sizes[p] >= 2) {
            const auto& c = cls(p);
            load_to_rep(p);
            const State r = to_rep[q];
            Point j = 0;
            while (!sk.contains(c.tiles[j], r)) ++j;
            coords[c.level] = c.first_point + j;
            p = real_tile(p, j);
        }
        return coords;
    }

    // The context of a prefix (coordinates of levels 0..d-1) on level d: the set P of the old tile
    // chain that reaches level d and, per letter, the set Q of the new chain (docs/cascades.md,
    // step 9). Level d's actions depend on the context only, and so does the context of every
    // extension of the prefix by a point of level d: both are computed once per context, not once
    // per cascade state and letter. Letters with equal columns in the DFA have equal Q and equal
    // actions, so a context holds one Q per letter class.
    using Context = std::vector<SetIndex>;  // P, then Q for every letter class

    LevelAction action(const Context& ctx, std::size_t d, std::size_t letter_class, Letter a) {
        const SetIndex p = ctx[0], q = ctx[1 + letter_class];
        LevelAction act;
        if (on_level(q, d)) {
            const auto& c = cls(q);
            const SetIndex image = sk.image[std::size_t(p) * L + a];
            if (image == q) {  // p is in q's class, on this level: the level permutes q's tiles
                const Perm& perm = tile_permutation(p, a);
                if (!permutation_is_identity[std::size_t(permutation_of[std::size_t(p) * L + a])]) {
                    act.kind = LevelAction::Kind::permutation;
                    act.map.resize(sk.level_points[d]);
                    std::iota(act.map.begin(), act.map.end(), Point(0));
                    for (std::size_t j = 0; j < perm.size(); ++j) act.map[c.first_point + j] = c.first_point + perm[j];
                }
            } else {
                act.kind = LevelAction::Kind::constant;
                act.map.assign(1, c.first_point + constant_tile(image, q));
            }
        } else if (on_level(p, d)) {
            act.kind = LevelAction::Kind::constant;  // the new chain jumps this level: back to 0
            act.map.assign(1, 0);
        }
        return act;
    }

    // The context on level d+1 of the prefix extended by `point` on level d.
    Context extend(const Context& ctx, std::size_t d, Point point, const LetterClasses& classes) {
        Context out(ctx.size());
        const SetIndex p = ctx[0];
        out[0] = on_level(p, d) ? real_tile(p, point - cls(p).first_point) : p;
        for (std::size_t k = 0; k < classes.size(); ++k) {
            const SetIndex q = ctx[1 + k];
            if (!on_level(q, d)) {
                out[1 + k] = q;
                continue;
            }
            const Letter a = classes.representative[k];
            const SetIndex image = sk.image[std::size_t(p) * L + a];
            const Point tile = image == q ? tile_permutation(p, a)[point - cls(q).first_point] : constant_tile(image, q);
            out[1 + k] = real_tile(q, tile);
        }
        return out;
    }
};

struct ContextHash {
    std::size_t operator()(const std::vector<SetIndex>& v) const noexcept {
        std::uint64_t h = v.size();
        for (SetIndex x : v) {
            h = (h ^ x ^ (h >> 29)) * 0xbf58476d1ce4e5b9ULL;
            h ^= h >> 32;
        }
        return std::size_t(h);
    }
};

}  // namespace

Cascade holonomy_cascade(const Dfa& dfa, const Skeleton& sk, std::size_t state_limit) {
    HolonomyBuilder builder(dfa, sk);
    Cascade cascade;
    cascade.method = "holonomy";
    cascade.alphabet = dfa.alphabet;
    cascade.dfa_states = dfa.num_states();
    cascade.levels.resize(sk.levels);
    for (std::size_t d = 0; d < sk.levels; ++d) cascade.levels[d].points = sk.level_points[d];
    for (const auto& c : sk.classes)
        if (c.height > 0 && c.group.order > 1) cascade.levels[c.level].groups.push_back(c.group);
    cascade.start = builder.encode(dfa.start);

    // Level by level: the reachable prefixes (tuples) of each level, the context of each, the
    // actions of each context, then the next level's tuples from those actions. The searches run
    // on one letter per class of equal DFA columns; the listed action lists have every letter.
    const LetterClasses classes = dfa_letter_classes(dfa);
    const std::size_t L = sk.num_letters, width = classes.size(), levels = sk.levels;
    std::unordered_map<HolonomyBuilder::Context, std::uint32_t, ContextHash> context_index;
    std::vector<HolonomyBuilder::Context> contexts;
    auto intern = [&](HolonomyBuilder::Context&& ctx) {
        auto [it, fresh] = context_index.try_emplace(ctx, std::uint32_t(contexts.size()));
        if (fresh) contexts.push_back(std::move(ctx));
        return it->second;
    };
    std::vector<std::uint32_t> context_of{intern(HolonomyBuilder::Context(width + 1, sk.top))}, context_below;
    PrefixSearch search;
    PrefixLevel level = root_prefix_level(width), below;
    PrefixTree tree;
    constexpr std::uint32_t unset = static_cast<std::uint32_t>(-1), unlisted = unset - 1;
    std::vector<std::vector<std::uint32_t>> list_of_tuple(levels);  // level d: the list of each tuple above, or unlisted
    std::vector<std::uint32_t> list_of_context, row_of_context, row_of;
    std::vector<std::uint32_t> codes(width);
    std::vector<LevelAction> acts(width);
    PrefixActions::List list(L);
    KeyIndex extended;  // (context, point) -> context of the extended prefix
    for (std::size_t d = 0; d < levels; ++d) {
        PrefixActions& actions = cascade.levels[d].actions;
        ActionTable table(width, sk.level_points[d]);
        // The list of each distinct context (unlisted: identity for every letter), once.
        list_of_context.assign(contexts.size(), unset);
        row_of_context.assign(contexts.size(), 0);
        row_of.resize(level.size());
        auto& list_of = list_of_tuple[d];
        list_of.resize(level.size());
        std::size_t listed = 0;
        for (std::size_t u = 0; u < level.size(); ++u) {
            const std::uint32_t ctx = context_of[u];
            if (list_of_context[ctx] == unset) {
                bool moves = false;
                for (std::size_t k = 0; k < width; ++k) {
                    acts[k] = builder.action(contexts[ctx], d, k, classes.representative[k]);
                    moves = moves || acts[k].kind != LevelAction::Kind::identity;
                }
                list_of_context[ctx] = unlisted;
                if (moves) {
                    for (std::size_t k = 0; k < width; ++k) codes[k] = table.code(acts[k]);
                    row_of_context[ctx] = table.add_row(codes);
                    for (Letter a = 0; a < L; ++a) list[a] = acts[classes.class_of[a]];
                    list_of_context[ctx] = actions.add_list(list);
                }
            }
            row_of[u] = row_of_context[ctx];
            list_of[u] = list_of_context[ctx];
            listed += list_of[u] != unlisted;
        }
        actions.reserve(listed, d);

        // The last level's transitions are not needed: its tuples are the cascade states.
        next_prefix_level(level, row_of, table, cascade.start[d], state_limit, dfa.name, "cascade", search, below, d + 1 < levels);
        tree.add_level(below);
        // Contexts of the new tuples, once per (context, point).
        extended.clear();
        context_below.resize(below.size());
        for (std::size_t v = 0; v < below.size(); ++v) {
            const std::uint32_t ctx = context_of[below.parent[v]];
            const std::uint64_t key = (std::uint64_t(ctx) << 32) | below.point[v];
            std::uint32_t child = extended.find(key);
            if (child == KeyIndex::absent) {
                child = intern(builder.extend(contexts[ctx], d, below.point[v], classes));  // may grow `contexts`
                extended.insert(key, child);
            }
            context_below[v] = child;
        }
        std::swap(context_of, context_below);
        std::swap(level, below);
    }
    // A full tuple's old chain ends at the singleton of the DFA state it stands for.
    auto decoded = [&](std::size_t s) {
        const SetIndex p = contexts[context_of[s]][0];
        if (sk.sizes[p] != 1) throw std::logic_error("holonomy: a tile chain does not end at a singleton");
        return sk.from_rep[p][0];
    };
    // The listed prefixes and the decoding in lexicographic order, by one walk over the tree.
    if (levels > 0 && list_of_tuple[0][0] != unlisted) cascade.levels[0].actions.push_back({}, list_of_tuple[0][0]);
    tree.visit_in_order([&](std::size_t d, std::uint32_t u, std::span<const Point> path) {
        if (d + 1 < levels) {
            if (const std::uint32_t l = list_of_tuple[d + 1][u]; l != unlisted) cascade.levels[d + 1].actions.push_back(path, l);
        } else {
            // In lexicographic order, so the first cascade state of each DFA state is its encoding.
            const State q = decoded(u);
            const auto it = cascade.decode.emplace_hint(cascade.decode.end(), Coordinates(path.begin(), path.end()), q);
            cascade.encode.try_emplace(q, it->first);
        }
    });
    if (levels == 0) {
        cascade.decode.emplace(Coordinates{}, decoded(0));
        fill_encode(cascade);
    }
    return cascade;
}

}  // namespace statetrack::automata
