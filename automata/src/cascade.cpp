#include "statetrack/automata/cascade.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
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
        for (Point p : v) {
            h = (h ^ p) * 0x9e3779b97f4a7c15ULL;
            h ^= h >> 31;
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
    std::vector<std::unordered_map<std::uint64_t, std::uint32_t>> children_;
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
    // Applies one letter to every level; check(level, action) sees every action used.
    template <typename Check>
    void apply(const Cascade& cascade, const Coordinates& coords, Letter a, Coordinates& next, Check&& check) const {
        std::uint32_t node = 0;
        for (std::size_t d = 0; d < coords.size(); ++d) {
            const auto* acts = node == PrefixTrie::none ? nullptr : actions[d][node];
            const LevelAction& act = acts ? (*acts)[a] : identity_action;
            check(d, act);
            next[d] = act.apply(coords[d]);
            if (node != PrefixTrie::none && d + 1 < coords.size()) node = trie.child(d, node, coords[d]);
        }
        (void)cascade;
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
    const std::unordered_map<Coordinates, State, VectorHash> decode(cascade.decode.begin(), cascade.decode.end());
    // Malformed actions are found once here; the search reports the shortest word that uses one.
    std::unordered_map<const LevelAction*, std::string> malformed_actions;
    for (std::size_t i = 0; i < levels; ++i)
        for (const auto& [above, acts] : cascade.levels[i].actions)
            for (const auto& act : acts)
                if (auto why = malformed(act, cascade.levels[i].points); !why.empty())
                    malformed_actions.emplace(&act, fmt::format("level {}: {}", i, why));
    // A pair is stored as {q, c_0, ..., c_{L-1}}; parents give the shortest word back.
    std::unordered_map<std::vector<Point>, std::size_t, VectorHash> seen;
    std::vector<std::vector<Point>> pairs;
    std::vector<std::pair<std::size_t, Letter>> parent;
    auto word_to = [&](std::size_t index) {
        std::vector<Letter> word;
        while (index != 0) {
            word.push_back(parent[index].second);
            index = parent[index].first;
        }
        return std::vector<Letter>(word.rbegin(), word.rend());
    };
    auto fail = [&](std::size_t index, std::string message) {
        check.ok = false;
        check.counterexample = word_to(index);
        check.message = std::move(message);
        check.pairs = pairs.size();
        return check;
    };

    std::vector<Point> first{dfa.start};
    first.insert(first.end(), cascade.start.begin(), cascade.start.end());
    seen.emplace(first, 0);
    pairs.push_back(std::move(first));
    parent.emplace_back(0, 0);
    Coordinates coords(levels), next(levels);
    for (std::size_t index = 0; index < pairs.size(); ++index) {
        const State q = pairs[index][0];
        coords.assign(pairs[index].begin() + 1, pairs[index].end());
        for (std::size_t i = 0; i < levels; ++i)
            if (coords[i] >= cascade.levels[i].points)
                return fail(index, fmt::format("level {} holds point {} of {}", i, coords[i], cascade.levels[i].points));
        const auto it = decode.find(coords);
        if (it == decode.end())
            return fail(index, fmt::format("cascade state ({}) is reachable but has no decoding", fmt::join(coords, ", ")));
        if (it->second != q)
            return fail(index, fmt::format("cascade state ({}) decodes to state {}, the DFA is in state {}",
                                           fmt::join(coords, ", "), state_label(dfa, it->second), state_label(dfa, q)));
        for (Letter a = 0; a < dfa.num_letters(); ++a) {
            const std::string* bad = nullptr;
            indexed.apply(cascade, coords, a, next, [&](std::size_t, const LevelAction& action) {
                if (!malformed_actions.empty() && !bad)
                    if (auto it = malformed_actions.find(&action); it != malformed_actions.end()) bad = &it->second;
            });
            if (bad) {
                auto word = word_to(index);
                word.push_back(a);
                check.counterexample = std::move(word);
                check.message = *bad;
                check.pairs = pairs.size();
                return check;
            }
            std::vector<Point> key{dfa.next(q, a)};
            key.insert(key.end(), next.begin(), next.end());
            if (seen.emplace(key, pairs.size()).second) {
                if (pairs.size() >= pair_limit)
                    throw LimitError(dfa.name, "verify",
                                     fmt::format("more than {} reachable (state, cascade state) pairs", pair_limit));
                pairs.push_back(std::move(key));
                parent.emplace_back(index, a);
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
        // The actions of level d depend on the prefix only: the first state with a prefix records them.
        std::uint32_t node = 0;
        bool fresh = i == 0;
        for (std::size_t d = 0; d < levels; ++d) {
            if (fresh) {
                auto& entry = cascade.levels[d].actions[Coordinates(current.begin(), current.begin() + std::ptrdiff_t(d))];
                entry.resize(letters);
                for (Letter a = 0; a < letters; ++a) entry[a] = acts[a][d];
            }
            if (d + 1 < levels) std::tie(node, fresh) = trie.add_child(d, node, current[d]);
        }
    }
    // Prefixes on which every letter is the identity need no entry.
    for (auto& level : cascade.levels)
        std::erase_if(level.actions, [](const auto& entry) {
            return std::all_of(entry.second.begin(), entry.second.end(),
                               [](const LevelAction& x) { return x.kind == LevelAction::Kind::identity; });
        });
    cascade.start = start;
    cascade.decode.clear();
    cascade.encode.clear();
    for (std::size_t i = 0; i < states.size(); ++i) {
        cascade.decode.emplace(states[i], decoded[i]);
        cascade.encode.try_emplace(decoded[i], states[i]);
    }
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
