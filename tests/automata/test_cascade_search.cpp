// The flat machinery of the cascade searches (cascade_search.hpp): letter classes, action codes,
// the open-addressing index, the prefix tree, the level-by-level search, and that the searches on
// one letter per class still catch a broken action of any letter.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <unordered_map>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/cascade_search.hpp"
#include "statetrack/automata/decompose.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/zoo.hpp"
#include "second_to_last.hpp"

namespace sa = statetrack::automata;
using Kind = sa::LevelAction::Kind;

namespace {

using second_to_last::constant;
sa::LevelAction permutation(std::vector<sa::Point> m) { return {Kind::permutation, std::move(m)}; }

// "The second-to-last letter is a or c" over {a, b, c}, where c acts exactly as a.
sa::Cascade second_to_last_cascade() { return second_to_last::cascade(3); }
sa::Dfa second_to_last_dfa() { return second_to_last::dfa(3); }

// The DFA with every letter twice: letter a + n acts as letter a.
sa::Dfa doubled_letters(const sa::Dfa& dfa) {
    const std::size_t n = dfa.num_letters();
    auto alphabet = dfa.alphabet;
    for (std::size_t a = 0; a < n; ++a) alphabet.push_back(dfa.alphabet[a] + "'");
    sa::Dfa out = sa::make_dfa(dfa.num_states(), alphabet, dfa.name + "+doubled");
    out.start = dfa.start;
    out.accepting = dfa.accepting;
    for (sa::State q = 0; q < dfa.num_states(); ++q)
        for (sa::Letter a = 0; a < 2 * n; ++a) out.next(q, a) = dfa.next(q, a % n);
    return out;
}

// An independent oracle for verify_cascade: breadth-first over (DFA state, full coordinates) with
// the simulator's step and std::set, every letter. The length of a shortest word reaching an
// inconsistent pair, or nothing when every reachable pair is consistent.
std::optional<std::size_t> shortest_failure(const sa::Dfa& dfa, const sa::Cascade& c) {
    using Pair = std::pair<sa::State, sa::Coordinates>;
    std::set<Pair> seen{{dfa.start, c.start}};
    std::deque<std::pair<Pair, std::size_t>> queue{{{dfa.start, c.start}, 0}};
    while (!queue.empty()) {
        const auto [pair, length] = queue.front();
        queue.pop_front();
        const auto it = c.decode.find(pair.second);
        if (it == c.decode.end() || it->second != pair.first) return length;
        for (sa::Letter a = 0; a < dfa.num_letters(); ++a) {
            Pair next{dfa.next(pair.first, a), sa::step(c, pair.second, a)};
            if (seen.insert(next).second) queue.emplace_back(std::move(next), length + 1);
        }
    }
    return std::nullopt;
}

}  // namespace

TEST(Verification, AgreesWithABruteForceOracleOnBrokenCascades) {
    // Random DFAs (and the same with every letter twice, so that letter classes matter), each
    // non-identity action changed in turn (a reset to the next point, a permutation to the
    // identity, or on a doubled alphabet only the copy's action): verify_cascade says ok exactly
    // when the oracle finds no inconsistent pair, and its word is a shortest one.
    std::size_t flips = 0, refuted = 0;
    for (auto kind : {sa::RandomKind::uniform, sa::RandomKind::mixed})
        for (std::size_t states = 3; states <= 6; ++states)
            for (bool doubled : {false, true}) {
                sa::RandomDfaOptions o{.states = states, .letters = 2, .kind = kind, .seed = 4200 + states};
                const auto dfa = doubled ? doubled_letters(sa::random_dfa(o)) : sa::random_dfa(o);
                const auto good = sa::decompose(dfa).cascade;
                ASSERT_FALSE(shortest_failure(dfa, good).has_value()) << o.seed;
                ASSERT_TRUE(sa::verify_cascade(dfa, good).ok) << o.seed;
                for (std::size_t level = 0; level < good.levels.size(); ++level)
                    for (std::size_t e = 0; e < good.levels[level].actions.size() && e < 6; ++e)
                        for (sa::Letter a = doubled ? 2 : 0; a < dfa.num_letters(); ++a) {
                            const auto& act = good.levels[level].actions.entry(e).second[a];
                            if (act.kind == Kind::identity) continue;
                            auto broken = good;
                            const auto key = good.levels[level].actions.key(e);
                            auto& flipped = broken.levels[level].actions[sa::Coordinates(key.begin(), key.end())][a];
                            if (flipped.kind == Kind::constant) flipped.map[0] = (flipped.map[0] + 1) % sa::Point(good.levels[level].points);
                            else flipped = sa::LevelAction{};
                            const auto expected = shortest_failure(dfa, broken);
                            const auto check = sa::verify_cascade(dfa, broken);
                            ++flips;
                            ASSERT_EQ(check.ok, !expected.has_value()) << o.seed << " level " << level << " letter " << a;
                            if (expected) {
                                ++refuted;
                                ASSERT_TRUE(check.counterexample.has_value());
                                EXPECT_EQ(check.counterexample->size(), *expected) << o.seed;
                            }
                        }
            }
    EXPECT_GT(flips, 50U);
    EXPECT_GT(refuted, 0U);
}

TEST(LetterClasses, SmallestLetterRepresentsAndClassesAreInOrder) {
    // Letters 0..5 by value mod 3: classes {0, 3}, {1, 4}, {2, 5}.
    const auto mod3 = sa::letter_classes(6, [](sa::Letter a, sa::Letter b) { return a % 3 == b % 3; });
    EXPECT_EQ(mod3.representative, (std::vector<sa::Letter>{0, 1, 2}));
    EXPECT_EQ(mod3.class_of, (std::vector<sa::Letter>{0, 1, 2, 0, 1, 2}));
    const auto dfa = second_to_last_dfa();
    const auto by_dfa = sa::dfa_letter_classes(dfa);
    EXPECT_EQ(by_dfa.class_of, (std::vector<sa::Letter>{0, 1, 0}));
    EXPECT_EQ(by_dfa.representative, (std::vector<sa::Letter>{0, 1}));
    auto c = second_to_last_cascade();
    EXPECT_EQ(sa::cascade_letter_classes(dfa, c).size(), 2U);
    // One action of c that differs from a's splits the class, though the DFA's columns agree.
    c.levels[1].actions[{1}][2] = constant(0);
    const auto split = sa::cascade_letter_classes(dfa, c);
    EXPECT_EQ(split.class_of, (std::vector<sa::Letter>{0, 1, 2}));
}

TEST(LetterClasses, VerificationCatchesABrokenActionOfADuplicateLetter) {
    const auto dfa = second_to_last_dfa();
    const auto good = sa::verify_cascade(dfa, second_to_last_cascade());
    ASSERT_TRUE(good.ok) << good.message;
    EXPECT_EQ(good.pairs, 4U);
    // Level 1 after a 1 on level 0 and letter c (which acts as a) resets to 0 instead of 1: only
    // words with a c after an a or c reach the bad pair; "a c" is the shortest in search order.
    auto broken = second_to_last_cascade();
    broken.levels[1].actions[{1}][2] = constant(0);
    const auto check = sa::verify_cascade(dfa, broken);
    ASSERT_FALSE(check.ok);
    ASSERT_TRUE(check.counterexample.has_value());
    EXPECT_EQ(*check.counterexample, (std::vector<sa::Letter>{0, 2}));
    EXPECT_NE(sa::run(broken, *check.counterexample), sa::run(second_to_last_cascade(), *check.counterexample));
    // And a malformed action on the duplicate letter only.
    broken = second_to_last_cascade();
    broken.levels[0].actions[{}][2] = permutation({0, 0});
    const auto malformed = sa::verify_cascade(dfa, broken);
    ASSERT_FALSE(malformed.ok);
    EXPECT_EQ(*malformed.counterexample, (std::vector<sa::Letter>{2}));
    EXPECT_NE(malformed.message.find("bijection"), std::string::npos);
}

TEST(LetterClasses, DoubledLettersGiveTheSameCascadePerLetter) {
    // Decomposing with every letter twice must give, for letter a + n, exactly letter a's actions
    // (the construction searches one letter per class and copies), and verify.
    for (auto kind : {sa::RandomKind::uniform, sa::RandomKind::mixed})
        for (std::size_t states = 3; states <= 8; ++states) {
            sa::RandomDfaOptions o{.states = states, .letters = 2, .kind = kind, .seed = 900 + states};
            const auto dfa = sa::random_dfa(o);
            const auto doubled = doubled_letters(dfa);
            const auto single = sa::decompose(dfa).cascade;
            const auto twice = sa::decompose(doubled).cascade;
            ASSERT_EQ(twice.levels.size(), single.levels.size()) << o.seed;
            EXPECT_EQ(twice.decode, single.decode) << o.seed;
            for (std::size_t l = 0; l < single.levels.size(); ++l) {
                ASSERT_EQ(twice.levels[l].actions.size(), single.levels[l].actions.size()) << o.seed;
                for (std::size_t e = 0; e < single.levels[l].actions.size(); ++e) {
                    const auto& one = single.levels[l].actions.entry(e).second;
                    const auto& two = twice.levels[l].actions.entry(e).second;
                    for (sa::Letter a = 0; a < 4; ++a) EXPECT_EQ(two[a], one[a % 2]) << o.seed;
                }
            }
            const auto check = sa::verify_cascade(doubled, twice);
            EXPECT_TRUE(check.ok) << o.seed << ": " << check.message;
            EXPECT_EQ(check.pairs, sa::verify_cascade(dfa, single).pairs);
        }
}

TEST(ActionTable, CodesApplyAsTheActions) {
    sa::ActionTable table(2, 3);
    EXPECT_EQ(table.rows(), 1U);  // row 0: the identity
    EXPECT_EQ(table.row(0)[1], sa::ActionTable::identity);
    const auto id = table.code(sa::LevelAction{});
    const auto reset = table.code(constant(2));
    const auto cycle = table.code(permutation({1, 2, 0}));
    const auto swap = table.code(permutation({1, 0, 2}));
    for (sa::Point p = 0; p < 3; ++p) {
        EXPECT_EQ(table.apply(id, p), p);
        EXPECT_EQ(table.apply(reset, p), 2U);
        EXPECT_EQ(table.apply(cycle, p), (p + 1) % 3);
        EXPECT_EQ(table.apply(swap, p), p == 2 ? 2U : 1 - p);
        EXPECT_FALSE(sa::ActionTable::is_bad(id) || sa::ActionTable::is_bad(reset) || sa::ActionTable::is_bad(cycle));
    }
    EXPECT_TRUE(sa::ActionTable::is_bad(sa::ActionTable::bad_flag | 5));
    const std::vector<std::uint32_t> row{reset, cycle};
    EXPECT_EQ(table.add_row(row), 1U);
    EXPECT_EQ(table.row(1)[1], cycle);
    EXPECT_THROW(table.add_row(std::vector<std::uint32_t>{reset}), std::logic_error);
    EXPECT_THROW(table.code(constant(3)), std::logic_error);               // outside the level
    EXPECT_THROW(table.code(permutation({0, 1})), std::logic_error);       // wrong length
    EXPECT_THROW(table.code(permutation({0, 1, 7})), std::logic_error);    // image outside
}

TEST(KeyIndex, AgreesWithAHashMap) {
    sa::KeyIndex index;
    std::unordered_map<std::uint64_t, std::uint32_t> reference;
    std::mt19937_64 rng(20261122);
    EXPECT_EQ(index.find(0), sa::KeyIndex::absent);
    for (std::uint32_t i = 0; i < 20000; ++i) {
        // Small keys collide often after masking: a mix of both.
        const std::uint64_t key = i % 3 == 0 ? rng() : rng() % 5000;
        const auto [value, fresh] = index.insert(key, i);
        const auto [it, ref_fresh] = reference.try_emplace(key, i);
        EXPECT_EQ(fresh, ref_fresh);
        EXPECT_EQ(value, it->second);
    }
    EXPECT_EQ(index.size(), reference.size());
    for (const auto& [key, value] : reference) EXPECT_EQ(index.find(key), value);
    EXPECT_EQ(index.find(std::uint64_t(1) << 40), sa::KeyIndex::absent);  // above every small key, no random one equals it
    index.clear();
    EXPECT_EQ(index.size(), 0U);
    EXPECT_EQ(index.find(reference.begin()->first), sa::KeyIndex::absent);
    EXPECT_TRUE(index.insert(7, 1).second);
    EXPECT_EQ(index.find(7), 1U);
}

TEST(PrefixTree, LevelsWalksAndFinds) {
    // The reachable prefixes of a real cascade, level by level with the new search, against the
    // cascade's own decode (every reachable state listed) and the simulator.
    const auto dfa = sa::zoo("tomita:3");  // mixed: permutations and resets
    const auto cascade = sa::decompose(dfa).cascade;
    const std::size_t letters = dfa.num_letters(), levels = cascade.levels.size();
    ASSERT_GE(levels, 2U);
    sa::PrefixSearch search;
    sa::PrefixLevel level = sa::root_prefix_level(letters), below;
    sa::PrefixTree tree;
    for (std::size_t i = 0; i < levels; ++i) {
        sa::ActionTable table(letters, cascade.levels[i].points);
        std::vector<std::uint32_t> row_of(level.size(), 0);
        std::vector<std::uint32_t> codes(letters);
        for (std::uint32_t u = 0; u < level.size(); ++u) {
            const auto above = i == 0 ? sa::Coordinates{} : tree.coordinates(i - 1, u);
            if (const auto* list = cascade.levels[i].actions.list(above)) {
                for (sa::Letter a = 0; a < letters; ++a) codes[a] = table.code((*list)[a]);
                row_of[u] = table.add_row(codes);
            }
        }
        sa::next_prefix_level(level, row_of, table, cascade.start[i], 1000000, "t", "test", search, below);
        tree.add_level(below);
        // Transitions agree with the simulator on the prefix.
        for (std::uint32_t v = 0; v < below.size(); ++v)
            for (sa::Letter a = 0; a < letters; ++a) {
                auto from = tree.coordinates(i, v);
                from.resize(levels, 0);
                auto expected = sa::step(cascade, from, a);
                expected.resize(i + 1);
                EXPECT_EQ(tree.coordinates(i, below.next[v * letters + a]), expected);
            }
        std::swap(level, below);
    }
    // The last level is exactly the decoded states, in order, and Finder finds each.
    ASSERT_EQ(level.size(), cascade.decode.size());
    sa::PrefixTree::Finder finder(tree);
    std::uint32_t s = 0;
    for (const auto& [coords, q] : cascade.decode) {
        EXPECT_EQ(tree.coordinates(levels - 1, s), coords);
        EXPECT_EQ(finder.find(coords), s++);
    }
    // The walk visits every level's tuples in lexicographic order, parents first.
    std::vector<std::vector<sa::Coordinates>> seen(levels);
    tree.visit_in_order([&](std::size_t d, std::uint32_t u, std::span<const sa::Point> path) {
        EXPECT_EQ(sa::Coordinates(path.begin(), path.end()), tree.coordinates(d, u));
        EXPECT_EQ(u, seen[d].size());
        if (d > 0) {
            EXPECT_TRUE(!seen[d - 1].empty() && std::equal(path.begin(), path.end() - 1, seen[d - 1].back().begin()));
        }
        seen[d].emplace_back(path.begin(), path.end());
    });
    for (std::size_t d = 0; d < levels; ++d) {
        EXPECT_EQ(seen[d].size(), tree.point[d].size());
        EXPECT_TRUE(std::is_sorted(seen[d].begin(), seen[d].end()));
    }
    // Missing, empty and too long coordinates are not found; a later query still is.
    sa::PrefixTree::Finder again(tree);
    auto missing = cascade.decode.begin()->first;
    missing.back() = sa::Point(cascade.levels.back().points);  // outside the last level
    EXPECT_EQ(again.find(missing), sa::PrefixTree::none);
    EXPECT_EQ(again.find(sa::Coordinates{}), sa::PrefixTree::none);
    EXPECT_EQ(again.find(sa::Coordinates(levels + 1, 0)), sa::PrefixTree::none);
    EXPECT_EQ(again.find(cascade.decode.rbegin()->first), std::uint32_t(cascade.decode.size() - 1));
}

TEST(PrefixSearch, LongChainBackwardsFinishesThroughTheWorklist) {
    // A level above of n tuples and one letter that walks one chain through all of them, each step
    // 64 tuples back (into the previous word of the sweep's flags): every step goes behind the
    // sweep (one sweep per step would cost n^2 / 64 word reads), so the search switches to its
    // worklist. Level below: one point, kept by the identity.
    const std::uint32_t n = 64 * 1600, columns = n / 64;
    std::vector<std::uint32_t> chain(n);  // chain[k]: the k-th tuple of the walk
    for (std::uint32_t k = 0; k < n; ++k) chain[k] = (n - 1) - 64 * (k % columns) - k / columns;
    sa::PrefixLevel above;
    above.parent.assign(n, 0);
    above.point.resize(n);
    above.next.resize(n);
    for (std::uint32_t k = 0; k < n; ++k) {
        above.point[chain[k]] = chain[k];
        above.next[chain[k]] = chain[k + 1 < n ? k + 1 : k];
    }
    above.start = chain[0];
    const sa::ActionTable table(1, 1);
    sa::PrefixSearch search;
    sa::PrefixLevel below;
    sa::next_prefix_level(above, std::vector<std::uint32_t>(n, 0), table, 0, n, "t", "test", search, below);
    ASSERT_EQ(below.size(), n);
    EXPECT_EQ(below.start, n - 1);
    for (std::uint32_t u = 0; u < n; ++u) {
        EXPECT_EQ(below.parent[u], u);
        ASSERT_EQ(below.next[u], above.next[u]);  // one point per tuple: the numbers are the tuples'
    }
    EXPECT_THROW(sa::next_prefix_level(above, std::vector<std::uint32_t>(n, 0), table, 0, n - 1, "t", "test", search, below),
                 statetrack::LimitError);
}

TEST(PrefixSearch, LimitAndMarkedCodes) {
    // second_to_last: two tuples on level 0, four on level 1.
    const auto c = second_to_last_cascade();
    sa::PrefixSearch search;
    sa::ActionTable top(3, 2);
    std::vector<std::uint32_t> codes{top.code(constant(1)), top.code(constant(0)), sa::ActionTable::bad_flag | 9};
    top.add_row(codes);
    sa::PrefixLevel l0;
    sa::next_prefix_level(sa::root_prefix_level(3), std::vector<std::uint32_t>{1}, top, 0, 10, "t", "test", search, l0);
    ASSERT_EQ(l0.size(), 2U);
    EXPECT_EQ(l0.next, (std::vector<std::uint32_t>{1, 0, sa::PrefixLevel::bad_tuple | 9, 1, 0, sa::PrefixLevel::bad_tuple | 9}));
    // A bad step above stays bad below; a bad code below marks its own steps.
    sa::ActionTable second(3, 2);
    codes = {second.code(constant(1)), sa::ActionTable::bad_flag | 4, second.code(constant(1))};
    second.add_row(codes);
    sa::PrefixLevel l1;
    sa::next_prefix_level(l0, std::vector<std::uint32_t>{0, 1}, second, 0, 10, "t", "test", search, l1);
    ASSERT_EQ(l1.size(), 3U);  // (0, 0), (1, 0) and (1, 1); (0, 1) is not reachable
    for (std::uint32_t u = 0; u < l1.size(); ++u) EXPECT_EQ(l1.next[u * 3 + 2], sa::PrefixLevel::bad_tuple | 9);
    EXPECT_EQ(l1.next[1 * 3 + 1], sa::PrefixLevel::bad_tuple | 4);  // tuple (1, 0) on b
    EXPECT_EQ(l1.next[0 * 3 + 1], 0U);                                // (0, 0) on b: the identity row
    EXPECT_THROW(sa::next_prefix_level(l0, std::vector<std::uint32_t>{0, 1}, second, 0, 2, "t", "test", search, l1),
                 statetrack::LimitError);
    // Without transitions: the same tuples, no next.
    sa::PrefixLevel tuples_only;
    sa::next_prefix_level(l0, std::vector<std::uint32_t>{0, 1}, second, 0, 10, "t", "test", search, tuples_only, false);
    sa::next_prefix_level(l0, std::vector<std::uint32_t>{0, 1}, second, 0, 10, "t", "test", search, l1);
    EXPECT_EQ(tuples_only.parent, l1.parent);
    EXPECT_EQ(tuples_only.point, l1.point);
    EXPECT_EQ(tuples_only.start, l1.start);
    EXPECT_TRUE(tuples_only.next.empty());
}
