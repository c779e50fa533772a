#include "statetrack/automata/cascade.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <tuple>
#include <stdexcept>
#include <unordered_map>

#include "statetrack/automata/error.hpp"

namespace statetrack::automata {

namespace {
const LevelAction identity_action{};

// Hash of a (DFA state, coordinates) pair flattened into one vector.
struct VectorHash {
    std::size_t operator()(const std::vector<Point>& v) const noexcept {
        std::uint64_t h = v.size();
        for (Point p : v) {  // murmur3's finaliser after every element
            h += p + 0x9e3779b97f4a7c15ULL;
            h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdULL;
            h = (h ^ (h >> 33)) * 0xc4ceb9fe1a85ec53ULL;
            h ^= h >> 33;
        }
        return std::size_t(h);
    }
};

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
// Prefixes of coordinates numbered level by level: node (level d, id) has children keyed by the
// point of level d. Replaces std::map lookups with one hash probe per level in the hot loops.
class PrefixTrie {
public:
    explicit PrefixTrie(std::size_t levels) : children_(levels) {}
    static constexpr std::uint32_t none = static_cast<std::uint32_t>(-1);
    // The node of the prefix extended by `point` at level `level` (from node `parent`), or none.
    std::uint32_t child(std::size_t level, std::uint32_t parent, Point point) const {
        const auto it = children_[level].find(key(parent, point));
        return it == children_[level].end() ? none : it->second;
    }
    // The same, created when missing; second is true when it was created.
    std::pair<std::uint32_t, bool> add_child(std::size_t level, std::uint32_t parent, Point point) {
        auto [it, fresh] = children_[level].try_emplace(key(parent, point), std::uint32_t(children_[level].size()));
        return {it->second, fresh};
    }

private:
    static std::uint64_t key(std::uint32_t parent, Point point) { return (std::uint64_t(parent) << 32) | point; }
    struct Mix {  // murmur3's finaliser: the keys' low and high halves both matter
        std::size_t operator()(std::uint64_t h) const noexcept {
            h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdULL;
            h = (h ^ (h >> 33)) * 0xc4ceb9fe1a85ec53ULL;
            return std::size_t(h ^ (h >> 33));
        }
    };
    std::vector<std::unordered_map<std::uint64_t, std::uint32_t, Mix>> children_;
};

// The cascade's dependency functions indexed by the trie: actions[d][node] is the action list of
// the prefix with that node at level d, or null (identity).
struct IndexedActions {
    PrefixTrie trie;
    std::vector<std::vector<const std::vector<LevelAction>*>> actions;

    explicit IndexedActions(const Cascade& cascade) : trie(cascade.levels.size()), actions(cascade.levels.size() + 1) {
        actions[0].push_back(nullptr);
        for (std::size_t d = 0; d < cascade.levels.size(); ++d)
            for (const auto& [above, acts] : cascade.levels[d].actions) {
                std::uint32_t node = 0;
                for (std::size_t i = 0; i < above.size(); ++i) {
                    node = trie.add_child(i, node, above[i]).first;
                    if (actions[i + 1].size() <= node) actions[i + 1].resize(node + 1, nullptr);
                }
                actions[d][node] = &acts;
            }
    }
    // The action lists of every level for these coordinates (null: identity for every letter).
    void lists(const Coordinates& coords, std::vector<const std::vector<LevelAction>*>& out) const {
        std::uint32_t node = 0;
        for (std::size_t d = 0; d < coords.size(); ++d) {
            out[d] = node == PrefixTrie::none ? nullptr : actions[d][node];
            if (node != PrefixTrie::none && d + 1 < coords.size()) node = trie.child(d, node, coords[d]);
        }
    }
};

}  // namespace

const LevelAction& level_action(const Cascade& cascade, std::size_t level, std::span<const Point> above, Letter letter) {
    const auto& actions = cascade.levels[level].actions;
    if (actions.empty()) return identity_action;
    const auto it = actions.find(Coordinates(above.begin(), above.end()));
    if (it == actions.end()) return identity_action;
    return it->second[letter];
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

CascadeCheck verify_cascade(const Dfa& dfa, const Cascade& cascade, std::size_t pair_limit) {
    CascadeCheck check;
    const std::size_t levels = cascade.levels.size();
    if (cascade.alphabet.size() != dfa.num_letters())
        throw InputError("<cascade>", "/alphabet",
                         fmt::format("{} letters, the DFA has {}", cascade.alphabet.size(), dfa.num_letters()));
    if (cascade.start.size() != levels)
        throw InputError("<cascade>", "/start", fmt::format("{} coordinates for {} levels", cascade.start.size(), levels));
    for (std::size_t i = 0; i < levels; ++i)
        for (const auto& [above, acts] : cascade.levels[i].actions)
            if (above.size() != i || acts.size() != dfa.num_letters())
                throw InputError("<cascade>", fmt::format("/levels/{}/actions", i), "prefix or action list of the wrong size");

    const IndexedActions indexed(cascade);
    // Malformed actions are found once here; the search reports the shortest word that uses one.
    std::unordered_map<const LevelAction*, std::string> malformed_actions;
    for (std::size_t i = 0; i < levels; ++i)
        for (const auto& [above, acts] : cascade.levels[i].actions)
            for (const auto& act : acts)
                if (auto why = malformed(act, cascade.levels[i].points); !why.empty())
                    malformed_actions.emplace(&act, fmt::format("level {}: {}", i, why));
    // Cascade states are numbered as met: the listed ones first, then any other reachable one
    // (which is already a failure, reported when its pair is visited).
    std::unordered_map<Coordinates, std::uint32_t, VectorHash> number;
    std::vector<Coordinates> coords_of;
    std::vector<State> decoded;
    for (const auto& [coords, q] : cascade.decode) {
        number.emplace(coords, std::uint32_t(coords_of.size()));
        coords_of.push_back(coords);
        decoded.push_back(q);
    }
    auto number_of = [&](const Coordinates& c) {
        auto [it, fresh] = number.try_emplace(c, std::uint32_t(coords_of.size()));
        if (fresh) {
            coords_of.push_back(c);
            decoded.push_back(no_state);
        }
        return it->second;
    };

    // A pair (DFA state, cascade state number) packed in 64 bits; parents give the shortest word back.
    auto pack = [](State q, std::uint32_t c) { return (std::uint64_t(c) << 32) | q; };
    std::unordered_map<std::uint64_t, std::uint32_t> seen;
    std::vector<std::uint64_t> pairs;
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
        check.ok = false;
        check.counterexample = word_to(index);
        if (last) check.counterexample->push_back(*last);
        check.message = std::move(message);
        check.pairs = pairs.size();
        return check;
    };

    pairs.push_back(pack(dfa.start, number_of(cascade.start)));
    seen.emplace(pairs[0], 0);
    parent.emplace_back(0, 0);
    std::vector<const std::vector<LevelAction>*> lists(levels);
    Coordinates next(levels);
    for (std::size_t index = 0; index < pairs.size(); ++index) {
        const State q = State(pairs[index] & 0xffffffffU);
        const std::uint32_t c = std::uint32_t(pairs[index] >> 32);
        const Coordinates coords = coords_of[c];
        for (std::size_t i = 0; i < levels; ++i)
            if (coords[i] >= cascade.levels[i].points)
                return fail(index, {}, fmt::format("level {} holds point {} of {}", i, coords[i], cascade.levels[i].points));
        if (decoded[c] == no_state)
            return fail(index, {}, fmt::format("cascade state ({}) is reachable but has no decoding", fmt::join(coords, ", ")));
        if (decoded[c] != q)
            return fail(index, {}, fmt::format("cascade state ({}) decodes to state {}, the DFA is in state {}",
                                               fmt::join(coords, ", "), state_label(dfa, decoded[c]), state_label(dfa, q)));
        indexed.lists(coords, lists);
        for (Letter a = 0; a < dfa.num_letters(); ++a) {
            for (std::size_t i = 0; i < levels; ++i) {
                const LevelAction& act = lists[i] ? (*lists[i])[a] : identity_action;
                if (!malformed_actions.empty())
                    if (auto it = malformed_actions.find(&act); it != malformed_actions.end()) return fail(index, a, it->second);
                next[i] = act.apply(coords[i]);
            }
            const std::uint64_t key = pack(dfa.next(q, a), number_of(next));
            if (seen.emplace(key, std::uint32_t(pairs.size())).second) {
                if (pairs.size() >= pair_limit)
                    throw LimitError(dfa.name, "verify",
                                     fmt::format("more than {} reachable (state, cascade state) pairs", pair_limit));
                pairs.push_back(key);
                parent.emplace_back(std::uint32_t(index), a);
            }
        }
    }
    check.ok = true;
    check.pairs = pairs.size();
    return check;
}

void explore_cascade(Cascade& cascade, const Coordinates& start, State start_state, const CascadeAdvance& advance,
                     std::size_t state_limit, const std::string& origin) {
    const std::size_t levels = cascade.levels.size(), letters = cascade.alphabet.size();
    std::unordered_map<Coordinates, std::size_t, VectorHash> seen;
    std::vector<Coordinates> states{start};
    std::vector<State> decoded{start_state};
    seen.emplace(start, 0);
    std::vector<std::vector<LevelAction>> acts(letters, std::vector<LevelAction>(levels));
    PrefixTrie trie(levels);
    // New prefixes are collected, then sorted into the maps at the end (inserting long vector
    // keys one by one into a large std::map dominated the run time).
    std::vector<std::vector<std::pair<Coordinates, std::vector<LevelAction>>>> pending(levels);
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
        // The actions of level d depend on the prefix only: the first state with a prefix records
        // them, unless every letter is the identity there (no entry needed).
        std::uint32_t node = 0;
        bool fresh = i == 0;
        for (std::size_t d = 0; d < levels; ++d) {
            const bool moves = std::any_of(acts.begin(), acts.end(), [&](const auto& per_letter) {
                return per_letter[d].kind != LevelAction::Kind::identity;
            });
            if (fresh && moves) {
                auto& entry = pending[d].emplace_back(Coordinates(current.begin(), current.begin() + std::ptrdiff_t(d)),
                                                      std::vector<LevelAction>(letters));
                for (Letter a = 0; a < letters; ++a) entry.second[a] = acts[a][d];
            }
            if (d + 1 < levels) std::tie(node, fresh) = trie.add_child(d, node, current[d]);
        }
    }
    for (std::size_t d = 0; d < levels; ++d) {
        auto& list = pending[d];
        std::sort(list.begin(), list.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        auto& actions = cascade.levels[d].actions;
        actions.clear();
        for (auto& entry : list) actions.emplace_hint(actions.end(), std::move(entry));
    }
    cascade.start = start;
    cascade.decode.clear();
    cascade.encode.clear();
    for (std::size_t i = 0; i < states.size(); ++i) cascade.encode.try_emplace(decoded[i], states[i]);
    std::vector<std::size_t> order(states.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return states[x] < states[y]; });
    for (std::size_t i : order) cascade.decode.emplace_hint(cascade.decode.end(), std::move(states[i]), decoded[i]);
}

std::string write_cascade_json(const Cascade& cascade) {
    using nlohmann::json;
    auto action_json = [](const LevelAction& a) -> json {
        switch (a.kind) {
            case LevelAction::Kind::identity: return "identity";
            case LevelAction::Kind::constant: return json{{"constant", a.map[0]}};
            case LevelAction::Kind::permutation: return json{{"permutation", a.map}};
        }
        throw std::logic_error("unknown action kind");
    };
    json levels = json::array();
    for (const auto& level : cascade.levels) {
        json groups = json::array();
        for (const auto& g : level.groups)
            groups.push_back({{"first", g.first}, {"points", g.points}, {"order", g.order}, {"name", g.name},
                              {"generators", g.generators}});
        json actions = json::array();
        for (const auto& [above, acts] : level.actions) {
            json letters = json::array();
            for (const auto& a : acts) letters.push_back(action_json(a));
            actions.push_back({{"above", above}, {"letters", letters}});
        }
        levels.push_back({{"points", level.points}, {"groups", groups}, {"actions", actions}});
    }
    json decode = json::array();
    for (const auto& [coords, q] : cascade.decode) decode.push_back({{"coordinates", coords}, {"state", q}});
    json encode = json::array();
    for (const auto& [q, coords] : cascade.encode) encode.push_back({{"state", q}, {"coordinates", coords}});
    json doc = {{"format", "statetrack.cascade/1"},
                {"method", cascade.method},
                {"alphabet", cascade.alphabet},
                {"dfa_states", cascade.dfa_states},
                {"one_hot_size", one_hot_size(cascade)},
                {"levels", levels},
                {"start", cascade.start},
                {"decode", decode},
                {"encode", encode}};
    return doc.dump(1) + "\n";
}

}  // namespace statetrack::automata
