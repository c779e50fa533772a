// The cascade type: simulator semantics, the all-word verification (and that it catches broken
// cascades with a shortest word), the banned-state construction, the JSON writer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/decompose.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/zoo.hpp"
#include "second_to_last.hpp"

namespace sa = statetrack::automata;
using Kind = sa::LevelAction::Kind;

namespace {

sa::LevelAction constant(sa::Point r) { return {Kind::constant, {r}}; }
sa::LevelAction permutation(std::vector<sa::Point> m) { return {Kind::permutation, std::move(m)}; }

sa::Cascade second_to_last_cascade() { return second_to_last::cascade(2); }
sa::Dfa second_to_last_dfa() { return second_to_last::dfa(2); }

}  // namespace

TEST(Cascade, LevelsReadTheCoordinatesAboveBeforeTheyUpdate) {
    const auto c = second_to_last_cascade();
    // After "a b": level 0 = last letter b (0); level 1 read level 0 before the b, which was a (1).
    const std::vector<sa::Letter> ab = {0, 1};
    EXPECT_EQ(sa::run(c, ab), (sa::Coordinates{0, 1}));
    EXPECT_EQ(sa::step(c, {1, 0}, 1), (sa::Coordinates{0, 1}));
    EXPECT_EQ(sa::step(c, {0, 1}, 0), (sa::Coordinates{1, 0}));
    // Unlisted prefixes act as the identity.
    EXPECT_EQ(sa::level_action(c, 1, std::vector<sa::Point>{7}, 0).kind, Kind::identity);
    EXPECT_EQ(sa::one_hot_size(c), 4U);
    const auto check = sa::verify_cascade(second_to_last_dfa(), c);
    EXPECT_TRUE(check.ok) << check.message;
    EXPECT_EQ(check.pairs, 4U);
}

TEST(Cascade, VerificationFindsTheShortestWordOfABrokenCascade) {
    auto c = second_to_last_cascade();
    // Flip one action: level 1 after a 1 on level 0 and letter b resets to 0 instead of 1.
    c.levels[1].actions[{1}][1] = constant(0);
    const auto check = sa::verify_cascade(second_to_last_dfa(), c);
    ASSERT_FALSE(check.ok);
    ASSERT_TRUE(check.counterexample.has_value());
    EXPECT_EQ(*check.counterexample, (std::vector<sa::Letter>{0, 1}));  // "a b" is the shortest
    EXPECT_NE(check.message.find("decodes to state"), std::string::npos);
    // The literal wiring (level 1 reading level 0 *after* the update) is a different cascade, and
    // the check refutes it too: level 1 would copy the new last letter.
    auto literal = second_to_last_cascade();
    literal.levels[1].actions[{0}] = {constant(1), constant(0)};
    literal.levels[1].actions[{1}] = {constant(1), constant(0)};
    EXPECT_FALSE(sa::verify_cascade(second_to_last_dfa(), literal).ok);
}

TEST(Cascade, VerificationRejectsMalformedAndUndecodedStates) {
    auto c = second_to_last_cascade();
    c.levels[0].actions[{}][1] = permutation({0, 0});  // not a bijection
    auto check = sa::verify_cascade(second_to_last_dfa(), c);
    ASSERT_FALSE(check.ok);
    EXPECT_EQ(*check.counterexample, (std::vector<sa::Letter>{1}));
    EXPECT_NE(check.message.find("bijection"), std::string::npos);

    c = second_to_last_cascade();
    c.decode.erase({1, 1});  // reachable by "a a"
    check = sa::verify_cascade(second_to_last_dfa(), c);
    ASSERT_FALSE(check.ok);
    EXPECT_EQ(*check.counterexample, (std::vector<sa::Letter>{0, 0}));
    EXPECT_NE(check.message.find("no decoding"), std::string::npos);

    c = second_to_last_cascade();
    c.levels[0].actions[{}][0] = constant(5);  // outside the level
    check = sa::verify_cascade(second_to_last_dfa(), c);
    ASSERT_FALSE(check.ok);
    EXPECT_EQ(*check.counterexample, (std::vector<sa::Letter>{0}));

    c = second_to_last_cascade();
    c.start = {0};
    EXPECT_THROW(sa::verify_cascade(second_to_last_dfa(), c), statetrack::InputError);
}

TEST(Cascade, FlippingAnyHolonomyActionIsCaught) {
    // Every non-identity action of a real decomposition matters: changing any one of them (a
    // reset to another point, or a permutation to the identity) must be refuted with a word.
    // (language, non-identity actions): every single flip is refuted, none is harmless.
    const std::vector<std::pair<const char*, std::size_t>> expected = {
        {"tomita:3", 11}, {"first", 4}, {"evenpairs", 4}, {"contains:abb", 10}};
    for (const auto& [spec, actions] : expected) {
        const auto dfa = sa::zoo(spec);
        const auto good = sa::decompose(dfa).cascade;
        ASSERT_TRUE(sa::verify_cascade(dfa, good).ok) << spec;
        std::size_t flipped = 0, caught = 0;
        for (std::size_t level = 0; level < good.levels.size(); ++level)
            for (const auto& [above, acts] : good.levels[level].actions)
                for (sa::Letter a = 0; a < acts.size(); ++a) {
                    if (acts[a].kind == Kind::identity) continue;
                    auto broken = good;
                    auto& act = broken.levels[level].actions[sa::Coordinates(above.begin(), above.end())][a];
                    if (act.kind == Kind::constant) act.map[0] = (act.map[0] + 1) % sa::Point(good.levels[level].points);
                    else act = sa::LevelAction{};
                    ++flipped;
                    const auto check = sa::verify_cascade(dfa, broken);
                    if (!check.ok) {
                        ++caught;
                        // Replaying the word on the broken cascade lands on a state that is not the DFA's.
                        const auto coords = sa::run(broken, *check.counterexample);
                        const auto it = broken.decode.find(coords);
                        EXPECT_TRUE(it == broken.decode.end() || it->second != sa::run(dfa, *check.counterexample) ||
                                    check.message.find("level") == 0)
                            << spec;
                    }
                }
        EXPECT_EQ(flipped, actions) << spec;
        EXPECT_EQ(caught, flipped) << spec;
    }
}

TEST(Banned, LevelSizesAndVerification) {
    for (const char* spec : {"tomita:3", "first", "evenpairs", "contains:abb", "parity", "mod:5", "tomita:5"}) {
        const auto dfa = sa::zoo(spec);
        const auto c = sa::banned_state_cascade(dfa);
        EXPECT_EQ(c.method, "banned");
        const std::size_t m = sa::base_states(dfa).size();
        ASSERT_EQ(c.levels.size(), m - 1) << spec;
        for (std::size_t k = 0; k + 1 < m; ++k) EXPECT_EQ(c.levels[k].points, m - k);
        const auto check = sa::verify_cascade(dfa, c);
        EXPECT_TRUE(check.ok) << spec << ": " << check.message;
    }
    // Through decompose, with the reason left empty (no fallback).
    sa::DecomposeOptions options;
    options.method = sa::DecomposeMethod::banned;
    const auto d = sa::decompose(sa::zoo("first"), options);
    EXPECT_EQ(d.cascade.method, "banned");
    EXPECT_TRUE(d.fallback_reason.empty());
}

TEST(Banned, RandomDfasVerify) {
    for (auto kind : {sa::RandomKind::uniform, sa::RandomKind::permutation, sa::RandomKind::mixed})
        for (std::size_t states = 2; states <= 7; ++states)
            for (std::size_t letters = 2; letters <= 4; ++letters) {
                sa::RandomDfaOptions o{.states = states, .letters = letters, .kind = kind, .seed = 77 + states * 5 + letters};
                const auto dfa = sa::random_dfa(o);
                const auto c = sa::banned_state_cascade(dfa);
                const auto check = sa::verify_cascade(dfa, c);
                EXPECT_TRUE(check.ok) << "seed " << o.seed << ": " << check.message;
            }
}

TEST(Banned, StateLimitIsALimitError) {
    EXPECT_THROW(sa::banned_state_cascade(sa::zoo("contains:abb"), 2), statetrack::LimitError);
}

TEST(Cascade, JsonDocument) {
    const auto dfa = sa::zoo("tomita:3");
    const auto c = sa::decompose(dfa).cascade;
    const auto doc = nlohmann::json::parse(sa::write_cascade_json(c));
    EXPECT_EQ(doc["format"], "statetrack.cascade/1");
    EXPECT_EQ(doc["method"], "holonomy");
    EXPECT_EQ(doc["levels"].size(), c.levels.size());
    EXPECT_EQ(doc["decode"].size(), c.decode.size());
    EXPECT_EQ(doc["one_hot_size"], sa::one_hot_size(c));
    // The actions in the file reproduce the simulator's steps.
    std::size_t listed = 0;
    for (std::size_t i = 0; i < c.levels.size(); ++i) {
        for (const auto& entry : doc["levels"][i]["actions"]) {
            const auto above = entry["above"].get<sa::Coordinates>();
            for (sa::Letter a = 0; a < dfa.num_letters(); ++a) {
                const auto& act = sa::level_action(c, i, above, a);
                const auto& j = entry["letters"][a];
                if (act.kind == Kind::identity) {
                    EXPECT_EQ(j, "identity");
                } else if (act.kind == Kind::constant) {
                    EXPECT_EQ(j["constant"], act.map[0]);
                } else {
                    EXPECT_EQ(j["permutation"].get<std::vector<sa::Point>>(), act.map);
                }
            }
            ++listed;
        }
    }
    EXPECT_GT(listed, 0U);
    // decode, encode, start and groups as written.
    std::size_t k = 0;
    for (const auto& [coords, q] : c.decode) {
        EXPECT_EQ(doc["decode"][k]["coordinates"].get<sa::Coordinates>(), coords);
        EXPECT_EQ(doc["decode"][k++]["state"], q);
    }
    EXPECT_EQ(doc["encode"].size(), c.encode.size());
    for (const auto& e : doc["encode"]) EXPECT_EQ(c.encode.at(e["state"].get<sa::State>()), e["coordinates"].get<sa::Coordinates>());
    EXPECT_EQ(doc["start"].get<sa::Coordinates>(), c.start);
    EXPECT_EQ(doc["alphabet"].get<std::vector<std::string>>(), c.alphabet);
    ASSERT_EQ(doc["levels"][1]["groups"].size(), 2U);  // tomita:3: two C_2 blocks on level 1
    EXPECT_EQ(doc["levels"][1]["groups"][1]["name"], "C_2");
    EXPECT_EQ(doc["levels"][1]["groups"][1]["first"], 2);
    EXPECT_EQ(sa::write_cascade_json(c), sa::write_cascade_json(sa::decompose(dfa).cascade));  // deterministic
}

TEST(PrefixActions, SortedSharedListsAndCopyOnEdit) {
    sa::PrefixActions actions;
    const sa::PrefixActions::List resets = {constant(1), constant(0)};
    const std::uint32_t r = actions.add_list(resets);
    EXPECT_EQ(actions.add_list(resets), r);  // identical lists are stored once
    EXPECT_NE(actions.add_list({constant(0), constant(0)}), r);
    actions.push_back(std::vector<sa::Point>{0, 1}, r);
    actions.push_back(std::vector<sa::Point>{1, 0}, r);
    EXPECT_THROW(actions.push_back(std::vector<sa::Point>{0, 5}, r), std::logic_error);  // out of order
    EXPECT_THROW(actions.push_back(std::vector<sa::Point>{2}, r), std::logic_error);     // wrong length
    ASSERT_EQ(actions.size(), 2U);
    EXPECT_EQ(&actions.entry(0).second, &actions.entry(1).second);
    EXPECT_EQ(actions.find(std::vector<sa::Point>{1, 1}), actions.end());
    EXPECT_EQ(actions.list(std::vector<sa::Point>{0}), nullptr);
    const auto it = actions.find(std::vector<sa::Point>{1, 0});
    ASSERT_NE(it, actions.end());
    EXPECT_EQ(it->second, resets);
    // Editing one prefix's list leaves the prefix that shared it alone; a new prefix goes in order.
    actions[{1, 0}][0] = constant(0);
    EXPECT_EQ(*actions.list(std::vector<sa::Point>{0, 1}), resets);
    EXPECT_EQ((*actions.list(std::vector<sa::Point>{1, 0}))[0], constant(0));
    actions[{0, 2}] = resets;
    std::vector<sa::Coordinates> order;
    for (const auto& [above, acts] : actions) {
        order.emplace_back(above.begin(), above.end());
        EXPECT_EQ(acts.size(), 2U);
    }
    EXPECT_EQ(order, (std::vector<sa::Coordinates>{{0, 1}, {0, 2}, {1, 0}}));
    EXPECT_THROW(actions[{0}], std::logic_error);
}

TEST(PrefixActions, ReachablePrefixesLevelByLevel) {
    // second_to_last: level 0 has tuples (0), (1); level 1 all four (last, second) pairs, numbered
    // in lexicographic order, with the transitions of the cascade's step.
    const auto c = second_to_last_cascade();
    const auto root = sa::root_prefix_level(2);
    std::vector<const std::vector<sa::LevelAction>*> top{c.levels[0].actions.list(std::vector<sa::Point>{})};
    const auto l0 = sa::next_prefix_level(root, top, 0, 2, 2, 100, "t", "test");
    EXPECT_EQ(l0.point, (std::vector<sa::Point>{0, 1}));
    EXPECT_EQ(l0.next, (std::vector<std::uint32_t>{1, 0, 1, 0}));  // a -> (1), b -> (0)
    std::vector<const std::vector<sa::LevelAction>*> lists{c.levels[1].actions.list(std::vector<sa::Point>{0}),
                                                           c.levels[1].actions.list(std::vector<sa::Point>{1})};
    const auto l1 = sa::next_prefix_level(l0, lists, 0, 2, 2, 100, "t", "test");
    ASSERT_EQ(l1.size(), 4U);
    EXPECT_EQ(l1.start, 0U);
    for (std::uint32_t u = 0; u < 4; ++u)
        for (sa::Letter a = 0; a < 2; ++a) {
            const sa::Coordinates from{l1.parent[u], l1.point[u]};
            const std::uint32_t v = l1.next[u * 2 + a];
            EXPECT_EQ((sa::Coordinates{l1.parent[v], l1.point[v]}), sa::step(c, from, a));
        }
    EXPECT_THROW(sa::next_prefix_level(l0, lists, 0, 2, 2, 3, "t", "test"), statetrack::LimitError);
    // A step through a marked action is flagged with the mark instead of applied.
    const std::unordered_map<const sa::LevelAction*, std::uint32_t> bad{{&(*lists[1])[1], 7}};
    const auto marked = sa::next_prefix_level(l0, lists, 0, 2, 2, 100, "t", "test", bad);
    EXPECT_EQ(marked.next[2 * 2 + 1], sa::PrefixLevel::bad_tuple | 7U);  // tuple (1, 0) on b
}
