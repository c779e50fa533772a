// The DFA -> LRNN compiler. docs/lrnn-format.md ("Constructions" and "Wiring") documents the
// schemes implemented here, in particular how cascade layers carry the coordinates of the levels
// above so that the one-step shift gives every level the pre-update coordinates it needs.
#include "statetrack/lrnn/compile.hpp"

#include <fmt/format.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "numeric.hpp"
#include "statetrack/lrnn/flat_map.hpp"
#include "statetrack/automata/decompose.hpp"
#include "statetrack/automata/error.hpp"

namespace statetrack::lrnn {

using automata::Dfa;
using automata::Letter;
using automata::State;

const char* to_string(Construction c) {
    switch (c) {
        case Construction::automatic: return "auto";
        case Construction::onehot: return "onehot";
        case Construction::parity: return "parity";
        case Construction::rotation: return "rotation";
        case Construction::theorem6: return "theorem6";
        case Construction::cascade: return "cascade";
    }
    return "?";
}

Construction parse_construction(const std::string& text) {
    for (auto c : {Construction::automatic, Construction::onehot, Construction::parity, Construction::rotation,
                   Construction::theorem6, Construction::cascade})
        if (text == to_string(c)) return c;
    throw InputError("--construction", text, "unknown construction (auto, onehot, parity, rotation, theorem6, cascade)");
}

namespace {

std::vector<State> reachable_states(const Dfa& dfa) {
    std::vector<State> order{dfa.start};
    std::vector<bool> seen(dfa.num_states(), false);
    seen[dfa.start] = true;
    for (std::size_t i = 0; i < order.size(); ++i)
        for (Letter a = 0; a < dfa.num_letters(); ++a) {
            const State q = dfa.next(order[i], a);
            if (!seen[q]) seen[q] = true, order.push_back(q);
        }
    return order;
}

// The permutation of each letter on the reachable states (as coordinates), or empty if some
// letter is not injective there.
std::vector<std::vector<std::uint32_t>> letter_permutations(const Dfa& dfa, const std::vector<State>& states) {
    std::vector<std::uint32_t> coord(dfa.num_states(), 0);
    for (std::size_t i = 0; i < states.size(); ++i) coord[states[i]] = std::uint32_t(i);
    std::vector<std::vector<std::uint32_t>> perms;
    for (Letter a = 0; a < dfa.num_letters(); ++a) {
        std::vector<std::uint32_t> p(states.size());
        std::vector<bool> hit(states.size(), false);
        for (std::size_t i = 0; i < states.size(); ++i) {
            p[i] = coord[dfa.next(states[i], a)];
            if (hit[p[i]]) return {};
            hit[p[i]] = true;
        }
        perms.push_back(std::move(p));
    }
    return perms;
}

std::vector<Number> unit(std::size_t dim, std::size_t i) {
    std::vector<Number> v(dim, integer(0));
    v[i] = integer(1);
    return v;
}

// A permutation of coordinates as p - c reflections I - 2 v v^T / v.v with v = e_a - e_b: for each
// cycle (c0 c1 ... ck-1), the swaps (c0 c1), (c0 c2), ..., (c0 ck-1) applied in this order.
Transition permutation_transition(const std::vector<std::uint32_t>& perm) {
    Transition t;
    std::vector<bool> done(perm.size(), false);
    for (std::size_t c0 = 0; c0 < perm.size(); ++c0) {
        if (done[c0]) continue;
        done[c0] = true;
        for (std::size_t c = perm[c0]; c != c0; c = perm[c]) {
            done[c] = true;
            GhFactor f;
            f.v.dim = perm.size();
            f.v.entries = {{std::uint32_t(std::min(c0, c)), integer(c0 < c ? 1 : -1)}, {std::uint32_t(std::max(c0, c)), integer(c0 < c ? -1 : 1)}};
            f.beta = integer(2);
            t.factors.push_back(std::move(f));
        }
    }
    return t;
}

Transition reset_transition(std::size_t dim, std::size_t target, ResetEncoding reset) {
    Transition t;
    if (reset == ResetEncoding::projections) {
        t.factors.reserve(dim);
        for (std::size_t i = 0; i < dim; ++i) t.factors.push_back(GhFactor{unit_vector(dim, i), integer(1)});
    } else {
        t.diagonal.assign(dim, integer(0));
    }
    t.bias = unit(dim, target);
    return t;
}

// cos and sin of (numerator / denominator) * pi. By Niven's theorem the only rational values are
// 0, +-1/2, +-1: those are stored exactly, everything else as a 120-digit approximation.
Number snap(mpfr_srcptr x) {
    mpfr_t twice;
    mpfr_init2(twice, detail::high_bits);
    mpfr_mul_ui(twice, x, 2, MPFR_RNDN);
    const double r = std::round(mpfr_get_d(twice, MPFR_RNDN));
    mpfr_sub_d(twice, twice, r, MPFR_RNDN);
    mpfr_abs(twice, twice, MPFR_RNDN);
    const bool rational = mpfr_cmp_ui_2exp(twice, 1, -300) < 0;
    mpfr_clear(twice);
    if (rational) return lrnn::rational(static_cast<long long>(r), 2);
    return detail::from_mpfr(x);
}

std::pair<Number, Number> cos_sin_pi(long long numerator, long long denominator) {
    mpfr_t angle, c, s;
    mpfr_inits2(detail::high_bits, angle, c, s, static_cast<mpfr_ptr>(nullptr));
    mpfr_const_pi(angle, MPFR_RNDN);
    mpfr_mul_si(angle, angle, numerator, MPFR_RNDN);
    mpfr_div_si(angle, angle, denominator, MPFR_RNDN);
    mpfr_sin_cos(s, c, angle, MPFR_RNDN);
    auto result = std::make_pair(snap(c), snap(s));
    mpfr_clears(angle, c, s, static_cast<mpfr_ptr>(nullptr));
    return result;
}

// The reflection across the line at angle (numerator / denominator) * pi: v = its normal.
GhFactor reflection_across(long long numerator, long long denominator) {
    auto [c, s] = cos_sin_pi(numerator, denominator);
    if (s.is_exact()) s = detail::from_rational(-detail::exact_value(s));
    else s.approx = -s.approx, s.high = s.high[0] == '-' ? s.high.substr(1) : "-" + s.high;
    return GhFactor{sparse_vector({s, c}), integer(2)};
}

Layer single_layer(std::size_t dim, std::size_t tokens) {
    Layer layer;
    layer.dim = dim;
    layer.num_inputs = tokens;
    return layer;
}

// Adds `t` to the layer's transitions unless an equal one is there; returns its index.
struct TransitionTable {
    std::map<std::string, std::uint32_t> index;
    std::uint32_t add(Layer& layer, Transition t, const std::string& key) {
        auto [it, inserted] = index.emplace(key, std::uint32_t(layer.transitions.size()));
        if (inserted) layer.transitions.push_back(std::move(t));
        return it->second;
    }
};

std::string perm_key(const std::vector<std::uint32_t>& p) { return fmt::format("p{}", fmt::join(p, ",")); }

Network base_network(const Dfa& dfa, const char* construction, Wiring wiring) {
    Network net;
    net.name = dfa.name;
    net.construction = construction;
    net.alphabet = dfa.alphabet;
    net.wiring = wiring;
    return net;
}

Network compile_onehot(const Dfa& dfa, const std::vector<State>& states, const std::vector<std::vector<std::uint32_t>>& perms,
                       Wiring wiring) {
    Network net = base_network(dfa, "onehot", wiring);
    const std::size_t n = states.size();
    Layer layer = single_layer(n, dfa.num_letters());
    layer.h0 = unit(n, 0);
    TransitionTable table;
    for (Letter a = 0; a < dfa.num_letters(); ++a)
        layer.input_transition.push_back(table.add(layer, permutation_transition(perms[a]), perm_key(perms[a])));
    layer.readout.kind = Readout::Kind::argmax;
    for (std::size_t i = 0; i < n; ++i) layer.readout.labels.push_back(std::uint32_t(i));
    layer.readout.num_labels = layer.readout.num_outputs = n;
    net.layers.push_back(std::move(layer));
    for (State q : states) net.states.push_back(q), net.accept.push_back(dfa.accepting[q]);
    return net;
}

Network compile_parity(const Dfa& dfa, const std::vector<State>& states, const std::vector<std::vector<std::uint32_t>>& perms,
                       Wiring wiring) {
    Network net = base_network(dfa, "parity", wiring);
    Layer layer = single_layer(1, dfa.num_letters());
    layer.h0 = {integer(1)};
    Transition keep, flip;
    flip.factors.push_back(GhFactor{unit_vector(1, 0), integer(2)});  // A = 1 - 2 = -1
    layer.transitions = {keep, flip};
    for (Letter a = 0; a < dfa.num_letters(); ++a) layer.input_transition.push_back(perms[a][0] == 0 ? 0 : 1);
    layer.readout.kind = Readout::Kind::nearest;
    layer.readout.anchors = {{integer(1)}, {integer(-1)}};
    layer.readout.labels = {0, 1};
    layer.readout.num_labels = layer.readout.num_outputs = 2;
    net.layers.push_back(std::move(layer));
    for (State q : states) net.states.push_back(q), net.accept.push_back(dfa.accepting[q]);
    return net;
}

Network compile_rotation(const Dfa& dfa, const CyclicStructure& cyc, Wiring wiring) {
    Network net = base_network(dfa, "rotation", wiring);
    const long long m = static_cast<long long>(cyc.states.size());
    Layer layer = single_layer(2, dfa.num_letters());
    layer.h0 = {integer(1), integer(0)};
    TransitionTable table;
    for (Letter a = 0; a < dfa.num_letters(); ++a) {
        const long long k = static_cast<long long>(cyc.offsets[a]);
        Transition t;
        if (k != 0) {
            // (I - 2 v1 v1^T)(I - 2 v2 v2^T), v2 = (0, 1) first: x-axis mirror, then the mirror
            // across the line at angle pi k / m: a rotation by 2 pi k / m.
            t.factors.push_back(GhFactor{unit_vector(2, 1), integer(2)});
            t.factors.push_back(reflection_across(k, m));
        }
        layer.input_transition.push_back(table.add(layer, std::move(t), std::to_string(k)));
    }
    layer.readout.kind = Readout::Kind::nearest;
    for (long long i = 0; i < m; ++i) {
        auto [c, s] = cos_sin_pi(2 * i, m);
        layer.readout.anchors.push_back({c, s});
        layer.readout.labels.push_back(std::uint32_t(i));
    }
    layer.readout.num_labels = layer.readout.num_outputs = std::size_t(m);
    net.layers.push_back(std::move(layer));
    for (State q : cyc.states) net.states.push_back(q), net.accept.push_back(dfa.accepting[q]);
    return net;
}

// PAPER.md Theorem 6. Layer 1 counts t mod 2 (h <- -h + 1); layer 2 reflects by
// Ref(theta(x_t, t mod 2)), theta(i, 1) = (1 - 2i) pi / m, theta(i, 0) = (1 + 2i) pi / m, so after
// an even number of tokens with sum s the state is at angle 2 s pi / m, after an odd number at
// (1 - 2 s) pi / m: 2m distinct anchors, one readout without knowing t.
Network compile_theorem6(const Dfa& dfa, const CyclicStructure& cyc, Wiring wiring) {
    Network net = base_network(dfa, "theorem6", wiring);
    const long long m = static_cast<long long>(cyc.states.size());
    const std::size_t tokens = dfa.num_letters();
    Layer counter = single_layer(1, tokens);
    counter.h0 = {integer(0)};
    Transition t;
    t.factors.push_back(GhFactor{unit_vector(1, 0), integer(2)});
    t.bias = {integer(1)};
    counter.transitions = {t};
    counter.input_transition.assign(tokens, 0);
    counter.readout.kind = Readout::Kind::nearest;
    counter.readout.anchors = {{integer(0)}, {integer(1)}};
    counter.readout.labels = {0, 1};
    counter.readout.num_labels = counter.readout.num_outputs = 2;
    net.layers.push_back(std::move(counter));

    Layer adder = single_layer(2, 2 * tokens);
    adder.h0 = {integer(1), integer(0)};
    TransitionTable table;
    for (std::uint32_t o = 0; o < 2; ++o)
        for (Letter a = 0; a < tokens; ++a) {
            // shift: the counter's output read at t is t-1 mod 2; literal: it is t mod 2.
            const long long odd = wiring == Wiring::shift ? 1 - o : o;
            const long long i = static_cast<long long>(cyc.offsets[a]);
            const long long theta = odd ? 1 - 2 * i : 1 + 2 * i;  // in units of pi / m
            Transition r;
            r.factors.push_back(reflection_across(theta, 2 * m));  // the mirror line is at theta / 2
            adder.input_transition.push_back(table.add(adder, std::move(r), std::to_string(theta)));
        }
    adder.readout.kind = Readout::Kind::nearest;
    for (long long s = 0; s < m; ++s) {
        auto [ce, se] = cos_sin_pi(2 * s, m);
        adder.readout.anchors.push_back({ce, se});
        adder.readout.labels.push_back(std::uint32_t(s));
        auto [co, so] = cos_sin_pi(1 - 2 * s, m);
        adder.readout.anchors.push_back({co, so});
        adder.readout.labels.push_back(std::uint32_t(s));
    }
    adder.readout.num_labels = adder.readout.num_outputs = std::size_t(m);
    net.layers.push_back(std::move(adder));
    for (State q : cyc.states) net.states.push_back(q), net.accept.push_back(dfa.accepting[q]);
    return net;
}

using automata::Cascade;
using automata::Coordinates;
using automata::Point;

// Equal actions give equal transitions: the key is the kind and the raw map (no formatting).
std::string action_key(const automata::LevelAction& action) {
    std::string key(1, char(action.kind));
    key.append(reinterpret_cast<const char*>(action.map.data()), action.map.size() * sizeof(automata::Point));
    return key;
}

// The token classes of a cascade network: letters with the same column in the DFA's table, kept
// only when the cascade gives them the same action at every listed prefix of every level too
// (holonomy depends on the letter's map only, so it does). Empty when every letter is its own class.
struct TokenClasses {
    std::vector<std::uint32_t> of;          // per letter (empty: none)
    std::vector<Letter> representative;     // per class: its first letter
};

TokenClasses token_classes(const Dfa& dfa, const Cascade& c) {
    TokenClasses tc;
    const std::size_t tokens = dfa.num_letters();
    std::vector<std::uint32_t> of(tokens);
    for (Letter a = 0; a < tokens; ++a) {
        of[a] = std::uint32_t(tc.representative.size());
        for (std::uint32_t k = 0; k < tc.representative.size(); ++k) {
            const Letter b = tc.representative[k];
            bool same = true;
            for (State q = 0; q < dfa.num_states() && same; ++q) same = dfa.next(q, a) == dfa.next(q, b);
            if (same) {
                of[a] = k;
                break;
            }
        }
        if (of[a] == tc.representative.size()) tc.representative.push_back(a);
    }
    std::unordered_set<const std::vector<automata::LevelAction>*> checked;  // equal lists are stored once
    for (const auto& level : c.levels)
        for (const auto& [above, acts] : level.actions) {
            if (!checked.insert(&acts).second) continue;
            for (Letter a = 0; a < tokens; ++a)
                if (!(acts[a] == acts[tc.representative[of[a]]])) {
                    tc.representative.resize(tokens);
                    for (Letter b = 0; b < tokens; ++b) tc.representative[b] = b;
                    return tc;
                }
        }
    if (tc.representative.size() < tokens) tc.of = std::move(of);
    return tc;
}

// The reachable tuples of coordinates of levels 0..i (prefixes of reachable cascade states), in
// lexicographic order, each as (index of its parent tuple of levels 0..i-1, point of level i).
// `next[p * classes + k]` is the tuple that p becomes on token class k (under the wiring's semantics).
// Tuples with one parent are consecutive: children[u] .. children[u + 1] - 1 are parent u's.
struct PrefixLevel {
    std::vector<Coordinates> tuples;
    std::vector<std::uint32_t> parent;
    std::vector<std::uint32_t> children;
    FlatMap64 index;  // (parent << 32 | point) -> tuple
    std::vector<std::uint32_t> next;
    std::uint32_t find(std::uint32_t parent_tuple, automata::Point point) const {
        const std::uint32_t* t = index.find(std::uint64_t(parent_tuple) << 32 | point);
        return t ? *t : no_tuple;
    }
    static constexpr std::uint32_t no_tuple = std::numeric_limits<std::uint32_t>::max();
};

// Level i's actions per tuple of the levels above: one map lookup per tuple, not per letter.
std::vector<const std::vector<automata::LevelAction>*> level_actions(const Cascade& c, std::size_t i, const PrefixLevel& above) {
    std::vector<const std::vector<automata::LevelAction>*> acts(above.tuples.size(), nullptr);
    for (std::size_t u = 0; u < acts.size(); ++u)
        if (const auto it = c.levels[i].actions.find(above.tuples[u]); it != c.levels[i].actions.end()) acts[u] = &it->second;
    return acts;
}

Point apply(const std::vector<automata::LevelAction>* acts, Letter a, Point p) { return acts ? (*acts)[a].apply(p) : p; }

// Level i's reachable tuples, breadth first from the start, then numbered in lexicographic order.
// shift: level i reads the levels above before their update (the cascade's semantics); literal:
// after it, as a stacked layer without the shift would.
PrefixLevel reachable_prefixes(const Cascade& c, std::size_t i, const PrefixLevel& above,
                               const std::vector<const std::vector<automata::LevelAction>*>& acts, const TokenClasses& tc, bool shift,
                               const std::string& origin) {
    const std::size_t classes = tc.representative.size();
    auto successor = [&](std::uint32_t parent, Point point, std::size_t k) {
        const std::uint32_t moved = above.next[parent * classes + k];
        return std::pair{moved, apply(acts[shift ? parent : moved], tc.representative[k], point)};
    };
    const Coordinates start_above(c.start.begin(), c.start.begin() + long(i));
    std::uint32_t root = 0;
    if (i > 0) root = std::uint32_t(std::lower_bound(above.tuples.begin(), above.tuples.end(), start_above) - above.tuples.begin());
    // Breadth first over (parent tuple, point), deduplicated by a flat set; then sorted, which is
    // lexicographic order as the parents are.
    std::vector<std::pair<std::uint32_t, Point>> seen{{root, c.start[i]}};
    FlatMap64 known;
    known.insert(std::uint64_t(root) << 32 | c.start[i], 0);
    for (std::size_t n = 0; n < seen.size(); ++n)
        for (std::size_t k = 0; k < classes; ++k) {
            const auto next = successor(seen[n].first, seen[n].second, k);
            if (known.insert(std::uint64_t(next.first) << 32 | next.second, 0).second) {
                if (seen.size() >= automata::default_cascade_state_limit)
                    throw LimitError(origin, "cascade", "more reachable cascade states than the limit");
                seen.push_back(next);
            }
        }
    std::sort(seen.begin(), seen.end());
    PrefixLevel level;
    level.children.assign(above.tuples.size() + 1, 0);
    level.tuples.reserve(seen.size());
    for (const auto& [parent, point] : seen) {
        level.index.insert(std::uint64_t(parent) << 32 | point, std::uint32_t(level.tuples.size()));
        Coordinates t = i == 0 ? Coordinates{} : above.tuples[parent];
        t.push_back(point);
        level.tuples.push_back(std::move(t));
        level.parent.push_back(parent);
        ++level.children[parent + 1];
    }
    for (std::size_t u = 0; u < above.tuples.size(); ++u) level.children[u + 1] += level.children[u];
    level.next.resize(level.tuples.size() * classes);
    for (std::size_t p = 0; p < level.tuples.size(); ++p)
        for (std::size_t k = 0; k < classes; ++k) {
            const auto [parent, point] = successor(level.parent[p], level.tuples[p].back(), k);
            level.next[p * classes + k] = level.find(parent, point);
        }
    return level;
}

// One one-hot layer per level. Layer i's output symbol at time t is the tuple of coordinates of
// levels 0..i after the update at t (from its own state and, for the levels above, their update
// computed from its input letter); under the shift wiring layer i+1 reads that tuple at t+1, which
// is exactly the "before the update" view the cascade semantics requires.
Network compile_cascade(const Dfa& dfa, const Cascade& c, const CompileOptions& options) {
    Network net = base_network(dfa, "cascade", options.wiring);
    const std::size_t levels = c.levels.size();
    const TokenClasses tc = token_classes(dfa, c);
    net.token_class = tc.of;
    const std::size_t classes = tc.representative.size();
    const bool shift = options.wiring == Wiring::shift;
    const std::string origin = dfa.name.empty() ? "<dfa>" : dfa.name;
    // The level above level 0: one empty tuple that every letter keeps.
    PrefixLevel above;
    above.tuples = {Coordinates{}};
    above.parent = {0};
    above.next.assign(classes, 0);
    static const automata::LevelAction identity;
    for (std::size_t i = 0; i < levels; ++i) {
        const auto acts = level_actions(c, i, above);
        PrefixLevel level = reachable_prefixes(c, i, above, acts, tc, shift, origin);
        const std::size_t dim = std::max<std::size_t>(c.levels[i].points, 1);
        Layer layer = single_layer(dim, above.tuples.size() * classes);
        layer.h0 = unit(dim, c.start[i]);
        TransitionTable table;
        std::unordered_map<const automata::LevelAction*, std::uint32_t> known;  // equal lists are stored once: most lookups hit here
        layer.readout.kind = Readout::Kind::argmax;
        for (std::size_t j = 0; j < dim; ++j) layer.readout.labels.push_back(std::uint32_t(j));
        layer.readout.num_labels = dim;
        layer.readout.num_outputs = level.tuples.size();
        layer.input_transition.reserve(layer.num_inputs);
        layer.readout.output_start.reserve(layer.num_inputs + 1);
        layer.readout.output_start.push_back(0);
        for (std::size_t u = 0; u < above.tuples.size(); ++u)
            for (std::size_t k = 0; k < classes; ++k) {
                const std::size_t input = u * classes + k;
                const automata::LevelAction& action = acts[u] ? (*acts[u])[tc.representative[k]] : identity;
                auto hit = known.find(&action);
                if (hit == known.end()) {
                    const std::string key = action_key(action);
                    auto existing = table.index.find(key);  // build each distinct transition once (large resets)
                    std::uint32_t t = 0;
                    if (existing != table.index.end()) {
                        t = existing->second;
                    } else if (action.kind == automata::LevelAction::Kind::permutation) {
                        std::vector<std::uint32_t> perm(action.map.begin(), action.map.end());
                        perm.resize(dim);
                        for (std::size_t j = action.map.size(); j < dim; ++j) perm[j] = std::uint32_t(j);
                        t = table.add(layer, permutation_transition(perm), key);
                    } else if (action.kind == automata::LevelAction::Kind::constant) {
                        t = table.add(layer, reset_transition(dim, action.map[0], options.reset), key);
                    } else {
                        t = table.add(layer, Transition{}, key);
                    }
                    hit = known.emplace(&action, t).first;
                }
                layer.input_transition.push_back(hit->second);
                // The levels above after this step: shift reads them before the update and
                // advances them here; literal reads them after the update already. The output
                // for own coordinate j is the tuple (levels above, j), for every j that occurs.
                const std::uint32_t parent = shift ? above.next[input] : std::uint32_t(u);
                if (parent != PrefixLevel::no_tuple)
                    for (std::uint32_t t = level.children[parent]; t < level.children[parent + 1]; ++t)
                        layer.readout.outputs.push_back({std::uint32_t(level.tuples[t].back()), t});
                layer.readout.output_start.push_back(std::uint32_t(layer.readout.outputs.size()));
            }
        const Coordinates start(c.start.begin(), c.start.begin() + long(i) + 1);
        layer.initial_output = std::uint32_t(std::lower_bound(level.tuples.begin(), level.tuples.end(), start) - level.tuples.begin());
        net.layers.push_back(std::move(layer));
        above = std::move(level);
    }
    for (const auto& x : above.tuples) {
        auto it = c.decode.find(x);
        const std::int64_t q = it == c.decode.end() ? no_dfa_state : std::int64_t(it->second);
        net.states.push_back(q);
        net.accept.push_back(q != no_dfa_state && dfa.accepting[std::size_t(q)]);
    }
    return net;
}

}  // namespace

CyclicStructure cyclic_structure(const Dfa& dfa) {
    const auto states = reachable_states(dfa);
    const auto perms = letter_permutations(dfa, states);
    const std::size_t m = states.size();
    if (perms.empty()) return {};
    // Closure of the generated group (as permutations of coordinates), stopping past m elements:
    // a transitive abelian group is regular, so a cyclic one has exactly m elements.
    std::vector<std::uint32_t> identity(m);
    for (std::size_t i = 0; i < m; ++i) identity[i] = std::uint32_t(i);
    std::set<std::vector<std::uint32_t>> group{identity};
    std::deque<std::vector<std::uint32_t>> queue{identity};
    while (!queue.empty() && group.size() <= m) {
        const auto g = queue.front();
        queue.pop_front();
        for (const auto& p : perms) {
            std::vector<std::uint32_t> h(m);
            for (std::size_t i = 0; i < m; ++i) h[i] = p[g[i]];
            if (group.insert(h).second) queue.push_back(h);
        }
    }
    if (group.size() != m) return {};
    for (const auto& g : group) {
        // g must be one m-cycle through the start (coordinate 0).
        std::vector<std::uint32_t> orbit{0};
        for (std::uint32_t x = g[0]; x != 0 && orbit.size() <= m; x = g[x]) orbit.push_back(x);
        if (orbit.size() != m) continue;
        std::vector<std::size_t> position(m);
        for (std::size_t i = 0; i < m; ++i) position[orbit[i]] = i;
        CyclicStructure result;
        for (auto x : orbit) result.states.push_back(states[x]);
        bool ok = true;
        for (const auto& p : perms) {
            const std::size_t k = position[p[0]];
            for (std::size_t i = 0; i < m && ok; ++i) ok = position[p[orbit[i]]] == (i + k) % m;
            result.offsets.push_back(k);
        }
        if (ok) return result;
    }
    return {};
}

Network compile_dfa(const Dfa& dfa, const CompileOptions& options) {
    automata::validate(dfa, dfa.name.empty() ? "<dfa>" : dfa.name);
    const std::string origin = dfa.name.empty() ? "<dfa>" : dfa.name;
    const auto states = reachable_states(dfa);
    const auto perms = letter_permutations(dfa, states);
    const bool group = !perms.empty();
    Construction c = options.construction;
    if (c == Construction::automatic)
        c = !group ? Construction::cascade : states.size() == 2 ? Construction::parity : Construction::onehot;
    switch (c) {
        case Construction::onehot:
            if (!group) throw InputError(origin, "--construction onehot", "not a group automaton (some letter merges reachable states): use auto or cascade");
            return compile_onehot(dfa, states, perms, options.wiring);
        case Construction::parity:
            if (!group || states.size() != 2)
                throw InputError(origin, "--construction parity", "needs a group automaton with 2 reachable states");
            return compile_parity(dfa, states, perms, options.wiring);
        case Construction::rotation:
        case Construction::theorem6: {
            const auto cyc = cyclic_structure(dfa);
            if (cyc.states.size() < 2)
                throw InputError(origin, fmt::format("--construction {}", to_string(c)),
                                 "needs a cyclic-group automaton (every letter adds a constant mod m, m >= 2)");
            return c == Construction::rotation ? compile_rotation(dfa, cyc, options.wiring) : compile_theorem6(dfa, cyc, options.wiring);
        }
        case Construction::cascade:
        case Construction::automatic: {
            const auto decomposition = automata::decompose(dfa);
            // A single reachable state gives a cascade without levels, hence a network without layers,
            // which nothing can run or read back (found by the round-trip property tests).
            if (decomposition.cascade.levels.empty())
                throw InputError(origin, "--construction cascade", "one reachable state: the cascade has no levels (use auto or onehot)");
            return compile_cascade(dfa, decomposition.cascade, options);
        }
    }
    throw InputError(origin, "--construction", "unknown construction");
}

}  // namespace statetrack::lrnn
