// The holonomy decomposition: skeleton (orbit, classes, levels, tiles, groups), known answers,
// and the all-word verification of every decomposition built here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/decompose.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/holonomy.hpp"
#include "statetrack/automata/monoid.hpp"
#include "statetrack/automata/zoo.hpp"

namespace sa = statetrack::automata;

namespace {

// A DFA from a table: rows[q][a] is the target; state 0 starts.
sa::Dfa table(std::vector<std::string> alphabet, const std::vector<std::vector<sa::State>>& rows,
              const std::vector<sa::State>& accepting, std::string name = "test") {
    sa::Dfa dfa = sa::make_dfa(rows.size(), std::move(alphabet), std::move(name));
    for (sa::State q = 0; q < rows.size(); ++q)
        for (sa::Letter a = 0; a < rows[q].size(); ++a) dfa.next(q, a) = rows[q][a];
    for (sa::State q : accepting) dfa.accepting[q] = true;
    sa::validate(dfa);
    return dfa;
}

// The full transformation monoid T3: a 3-cycle, a transposition and the map 0,1,2 -> 0,0,2.
sa::Dfa full_t3() { return table({"c", "t", "r"}, {{1, 1, 0}, {2, 0, 0}, {0, 2, 2}}, {0}, "T3"); }
sa::Dfa counter(std::size_t k) {  // number of 1s mod k
    std::vector<std::vector<sa::State>> rows(k);
    for (sa::State q = 0; q < k; ++q) rows[q] = {q, sa::State((q + 1) % k)};
    return table({"0", "1"}, rows, {0}, "mod");
}
sa::Dfa first() { return table({"a", "b"}, {{1, 2}, {1, 1}, {2, 2}}, {1}, "first"); }
sa::Dfa evenpairs() {
    return table({"a", "b"}, {{1, 4}, {1, 2}, {1, 2}, {3, 4}, {3, 4}}, {0, 1, 4}, "evenpairs");
}
sa::Dfa contains_abb() { return table({"a", "b"}, {{1, 0}, {1, 2}, {1, 3}, {3, 3}}, {3}, "contains:abb"); }
sa::Dfa tomita3() {
    return table({"0", "1"}, {{0, 1}, {2, 0}, {3, 4}, {2, 1}, {4, 4}}, {0, 1, 3}, "tomita:3");
}

std::vector<std::size_t> level_points(const sa::Cascade& c) {
    std::vector<std::size_t> out;
    for (const auto& l : c.levels) out.push_back(l.points);
    return out;
}
std::vector<std::size_t> all_group_orders(const sa::Cascade& c) {
    std::vector<std::size_t> out;
    for (const auto& l : c.levels)
        for (const auto& g : l.groups) out.push_back(g.order);
    std::sort(out.begin(), out.end());
    return out;
}

void expect_verified(const sa::Dfa& dfa, const sa::Cascade& cascade) {
    const auto check = sa::verify_cascade(dfa, cascade);
    EXPECT_TRUE(check.ok) << dfa.name << " (" << cascade.method << "): " << check.message;
}

std::vector<sa::Point> cycle(std::size_t n) {
    std::vector<sa::Point> g(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = sa::Point((i + 1) % n);
    return g;
}
std::vector<sa::Point> swap01(std::size_t n) {
    std::vector<sa::Point> g(n);
    std::iota(g.begin(), g.end(), sa::Point(0));
    std::swap(g[0], g[1]);
    return g;
}

}  // namespace

TEST(PermutationGroups, OrdersBySchreierSims) {
    for (std::size_t n = 2; n <= 9; ++n) {
        std::size_t factorial = 1;
        for (std::size_t i = 2; i <= n; ++i) factorial *= i;
        EXPECT_EQ(sa::group_order({cycle(n), swap01(n)}, n), factorial) << n;
        EXPECT_EQ(sa::group_order({cycle(n)}, n), n);
    }
    // A_5 from the 3-cycles (0 1 2) and (2 3 4); the trivial group; a direct product C2 x C3.
    EXPECT_EQ(sa::group_order({{1, 2, 0, 3, 4}, {0, 1, 3, 4, 2}}, 5), 60U);
    EXPECT_EQ(sa::group_order({}, 4), 1U);
    EXPECT_EQ(sa::group_order({{1, 0, 3, 4, 2}}, 5), 6U);
    EXPECT_EQ(sa::group_order({{1, 0, 2, 3, 4}, {0, 1, 3, 4, 2}}, 5), 6U);
}

TEST(PermutationGroups, Names) {
    EXPECT_EQ(sa::group_name({cycle(2)}, 2), "C_2");
    EXPECT_EQ(sa::group_name({cycle(5)}, 5), "C_5");
    EXPECT_EQ(sa::group_name({{1, 0, 3, 4, 2}}, 5), "C_6");
    EXPECT_EQ(sa::group_name({{1, 2, 0, 3}, {0, 2, 3, 1}}, 4), "A_4");
    EXPECT_EQ(sa::group_name({cycle(3), swap01(3)}, 3), "S_3");
    EXPECT_EQ(sa::group_name({cycle(7), swap01(7)}, 7), "S_7");
    EXPECT_EQ(sa::group_name({{1, 2, 0, 3, 4}, {0, 1, 3, 4, 2}}, 5), "A_5");
    EXPECT_EQ(sa::group_name({cycle(4), {0, 3, 2, 1}}, 4), "D_4");
    EXPECT_EQ(sa::group_name({cycle(5), {0, 4, 3, 2, 1}}, 5), "D_5");
    EXPECT_EQ(sa::group_name({{1, 0, 3, 2}, {2, 3, 0, 1}}, 4), "C_2 x C_2");
}

TEST(Holonomy, FullTransformationMonoidT3MatchesSgpDec) {
    const auto dfa = full_t3();
    const auto sk = sa::holonomy_skeleton(dfa);
    // Orbit: the base set, the three 2-sets, the three singletons.
    EXPECT_EQ(sk.sizes.size(), 7U);
    ASSERT_EQ(sk.levels, 2U);
    EXPECT_EQ(sk.level_points, (std::vector<std::size_t>{3, 2}));
    const auto cascade = sa::holonomy_cascade(dfa, sk);
    EXPECT_EQ(level_points(cascade), (std::vector<std::size_t>{3, 2}));
    ASSERT_EQ(cascade.levels[0].groups.size(), 1U);
    EXPECT_EQ(cascade.levels[0].groups[0].order, 6U);
    EXPECT_EQ(cascade.levels[0].groups[0].name, "S_3");
    ASSERT_EQ(cascade.levels[1].groups.size(), 1U);
    EXPECT_EQ(cascade.levels[1].groups[0].order, 2U);
    EXPECT_EQ(cascade.levels[1].groups[0].name, "C_2");
    expect_verified(dfa, cascade);
    // Every DFA state has coordinates, and they decode back to it.
    ASSERT_EQ(cascade.encode.size(), 3U);
    for (const auto& [q, coords] : cascade.encode) EXPECT_EQ(cascade.decode.at(coords), q);
}

TEST(Holonomy, SkeletonTilesAndClasses) {
    const auto sk = sa::holonomy_skeleton(first());
    // Orbit of {0,1,2}: itself, {1,2}, and the singletons; four classes ({0}, {1}, {2} apart).
    EXPECT_EQ(sk.sizes.size(), 5U);
    EXPECT_EQ(sk.classes.size(), 5U);
    const auto& top = sk.classes[sk.class_of[sk.top]];
    std::vector<std::vector<sa::State>> tiles;
    for (auto t : top.tiles) tiles.push_back(sk.elements(t));
    std::sort(tiles.begin(), tiles.end());
    EXPECT_EQ(tiles, (std::vector<std::vector<sa::State>>{{0}, {1, 2}}));
    EXPECT_EQ(top.level, 0U);
    EXPECT_EQ(top.height, 2U);
}

TEST(Holonomy, GroupAutomataAreOneLevel) {
    for (std::size_t k : {2, 3, 5, 7, 12}) {
        const auto dfa = counter(k);
        const auto d = sa::decompose(dfa);
        EXPECT_EQ(d.cascade.method, "single");
        ASSERT_EQ(d.cascade.levels.size(), 1U);
        EXPECT_EQ(d.cascade.levels[0].points, k);
        EXPECT_EQ(all_group_orders(d.cascade), (std::vector<std::size_t>{k}));
        EXPECT_EQ(d.cascade.levels[0].groups[0].name, "C_" + std::to_string(k));
        expect_verified(dfa, d.cascade);
        // The general holonomy construction agrees: one level, the same group.
        const auto h = sa::holonomy_cascade(dfa, sa::holonomy_skeleton(dfa));
        EXPECT_EQ(level_points(h), (std::vector<std::size_t>{k}));
        EXPECT_EQ(all_group_orders(h), (std::vector<std::size_t>{k}));
        expect_verified(dfa, h);
    }
}

TEST(Holonomy, KnownAnswers) {
    const auto f = sa::decompose(first()).cascade;
    EXPECT_EQ(f.method, "holonomy");
    EXPECT_EQ(level_points(f), (std::vector<std::size_t>{2, 2}));
    EXPECT_TRUE(all_group_orders(f).empty());
    expect_verified(first(), f);

    const auto e = sa::decompose(evenpairs()).cascade;
    EXPECT_EQ(level_points(e), (std::vector<std::size_t>{3, 2}));
    EXPECT_TRUE(all_group_orders(e).empty());
    expect_verified(evenpairs(), e);

    // SgpDec's depths give 4 levels here, not 3: Q > {0,2,3} (tile) > {0,3} (tile) > {1,3} (the
    // image of {0,3} under a, in another class), and an image in another class must sit lower
    // (docs/cascades.md, "Known answers").
    const auto c = sa::decompose(contains_abb()).cascade;
    EXPECT_EQ(level_points(c), (std::vector<std::size_t>{2, 2, 2, 2}));
    EXPECT_TRUE(all_group_orders(c).empty());
    expect_verified(contains_abb(), c);

    // Tomita 3 is mixed: C2 groups (odd/even runs) and resets.
    const auto t = sa::decompose(tomita3()).cascade;
    EXPECT_EQ(t.method, "holonomy");
    const auto orders = all_group_orders(t);
    ASSERT_FALSE(orders.empty());
    EXPECT_TRUE(std::all_of(orders.begin(), orders.end(), [](std::size_t o) { return o == 2; }));
    bool has_reset = false;
    for (const auto& level : t.levels)
        for (const auto& [above, acts] : level.actions)
            for (const auto& a : acts) has_reset = has_reset || a.kind == sa::LevelAction::Kind::constant;
    EXPECT_TRUE(has_reset);
    expect_verified(tomita3(), t);
}

TEST(Holonomy, AperiodicDfasGetResetOnlyLevels) {
    for (const auto& dfa : {first(), evenpairs(), contains_abb()}) {
        const auto c = sa::decompose(dfa).cascade;
        for (const auto& level : c.levels)
            for (const auto& [above, acts] : level.actions)
                for (const auto& a : acts) EXPECT_NE(a.kind, sa::LevelAction::Kind::permutation) << dfa.name;
    }
}

TEST(Holonomy, UnreachableStatesAddNothing) {
    // contains:abb plus two unreachable states that form a C2: the decomposition ignores them.
    auto dfa = table({"a", "b"}, {{1, 0}, {1, 2}, {1, 3}, {3, 3}, {5, 4}, {4, 5}}, {3});
    const auto c = sa::decompose(dfa).cascade;
    EXPECT_EQ(level_points(c), (std::vector<std::size_t>{2, 2, 2, 2}));
    EXPECT_TRUE(all_group_orders(c).empty());
    expect_verified(dfa, c);
}

TEST(Holonomy, OneStateDfaHasNoLevels) {
    const auto dfa = table({"a"}, {{0}}, {0});
    const auto c = sa::decompose(dfa).cascade;
    EXPECT_TRUE(c.levels.empty());
    EXPECT_EQ(c.decode.size(), 1U);
    expect_verified(dfa, c);
    const auto b = sa::banned_state_cascade(dfa);
    EXPECT_TRUE(b.levels.empty());
    expect_verified(dfa, b);
}

TEST(Holonomy, OrbitLimitFallsBackToBanned) {
    sa::DecomposeOptions options;
    options.orbit_limit = 4;  // T3's orbit has 7 sets
    std::vector<std::string> messages;
    options.progress = [&](const std::string& m) { messages.push_back(m); };
    const auto d = sa::decompose(full_t3(), options);
    EXPECT_EQ(d.cascade.method, "banned");
    EXPECT_NE(d.fallback_reason.find("limit of 4"), std::string::npos);
    EXPECT_FALSE(messages.empty());
    expect_verified(full_t3(), d.cascade);
    EXPECT_THROW(sa::holonomy_skeleton(full_t3(), 4), statetrack::LimitError);
}

TEST(Holonomy, RandomDfasVerifyAndGroupsDivideTheMonoid) {
    // Every kind of the generator, 2..10 states, 2..4 letters, fixed seeds.
    std::size_t checked = 0;
    for (auto kind : {sa::RandomKind::uniform, sa::RandomKind::permutation, sa::RandomKind::mixed})
        for (std::size_t states = 2; states <= 10; ++states)
            for (std::size_t letters = 2; letters <= 4; ++letters)
                for (std::uint64_t seed = 1; seed <= 1; ++seed) {
                    sa::RandomDfaOptions o;
                    o.states = states;
                    o.letters = letters;
                    o.kind = kind;
                    o.seed = seed * 1000 + states * 10 + letters;
                    const auto dfa = sa::random_dfa(o);
                    const auto d = sa::decompose(dfa);
                    const auto check = sa::verify_cascade(dfa, d.cascade);
                    ASSERT_TRUE(check.ok) << "seed " << o.seed << ": " << check.message;
                    if (kind == sa::RandomKind::permutation) {
                        EXPECT_EQ(d.cascade.method, "single");
                    }
                    // A holonomy group divides the monoid, so its order divides a maximal subgroup's.
                    const auto monoid = sa::summarize_monoid(dfa, 20000);
                    if (monoid.size) {
                        for (std::size_t order : all_group_orders(d.cascade)) {
                            EXPECT_TRUE(std::any_of(monoid.group_orders.begin(), monoid.group_orders.end(),
                                                    [&](std::size_t g) { return g % order == 0; }))
                                << "seed " << o.seed << ": group of order " << order;
                        }
                    }
                    ++checked;
                }
    EXPECT_EQ(checked, 3U * 9 * 3);
}

TEST(Holonomy, ZooGroupLanguagesAreOneLevelWithTheRightGroup) {
    struct Case {
        const char* spec;
        std::size_t order;
        const char* name;
    };
    for (const Case& k : {Case{"parity", 2, "C_2"}, Case{"mod:3", 3, "C_3"}, Case{"mod:7", 7, "C_7"},
                          Case{"cyclenav:5", 5, "C_5"}, Case{"sym:4", 24, "S_4"}, Case{"sym:5", 120, "S_5"},
                          Case{"symreg:3", 6, "S_3"}, Case{"symreg:4", 24, "S_4"}, Case{"symreg:5", 120, "S_5"},
                          Case{"altreg:5", 60, "A_5"}}) {
        const auto dfa = sa::zoo(k.spec);
        const auto d = sa::decompose(dfa);
        EXPECT_EQ(d.cascade.method, "single") << k.spec;
        ASSERT_EQ(d.cascade.levels.size(), 1U) << k.spec;
        EXPECT_EQ(d.cascade.levels[0].points, sa::base_states(dfa).size());
        ASSERT_EQ(d.cascade.levels[0].groups.size(), 1U) << k.spec;
        EXPECT_EQ(d.cascade.levels[0].groups[0].order, k.order) << k.spec;
        EXPECT_EQ(d.cascade.levels[0].groups[0].name, k.name) << k.spec;
        expect_verified(dfa, d.cascade);
    }
    // The zoo's own definitions give the same answers as the hand-built tables above.
    EXPECT_EQ(level_points(sa::decompose(sa::zoo("first")).cascade), (std::vector<std::size_t>{2, 2}));
    EXPECT_EQ(level_points(sa::decompose(sa::zoo("evenpairs")).cascade), (std::vector<std::size_t>{3, 2}));
    EXPECT_EQ(level_points(sa::decompose(sa::zoo("contains:abb")).cascade), (std::vector<std::size_t>{2, 2, 2, 2}));
    const auto t3 = sa::decompose(sa::zoo("tomita:3")).cascade;
    EXPECT_EQ(level_points(t3), level_points(sa::decompose(tomita3()).cascade));
}

TEST(Holonomy, EveryMlregtestDfaVerifies) {
    // The whole corpus: every decomposition is checked for all words; aperiodic files get no
    // groups; Reg files get C_2 only, Zp.k files C_k only (k = 2, 3, 5). Every file, including the
    // 12 SP.6.1.{6..9} files whose cascades have 44k-181k reachable states.
    namespace fs = std::filesystem;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(fs::path(STATETRACK_TEST_DATA) / "mlregtest" / "att"))
        if (entry.path().extension() == ".att") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    ASSERT_EQ(files.size(), 1470U);
    std::size_t with_groups = 0, large = 0;
    for (const auto& path : files) {
        const std::string name = path.filename().string();
        const auto dfa = sa::load_dfa(path.string());
        const auto d = sa::decompose(dfa);
        if (d.cascade.decode.size() > 20000) {
            ++large;
            EXPECT_NE(name.find(".SP.6.1."), std::string::npos) << name << " has an unexpectedly large cascade";
        }
        ASSERT_EQ(d.cascade.method == "holonomy" || d.cascade.method == "single", true) << name;
        const auto check = sa::verify_cascade(dfa, d.cascade);
        ASSERT_TRUE(check.ok) << name << ": " << check.message;
        const auto orders = all_group_orders(d.cascade);
        with_groups += !orders.empty();
        if (name.find(".Reg.") != std::string::npos) {
            EXPECT_FALSE(orders.empty()) << name;
            for (std::size_t o : orders) EXPECT_EQ(o, 2U) << name;
        } else if (name.find(".Zp.") != std::string::npos) {
            const std::size_t k = std::size_t(name[name.find(".Zp.") + 4] - '0');
            EXPECT_FALSE(orders.empty()) << name;
            for (std::size_t o : orders) EXPECT_EQ(o, k) << name;
        } else {
            EXPECT_TRUE(orders.empty()) << name << " should be aperiodic";
        }
    }
    EXPECT_EQ(with_groups, 60U);  // 30 Reg + 30 Zp files
    EXPECT_EQ(large, 12U);  // SP.6.1.{6,7,8,9} for 4, 16 and 64 letters
}
