#include "statetrack/automata/cascade.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <numeric>
#include <tuple>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "statetrack/automata/cascade_search.hpp"
#include "statetrack/automata/error.hpp"
#include "hash_mix.hpp"

namespace statetrack::automata {

namespace {
const LevelAction identity_action{};

using detail::mix;

// Hash of a vector of points.
struct VectorHash {
    std::size_t operator()(const std::vector<Point>& v) const noexcept {
        std::uint64_t h = v.size();
        for (Point p : v) h = mix(h + p + 0x9e3779b97f4a7c15ULL);
        return std::size_t(h);
    }
};

std::size_t list_hash(const std::vector<LevelAction>& list) {
    std::uint64_t h = list.size();
    for (const auto& a : list) {
        h = mix(h + std::uint64_t(a.kind) + 0x9e3779b97f4a7c15ULL);
        for (Point p : a.map) h = mix(h + p);
    }
    return std::size_t(h);
}

// Empty when the action is a well-formed map of `points` points, else what is wrong.
std::string malformed(const LevelAction& action, std::size_t points) {
    switch (action.kind) {
        case LevelAction::Kind::identity:
            return action.map.empty() ? "" : "identity action with a map";
        case LevelAction::Kind::constant:
            if (action.map.size() != 1) return "constant action without exactly one target";
            return action.map[0] < points ? "" : fmt::format("constant target {} outside 0..{}", action.map[0], points - 1);
        case LevelAction::Kind::permutation: {
            if (action.map.size() != points)
                return fmt::format("permutation of {} points on a level of {}", action.map.size(), points);
            std::vector<bool> hit(points, false);
            for (Point p : action.map) {
                if (p >= points || hit[p]) return "permutation map is not a bijection";
                hit[p] = true;
            }
            return "";
        }
    }
    return "unknown action kind";
}

bool lexicographic_less(std::span<const Point> x, std::span<const Point> y) {
    return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end());
}

}  // namespace

// ---- PrefixActions ---------------------------------------------------------------------------

std::size_t PrefixActions::lower_bound(std::span<const Point> above) const {
    std::size_t lo = 0, hi = size();
    while (lo < hi) {
        const std::size_t mid = (lo + hi) / 2;
        if (lexicographic_less(key(mid), above)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

PrefixActions::iterator PrefixActions::find(std::span<const Point> above) const {
    if (empty() || above.size() != width_) return end();
    const std::size_t i = lower_bound(above);
    return i < size() && std::equal(above.begin(), above.end(), key(i).begin()) ? iterator(this, i) : end();
}

const PrefixActions::List* PrefixActions::list(std::span<const Point> above) const {
    const auto it = find(above);
    return it == end() ? nullptr : &lists_[list_of_[it.index()]];
}

PrefixActions::List& PrefixActions::operator[](const Coordinates& above) {
    if (!width_set_) width_ = above.size(), width_set_ = true;
    if (above.size() != width_)
        throw std::logic_error(fmt::format("prefix of length {} among prefixes of length {}", above.size(), width_));
    const std::size_t i = lower_bound(above);
    // A fresh copy, not interned: editing it must not change the other prefixes that share a list.
    const bool listed = i < size() && std::equal(above.begin(), above.end(), key(i).begin());
    lists_.push_back(listed ? lists_[list_of_[i]] : List{});
    const auto index = std::uint32_t(lists_.size() - 1);
    if (listed) {
        list_of_[i] = index;
    } else {
        keys_.insert(keys_.begin() + std::ptrdiff_t(i * width_), above.begin(), above.end());
        list_of_.insert(list_of_.begin() + std::ptrdiff_t(i), index);
    }
    return lists_.back();
}

std::uint32_t PrefixActions::add_list(const List& list) {
    auto& same_hash = interned_[list_hash(list)];
    for (std::uint32_t i : same_hash)
        if (lists_[i] == list) return i;
    lists_.push_back(list);
    same_hash.push_back(std::uint32_t(lists_.size() - 1));
    return same_hash.back();
}

void PrefixActions::push_back(std::span<const Point> above, std::uint32_t list) {
    if (!width_set_) width_ = above.size(), width_set_ = true;
    if (above.size() != width_ || list >= lists_.size() || (!empty() && !lexicographic_less(key(size() - 1), above)))
        throw std::logic_error("PrefixActions::push_back: prefixes must be of one length and strictly increasing");
    keys_.insert(keys_.end(), above.begin(), above.end());
    list_of_.push_back(list);
}

void PrefixActions::reserve(std::size_t entries, std::size_t width) {
    keys_.reserve(entries * width);
    list_of_.reserve(entries);
}

// ---- the simulator ---------------------------------------------------------------------------

const LevelAction& level_action(const Cascade& cascade, std::size_t level, std::span<const Point> above, Letter letter) {
    const auto* list = cascade.levels[level].actions.list(above);
    return list ? (*list)[letter] : identity_action;
}

Coordinates step(const Cascade& cascade, const Coordinates& coords, Letter letter) {
    Coordinates next(coords.size());
    // Every level reads `coords` (the values before the update), never `next`.
    for (std::size_t i = 0; i < coords.size(); ++i)
        next[i] = level_action(cascade, i, std::span<const Point>(coords.data(), i), letter).apply(coords[i]);
    return next;
}

Coordinates run(const Cascade& cascade, std::span<const Letter> word) {
    Coordinates c = cascade.start;
    for (Letter a : word) c = step(cascade, c, a);
    return c;
}

std::size_t one_hot_size(const Cascade& cascade) {
    std::size_t total = 0;
    for (const auto& level : cascade.levels) total += level.points;
    return total;
}

// ---- level-by-level reachable prefixes ---------------------------------------------------------

PrefixLevel root_prefix_level(std::size_t letters) {
    PrefixLevel root;
    root.parent = {0};
    root.point = {0};
    root.next.assign(letters, 0);
    return root;
}

PrefixLevel next_prefix_level(const PrefixLevel& above, const std::vector<const std::vector<LevelAction>*>& lists,
                              Point start_point, std::size_t points, std::size_t letters, std::size_t limit,
                              const std::string& origin, const std::string& what,
                              const std::unordered_map<const LevelAction*, std::uint32_t>& bad) {
    // The action lists as rows of codes, each distinct list once.
    ActionTable table(letters, points);
    std::unordered_map<const std::vector<LevelAction>*, std::uint32_t> row_of_list;
    std::vector<std::uint32_t> row_of(above.size(), 0), row(letters);
    for (std::size_t u = 0; u < above.size(); ++u) {
        if (!lists[u]) continue;
        auto [it, fresh] = row_of_list.try_emplace(lists[u], 0);
        if (fresh) {
            for (Letter a = 0; a < letters; ++a) {
                const LevelAction& act = (*lists[u])[a];
                const auto marked = bad.find(&act);
                row[a] = marked != bad.end() ? ActionTable::bad_flag | marked->second : table.code(act);
            }
            it->second = table.add_row(row);
        }
        row_of[u] = it->second;
    }
    PrefixSearch search;
    PrefixLevel level;
    next_prefix_level(above, row_of, table, start_point, limit, origin, what, search, level);
    return level;
}

// ---- verification --------------------------------------------------------------------------

CascadeCheck verify_cascade(const Dfa& dfa, const Cascade& cascade, std::size_t pair_limit) {
    CascadeCheck check;
    const std::size_t levels = cascade.levels.size(), letters = dfa.num_letters();
    if (cascade.alphabet.size() != letters)
        throw InputError("<cascade>", "/alphabet", fmt::format("{} letters, the DFA has {}", cascade.alphabet.size(), letters));
    if (cascade.start.size() != levels)
        throw InputError("<cascade>", "/start", fmt::format("{} coordinates for {} levels", cascade.start.size(), levels));
    for (std::size_t i = 0; i < levels; ++i)
        for (const auto& [above, acts] : cascade.levels[i].actions)
            if (above.size() != i || acts.size() != letters)
                throw InputError("<cascade>", fmt::format("/levels/{}/actions", i), "prefix or action list of the wrong size");

    auto fail_now = [&](std::vector<Letter> word, std::string message) {
        check.ok = false;
        check.counterexample = std::move(word);
        check.message = std::move(message);
        return check;
    };
    for (std::size_t i = 0; i < levels; ++i)
        if (cascade.start[i] >= cascade.levels[i].points)
            return fail_now({}, fmt::format("level {} holds point {} of {}", i, cascade.start[i], cascade.levels[i].points));

    // Letters that act alike on the DFA and in every action list move every pair alike, so the
    // searches read one letter per class (its smallest): the same pairs, the same shortest words.
    const LetterClasses classes = cascade_letter_classes(dfa, cascade);
    const std::size_t width = classes.size();

    // The reachable cascade states, level by level, on the cascade's own actions: each distinct
    // list becomes one row of codes (malformed actions are marked, and the pair search reports the
    // shortest word that uses one); each tuple's list is found by merging the sorted tuples with the
    // sorted listed prefixes.
    std::vector<std::string> why_bad;
    PrefixSearch search;
    PrefixLevel level = root_prefix_level(width), below;
    PrefixTree tree;
    std::vector<std::uint32_t> row_of, row(width);
    for (std::size_t i = 0; i < levels; ++i) {
        const auto& actions = cascade.levels[i].actions;
        const std::size_t points = cascade.levels[i].points;
        ActionTable table(width, points);
        for (const auto& list : actions.lists()) {  // row k + 1 is list k
            for (std::size_t c = 0; c < width; ++c) {
                if (list.size() != letters) {  // a list no prefix uses (the listed ones were checked above)
                    row[c] = ActionTable::identity;
                    continue;
                }
                const LevelAction& act = list[classes.representative[c]];
                if (auto why = malformed(act, points); !why.empty()) {
                    row[c] = ActionTable::bad_flag | std::uint32_t(std::min<std::size_t>(why_bad.size(), ActionTable::bad_limit - 1));
                    why_bad.push_back(fmt::format("level {}: {}", i, why));
                } else {
                    row[c] = table.code(act);
                }
            }
            table.add_row(row);
        }
        // Each listed prefix's tuple (prefixes that are not reachable play no part).
        row_of.assign(level.size(), 0);
        if (i == 0) {
            if (!actions.empty()) row_of[0] = actions.list_index(0) + 1;
        } else {
            PrefixTree::Finder finder(tree);
            for (std::size_t e = 0; e < actions.size(); ++e)
                if (const std::uint32_t u = finder.find(actions.key(e)); u != PrefixTree::none) row_of[u] = actions.list_index(e) + 1;
        }
        next_prefix_level(level, row_of, table, cascade.start[i], pair_limit, dfa.name, "verify", search, below);
        tree.add_level(below);
        std::swap(level, below);
    }
    // What every reachable cascade state decodes to (no_state: not listed).
    std::vector<State> decoded(level.size(), no_state);
    if (levels == 0) {
        if (const auto it = cascade.decode.find(Coordinates{}); it != cascade.decode.end()) decoded[0] = it->second;
    } else {
        PrefixTree::Finder finder(tree);
        for (const auto& [coords, q] : cascade.decode)
            if (coords.size() == levels)
                if (const std::uint32_t s = finder.find(coords); s != PrefixTree::none) decoded[s] = q;
    }

    // Every reachable pair (DFA state, cascade state) is consistent exactly when decode is a
    // homomorphism on the reachable cascade states: the start decodes to the DFA's start, and for
    // every reachable cascade state s and letter a, decode(s.a) = decode(s).a. (If it is, each pair
    // reached is (decode(s), s), by induction on the word; if it is not at some s, then the pairs
    // are not all consistent, since a consistent pair (decode(s), s) would lead to an inconsistent
    // one.) This scan reads the cascade states in order; only when it fails does the breadth-first
    // search below run, for the shortest word.
    const auto& representative = classes.representative;
    const std::size_t states = level.size();
    bool consistent = decoded[level.start] == dfa.start;
    for (std::size_t s = 0; s < states && consistent; ++s) {
        const State q = decoded[s];
        consistent = q != no_state;
        for (std::size_t c = 0; c < width && consistent; ++c) {
            const std::uint32_t t = level.next[s * width + c];
            consistent = !(t & PrefixLevel::bad_tuple) && decoded[t] == dfa.next(q, representative[c]);
        }
    }
    if (consistent) {
        check.ok = true;
        check.pairs = states;  // one DFA state per reachable cascade state
        return check;
    }

    // Breadth-first over pairs (DFA state, cascade state). A correct cascade pairs each cascade
    // state with one DFA state, so the first DFA state met per cascade state is kept flat; any
    // second one goes to a hash set (and is a failure when visited).
    std::vector<State> first_with(level.size(), no_state);
    std::unordered_set<std::uint64_t> other_pairs;
    std::vector<std::pair<State, std::uint32_t>> pairs;
    std::vector<std::pair<std::uint32_t, Letter>> parent;
    auto word_to = [&](std::size_t index) {
        std::vector<Letter> word;
        while (index != 0) {
            word.push_back(parent[index].second);
            index = parent[index].first;
        }
        return std::vector<Letter>(word.rbegin(), word.rend());
    };
    auto fail = [&](std::size_t index, std::optional<Letter> last, std::string message) {
        auto word = word_to(index);
        if (last) word.push_back(*last);
        check.pairs = pairs.size();
        return fail_now(std::move(word), std::move(message));
    };
    auto state_text = [&](std::uint32_t s) { return levels ? fmt::format("{}", fmt::join(tree.coordinates(levels - 1, s), ", ")) : ""; };
    pairs.emplace_back(dfa.start, level.start);
    first_with[level.start] = dfa.start;
    parent.emplace_back(0, 0);
    for (std::size_t index = 0; index < pairs.size(); ++index) {
        const auto [q, s] = pairs[index];
        if (decoded[s] == no_state)
            return fail(index, {}, fmt::format("cascade state ({}) is reachable but has no decoding", state_text(s)));
        if (decoded[s] != q)
            return fail(index, {}, fmt::format("cascade state ({}) decodes to state {}, the DFA is in state {}", state_text(s),
                                               state_label(dfa, decoded[s]), state_label(dfa, q)));
        for (std::size_t c = 0; c < width; ++c) {
            const Letter a = representative[c];
            const std::uint32_t t = level.next[std::size_t(s) * width + c];
            if (t & PrefixLevel::bad_tuple) return fail(index, a, why_bad[t & ~PrefixLevel::bad_tuple]);
            const State r = dfa.next(q, a);
            bool fresh = false;
            if (first_with[t] == no_state) first_with[t] = r, fresh = true;
            else if (first_with[t] != r) fresh = other_pairs.insert((std::uint64_t(t) << 32) | r).second;
            if (!fresh) continue;
            if (pairs.size() >= pair_limit)
                throw LimitError(dfa.name, "verify", fmt::format("more than {} reachable (state, cascade state) pairs", pair_limit));
            pairs.emplace_back(r, t);
            parent.emplace_back(std::uint32_t(index), a);
        }
    }
    throw std::logic_error("verify_cascade: the scan failed but the pair search found no failure");
}

// ---- exploration of a cascade given by a step function ------------------------------------------

void fill_encode(Cascade& cascade) {
    cascade.encode.clear();
    for (const auto& [coords, q] : cascade.decode) cascade.encode.try_emplace(q, coords);
}

void explore_cascade(Cascade& cascade, const Coordinates& start, State start_state, const CascadeAdvance& advance,
                     std::size_t state_limit, const std::string& origin) {
    const std::size_t levels = cascade.levels.size(), letters = cascade.alphabet.size();
    std::unordered_map<Coordinates, std::size_t, VectorHash> seen;
    std::vector<Coordinates> states{start};
    std::vector<State> decoded{start_state};
    seen.emplace(start, 0);
    std::vector<std::vector<LevelAction>> acts(letters, std::vector<LevelAction>(levels));
    // The actions of level d depend on the prefix only: the first state with a prefix records them.
    std::vector<std::unordered_map<Coordinates, std::uint32_t, VectorHash>> listed(levels);
    std::vector<PrefixActions> actions(levels);
    PrefixActions::List list(letters);
    Coordinates current, next(levels);
    for (std::size_t i = 0; i < states.size(); ++i) {
        current = states[i];  // a copy: `states` grows below
        for (Letter a = 0; a < letters; ++a) {
            const State q = advance(current, a, next, acts[a]);
            if (seen.emplace(next, states.size()).second) {
                if (states.size() >= state_limit)
                    throw LimitError(origin, "cascade", fmt::format("more than {} reachable cascade states", state_limit));
                states.push_back(next);
                decoded.push_back(q);
            }
        }
        for (std::size_t d = 0; d < levels; ++d) {
            Coordinates prefix(current.begin(), current.begin() + std::ptrdiff_t(d));
            if (listed[d].count(prefix)) continue;
            for (Letter a = 0; a < letters; ++a) list[a] = acts[a][d];
            listed[d].emplace(std::move(prefix), actions[d].add_list(list));
        }
    }
    // Prefixes in order; lists where every letter is the identity are not listed.
    for (std::size_t d = 0; d < levels; ++d) {
        std::vector<std::pair<Coordinates, std::uint32_t>> entries(listed[d].begin(), listed[d].end());
        std::sort(entries.begin(), entries.end());
        for (const auto& [prefix, index] : entries) {
            const auto& l = actions[d].lists()[index];
            if (std::any_of(l.begin(), l.end(), [](const LevelAction& x) { return x.kind != LevelAction::Kind::identity; }))
                actions[d].push_back(prefix, index);
        }
        cascade.levels[d].actions = std::move(actions[d]);
    }
    cascade.start = start;
    cascade.decode.clear();
    std::vector<std::size_t> order(states.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return states[x] < states[y]; });
    for (std::size_t i : order) cascade.decode.emplace_hint(cascade.decode.end(), std::move(states[i]), decoded[i]);
    fill_encode(cascade);
}

std::string write_cascade_json(const Cascade& cascade) {
    // Streamed as text, not built as a DOM: the large MLRegTest cascades list 6 x 10^5 prefixes
    // of 64 actions each, and a DOM of them took 7 GB.
    std::string out;
    auto to = std::back_inserter(out);
    auto text = [](const std::string& s) { return nlohmann::json(s).dump(); };  // escaped
    auto list = [](auto&& range) { return fmt::format("[{}]", fmt::join(range, ", ")); };
    auto action_json = [&](const LevelAction& a) -> std::string {
        switch (a.kind) {
            case LevelAction::Kind::identity: return "\"identity\"";
            case LevelAction::Kind::constant: return fmt::format("{{\"constant\": {}}}", a.map[0]);
            case LevelAction::Kind::permutation: return fmt::format("{{\"permutation\": {}}}", list(a.map));
        }
        throw std::logic_error("unknown action kind");
    };
    std::vector<std::string> symbols;
    for (const auto& s : cascade.alphabet) symbols.push_back(text(s));
    fmt::format_to(to, "{{\n \"format\": \"statetrack.cascade/1\",\n \"method\": {},\n \"alphabet\": {},\n", text(cascade.method),
                   list(symbols));
    fmt::format_to(to, " \"dfa_states\": {},\n \"one_hot_size\": {},\n \"levels\": [", cascade.dfa_states, one_hot_size(cascade));
    for (std::size_t i = 0; i < cascade.levels.size(); ++i) {
        const auto& level = cascade.levels[i];
        fmt::format_to(to, "{}\n  {{\"points\": {},\n   \"groups\": [", i ? "," : "", level.points);
        for (std::size_t g = 0; g < level.groups.size(); ++g) {
            const auto& group = level.groups[g];
            std::vector<std::string> generators;
            for (const auto& x : group.generators) generators.push_back(list(x));
            fmt::format_to(to, "{}{{\"first\": {}, \"points\": {}, \"order\": {}, \"name\": {}, \"generators\": {}}}", g ? ", " : "",
                           group.first, group.points, group.order, text(group.name), list(generators));
        }
        out += "],\n   \"actions\": [";
        // Distinct lists are converted once; most prefixes share a few lists.
        std::vector<std::string> converted(level.actions.lists().size());
        for (std::size_t e = 0; e < level.actions.size(); ++e) {
            std::string& letters = converted[level.actions.list_index(e)];
            if (letters.empty()) {
                std::vector<std::string> each;
                for (const auto& a : level.actions.entry(e).second) each.push_back(action_json(a));
                letters = list(each);
            }
            fmt::format_to(to, "{}\n    {{\"above\": {}, \"letters\": {}}}", e ? "," : "", list(level.actions.key(e)), letters);
        }
        out += "]}";
    }
    fmt::format_to(to, "],\n \"start\": {},\n \"decode\": [", list(cascade.start));
    bool first = true;
    for (const auto& [coords, q] : cascade.decode) {
        fmt::format_to(to, "{}\n  {{\"coordinates\": {}, \"state\": {}}}", first ? "" : ",", list(coords), q);
        first = false;
    }
    out += "],\n \"encode\": [";
    first = true;
    for (const auto& [q, coords] : cascade.encode) {
        fmt::format_to(to, "{}\n  {{\"state\": {}, \"coordinates\": {}}}", first ? "" : ",", q, list(coords));
        first = false;
    }
    out += "]\n}\n";
    return out;
}

}  // namespace statetrack::automata
