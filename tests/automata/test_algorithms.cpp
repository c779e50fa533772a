// DFA algorithms against known answers and against independent oracles written here: brute force
// over all short words, table-filling (pairwise) state equivalence, and a signature-based Moore
// refinement. Every property is also shown to fail on a deliberately broken input.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/error.hpp"

namespace st = statetrack;
using namespace statetrack::automata;

namespace {

Dfa make_table(std::vector<std::string> alphabet, std::vector<bool> accepting, std::vector<State> delta,
               State start = 0) {
    Dfa d = make_dfa(accepting.size(), std::move(alphabet));
    d.accepting = std::move(accepting);
    d.delta = std::move(delta);
    d.start = start;
    validate(d);
    return d;
}

bool same_table(const Dfa& a, const Dfa& b) {
    return a.alphabet == b.alphabet && a.start == b.start && a.accepting == b.accepting && a.delta == b.delta;
}

// Word number `index` of length `length` over k letters (the test's own enumeration).
std::vector<Letter> word_at(std::size_t k, std::size_t length, std::size_t index) {
    std::vector<Letter> w(length);
    for (std::size_t i = length; i-- > 0; index /= k) w[i] = Letter(index % k);
    return w;
}
std::size_t power(std::size_t k, std::size_t e) {
    std::size_t r = 1;
    while (e--) r *= k;
    return r;
}

// Calls check(word) on every word of length 0..max_length; returns the first word where it fails.
template <class Check>
std::optional<std::vector<Letter>> first_failure(std::size_t k, std::size_t max_length, Check check) {
    for (std::size_t len = 0; len <= max_length; ++len)
        for (std::size_t i = 0, count = power(k, len); i < count; ++i) {
            auto w = word_at(k, len, i);
            if (!check(w)) return w;
        }
    return std::nullopt;
}
std::optional<std::vector<Letter>> brute_disagreement(const Dfa& a, const Dfa& b, std::size_t max_length) {
    return first_failure(a.num_letters(), max_length,
                         [&](const std::vector<Letter>& w) { return accepts(a, w) == accepts(b, w); });
}

std::vector<bool> reachable_states(const Dfa& d) {
    std::vector<bool> seen(d.num_states(), false);
    std::vector<State> stack{d.start};
    seen[d.start] = true;
    while (!stack.empty()) {
        State q = stack.back();
        stack.pop_back();
        for (Letter a = 0; a < d.num_letters(); ++a)
            if (!seen[d.next(q, a)]) {
                seen[d.next(q, a)] = true;
                stack.push_back(d.next(q, a));
            }
    }
    return seen;
}

// Table filling: distinct[p n + q] once some word separates p and q. O(n^2 |Sigma|) per pass.
std::vector<char> naive_distinct(const Dfa& d) {
    const std::size_t n = d.num_states();
    std::vector<char> distinct(n * n, 0);
    for (std::size_t p = 0; p < n; ++p)
        for (std::size_t q = 0; q < n; ++q) distinct[p * n + q] = d.accepting[p] != d.accepting[q];
    for (bool changed = true; changed;) {
        changed = false;
        for (std::size_t p = 0; p < n; ++p)
            for (std::size_t q = 0; q < n; ++q) {
                if (distinct[p * n + q]) continue;
                for (Letter a = 0; a < d.num_letters(); ++a)
                    if (distinct[std::size_t(d.next(State(p), a)) * n + d.next(State(q), a)]) {
                        distinct[p * n + q] = 1;
                        changed = true;
                        break;
                    }
            }
    }
    return distinct;
}

// Size of the minimal DFA by the oracle: classes of mutually indistinct reachable states.
std::size_t naive_minimal_size(const Dfa& d) {
    const std::size_t n = d.num_states();
    const auto distinct = naive_distinct(d);
    const auto reach = reachable_states(d);
    std::size_t classes = 0;
    for (std::size_t q = 0; q < n; ++q) {
        if (!reach[q]) continue;
        bool new_class = true;
        for (std::size_t p = 0; p < q && new_class; ++p) new_class = !(reach[p] && !distinct[p * n + q]);
        classes += new_class;
    }
    return classes;
}

// Moore refinement by signatures (own class, classes of successors) until the count is stable.
std::vector<State> moore_classes(const Dfa& d) {
    const std::size_t n = d.num_states(), k = d.num_letters();
    std::vector<State> cls(n);
    for (std::size_t q = 0; q < n; ++q) cls[q] = d.accepting[q] ? 1 : 0;
    std::size_t count = 0;
    for (;;) {
        std::map<std::vector<State>, State> ids;
        std::vector<State> next(n);
        for (std::size_t q = 0; q < n; ++q) {
            std::vector<State> sig{cls[q]};
            for (Letter a = 0; a < k; ++a) sig.push_back(cls[d.next(State(q), a)]);
            next[q] = ids.emplace(sig, State(ids.size())).first->second;
        }
        cls = std::move(next);
        if (ids.size() == count) return cls;
        count = ids.size();
    }
}

// Same language, different table: every state doubled, arcs to either copy, states shuffled.
Dfa scramble(const Dfa& d, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const std::size_t n = d.num_states(), k = d.num_letters();
    std::vector<State> perm(2 * n);
    for (std::size_t i = 0; i < 2 * n; ++i) perm[i] = State(i);
    std::shuffle(perm.begin(), perm.end(), rng);
    Dfa out = make_dfa(2 * n, d.alphabet);
    for (std::size_t copy = 0; copy < 2; ++copy)
        for (std::size_t q = 0; q < n; ++q) {
            const State me = perm[copy * n + q];
            out.accepting[me] = d.accepting[q];
            for (Letter a = 0; a < k; ++a) out.next(me, a) = perm[(rng() % 2) * n + d.next(State(q), a)];
        }
    out.start = perm[(rng() % 2) * n + d.start];
    return out;
}

RandomDfaOptions options_for(std::uint64_t seed) {
    RandomDfaOptions o;
    o.seed = seed;
    o.states = seed <= 200 ? 1 + seed % 12 : 13 + seed % 30;  // mostly tiny, some medium
    o.letters = 1 + seed % 3;
    o.kind = RandomKind(seed % 3);
    o.accepting_probability = seed % 7 == 0 ? 0.1 : 0.5;
    return o;
}

// "The k-th letter from the end is a" over {a, b}, built redundantly: one state per history of at
// most k + 1 letters (a full binary tree that then slides a window of k + 1 letters).
Dfa kth_from_end(std::size_t k) {
    const std::size_t m = k + 1, n = (std::size_t(2) << m) - 1;  // histories of length 0..m
    auto id = [](std::size_t len, std::size_t bits) { return State((std::size_t(1) << len) - 1 + bits); };
    Dfa d = make_dfa(n, {"a", "b"});
    for (std::size_t len = 0; len <= m; ++len)
        for (std::size_t bits = 0; bits < (std::size_t(1) << len); ++bits) {
            // bit 1 = letter a; the newest letter is bit 0.
            d.accepting[id(len, bits)] = len >= k && ((bits >> (k - 1)) & 1);
            for (Letter x = 0; x < 2; ++x) {
                const std::size_t nbits = (bits << 1) | (x == 0 ? 1 : 0);
                d.next(id(len, bits), x) = len < m ? id(len + 1, nbits) : id(m, nbits & ((std::size_t(1) << m) - 1));
            }
        }
    return d;
}

}  // namespace

TEST(Trim, KeepsReachableStatesInBreadthFirstOrder) {
    // 0 -a-> 3, 0 -b-> 2, 3 -> 2, 2 -> 0; state 1 and 4 unreachable.
    Dfa d = make_table({"a", "b"}, {false, true, true, false, true}, {3, 2, 0, 1, 0, 0, 2, 2, 4, 4});
    d.state_names = {"s0", "s1", "s2", "s3", "s4"};
    const Dfa t = trim(d);
    ASSERT_EQ(t.num_states(), 3u);
    EXPECT_EQ(t.start, 0u);
    EXPECT_EQ(t.state_names, (std::vector<std::string>{"s0", "s3", "s2"}));
    EXPECT_EQ(t.delta, (std::vector<State>{1, 2, 2, 2, 0, 0}));
    EXPECT_EQ(t.accepting, (std::vector<bool>{false, false, true}));
    EXPECT_TRUE(equivalent(t, d));
}

TEST(Minimize, ParityWithDuplicatedStatesGivesTheCanonicalTwoStateTable) {
    // even, odd, even', odd': the primed copies are reached on 1 from the other parity.
    const Dfa d = make_table({"0", "1"}, {true, false, true, false}, {0, 3, 1, 2, 2, 1, 3, 0});
    EXPECT_FALSE(is_minimal(d));
    const Dfa m = minimize(d);
    EXPECT_TRUE(same_table(m, make_table({"0", "1"}, {true, false}, {0, 1, 1, 0})));
    EXPECT_TRUE(is_minimal(m));
}

TEST(Minimize, TrivialLanguagesCollapseToOneState) {
    Dfa none = make_table({"a", "b"}, {false, false, false}, {1, 2, 2, 0, 1, 1});
    Dfa all = none;
    all.accepting.assign(3, true);
    for (const Dfa* d : {&none, &all}) {
        const Dfa m = minimize(*d);
        ASSERT_EQ(m.num_states(), 1u);
        EXPECT_EQ(m.delta, (std::vector<State>{0, 0}));
        EXPECT_EQ(m.accepting[0], d->accepting[0]);
    }
}

TEST(Minimize, KthLetterFromTheEndNeedsTwoToTheKStates) {
    // The minimal DFA remembers exactly the last k letters (shorter words behave as if padded
    // with b), and any two different windows are separated by a suffix: 2^k states.
    for (std::size_t k = 1; k <= 8; ++k) {
        const Dfa d = kth_from_end(k);
        const Dfa m = minimize(d);
        EXPECT_EQ(m.num_states(), std::size_t(1) << k) << "k = " << k;
        EXPECT_EQ(naive_minimal_size(d), m.num_states()) << "k = " << k;
        EXPECT_TRUE(is_minimal(m));
        auto wrong = first_failure(2, 9, [&](const std::vector<Letter>& w) {
            const bool truth = w.size() >= k && w[w.size() - k] == 0;
            return accepts(m, w) == truth && accepts(d, w) == truth;
        });
        EXPECT_FALSE(wrong.has_value()) << "k = " << k;
    }
}

TEST(Minimize, RandomDfasAgainstOracles) {
    for (std::uint64_t seed = 1; seed <= 300; ++seed) {
        const Dfa d = random_dfa(options_for(seed));
        const Dfa m = minimize(d);
        SCOPED_TRACE(d.name);
        // Same language: by the product search and by brute force on all words up to length 8.
        EXPECT_FALSE(distinguishing_word(d, m).has_value());
        EXPECT_FALSE(brute_disagreement(d, m, 8).has_value());
        // Minimal: the oracle finds no equivalent pair in m and the same size for d.
        EXPECT_EQ(naive_minimal_size(m), m.num_states());
        EXPECT_EQ(naive_minimal_size(d), m.num_states());
        EXPECT_TRUE(is_minimal(m));
        // Idempotent and canonical: a scrambled, doubled copy minimizes to the identical table.
        EXPECT_TRUE(same_table(minimize(m), m));
        EXPECT_TRUE(same_table(minimize(scramble(d, seed)), m));
        // The classes of all states (unreachable ones too) are the pairwise oracle's.
        const auto classes = language_classes(d);
        const auto distinct = naive_distinct(d);
        const std::size_t n = d.num_states();
        for (std::size_t p = 0; p < n; ++p)
            for (std::size_t q = 0; q < n; ++q)
                ASSERT_EQ(classes.class_of[p] == classes.class_of[q], !distinct[p * n + q]) << p << " " << q;
    }
}

TEST(Minimize, LargeRandomDfaAgreesWithMooreRefinement) {
    for (RandomKind kind : {RandomKind::uniform, RandomKind::mixed, RandomKind::permutation}) {
        RandomDfaOptions o;
        o.states = 20000;
        o.letters = 3;
        o.kind = kind;
        o.seed = 7;
        o.accepting_probability = 0.05;
        const Dfa d = random_dfa(o);
        const auto hopcroft = language_classes(d);
        const auto moore = moore_classes(d);
        // Same partition: the map hopcroft class -> moore class is a bijection.
        std::vector<State> to_moore(hopcroft.num_classes, no_state);
        std::size_t moore_count = 0;
        for (State c : moore) moore_count = std::max<std::size_t>(moore_count, c + 1);
        ASSERT_EQ(hopcroft.num_classes, moore_count) << to_string(kind);
        for (std::size_t q = 0; q < d.num_states(); ++q) {
            State& t = to_moore[hopcroft.class_of[q]];
            if (t == no_state) t = moore[q];
            ASSERT_EQ(t, moore[q]) << to_string(kind) << " state " << q;
        }
        const Dfa m = minimize(d);
        EXPECT_TRUE(is_minimal(m));
        EXPECT_FALSE(distinguishing_word(d, m).has_value());
    }
}

TEST(IsMinimal, FindsUnreachableAndEquivalentStates) {
    const Dfa parity = make_table({"0", "1"}, {true, false}, {0, 1, 1, 0});
    EXPECT_TRUE(is_minimal(parity));
    Dfa unreachable = make_table({"0", "1"}, {true, false, false}, {0, 1, 1, 0, 2, 2});
    EXPECT_FALSE(is_minimal(unreachable));
    EXPECT_EQ(naive_minimal_size(unreachable), 2u);
    const Dfa doubled = scramble(parity, 3);
    EXPECT_FALSE(is_minimal(doubled));
    EXPECT_EQ(naive_minimal_size(doubled), 2u);
}

TEST(DistinguishingWord, IsShortestAndReallyDistinguishes) {
    std::size_t differing = 0;
    for (std::uint64_t seed = 1; seed <= 200; ++seed) {
        RandomDfaOptions o = options_for(seed);
        const Dfa a = random_dfa(o);
        o.seed += 1000;
        o.states = 1 + (seed * 7) % 6;
        const Dfa b = random_dfa(o);
        const auto word = distinguishing_word(a, b);
        const auto brute = brute_disagreement(a, b, 7);
        if (!word) {
            EXPECT_FALSE(brute.has_value()) << seed;
            continue;
        }
        ++differing;
        EXPECT_NE(accepts(a, *word), accepts(b, *word)) << seed;
        if (brute) EXPECT_EQ(word->size(), brute->size()) << seed;
        else EXPECT_GT(word->size(), 7u) << seed;
        // Symmetric in its length.
        EXPECT_EQ(distinguishing_word(b, a)->size(), word->size());
    }
    EXPECT_GT(differing, 150u);  // the sample really exercises the search
}

TEST(DistinguishingWord, FindsASingleFlippedStateDeepInTheAutomaton) {
    for (std::uint64_t seed = 1; seed <= 100; ++seed) {
        const Dfa d = random_dfa(options_for(seed));
        Dfa copy = scramble(d, seed);
        EXPECT_FALSE(distinguishing_word(d, copy).has_value());
        // Flip the state reached last in breadth-first order: the difference needs the longest word.
        const Dfa t = trim(copy);
        Dfa broken = t;
        broken.accepting[t.num_states() - 1].flip();
        const auto word = distinguishing_word(d, broken);
        ASSERT_TRUE(word.has_value()) << seed;
        // Brute force up to that length finds a word too, and none shorter.
        const auto brute = brute_disagreement(d, broken, word->size());
        ASSERT_TRUE(brute.has_value()) << seed;
        EXPECT_EQ(word->size(), brute->size()) << seed;
    }
}

TEST(DistinguishingWord, MatchesLettersByNameAndRefusesOtherAlphabets) {
    const Dfa ab = make_table({"a", "b"}, {true, false}, {1, 0, 0, 1});  // parity of a's
    const Dfa ba = make_table({"b", "a"}, {true, false}, {0, 1, 1, 0});  // the same, letters listed b, a
    EXPECT_FALSE(distinguishing_word(ab, ba).has_value());
    const Dfa ba_b = make_table({"b", "a"}, {true, false}, {1, 0, 0, 1});  // parity of b's
    const auto w = distinguishing_word(ab, ba_b);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->size(), 1u);
    const Dfa ac = make_table({"a", "c"}, {true, false}, {1, 0, 0, 1});
    const Dfa abc = make_table({"a", "b", "c"}, {true}, {0, 0, 0});
    EXPECT_THROW(distinguishing_word(ab, ac), st::InputError);
    EXPECT_THROW(distinguishing_word(ab, abc), st::InputError);
    EXPECT_THROW(distinguishing_word(abc, ab), st::InputError);
    EXPECT_THROW(intersection(ab, ac), st::InputError);
}

TEST(BooleanOperations, AgreeWithBruteForceOnAllWordsUpToLengthSeven) {
    for (std::uint64_t seed = 1; seed <= 120; ++seed) {
        RandomDfaOptions o = options_for(seed);
        const Dfa a = random_dfa(o);
        o.seed += 5000;
        o.kind = RandomKind((seed + 1) % 3);
        const Dfa b = random_dfa(o);
        const Dfa both = intersection(a, b), either = union_of(a, b), minus = difference(a, b), not_a = complement(a);
        for (const Dfa* d : {&both, &either, &minus, &not_a}) validate(*d);
        const auto failure = first_failure(a.num_letters(), 7, [&](const std::vector<Letter>& w) {
            const bool x = accepts(a, w), y = accepts(b, w);
            return accepts(both, w) == (x && y) && accepts(either, w) == (x || y) && accepts(minus, w) == (x && !y) &&
                   accepts(not_a, w) == !x;
        });
        EXPECT_FALSE(failure.has_value()) << seed;
        // Reachable part only: every product state is reached.
        EXPECT_EQ(trim(both).num_states(), both.num_states());
        EXPECT_LE(both.num_states(), a.num_states() * b.num_states());
    }
}

TEST(BooleanOperations, LawsHoldUpToEquivalence) {
    for (std::uint64_t seed = 1; seed <= 60; ++seed) {
        RandomDfaOptions o = options_for(seed);
        const Dfa a = random_dfa(o);
        o.seed += 77;
        const Dfa b = random_dfa(o);
        // De Morgan, and a minus b = a and not b.
        EXPECT_TRUE(equivalent(complement(union_of(a, b)), intersection(complement(a), complement(b))));
        EXPECT_TRUE(equivalent(difference(a, b), intersection(a, complement(b))));
        EXPECT_TRUE(same_table(minimize(intersection(a, b)), minimize(intersection(b, a))));
        EXPECT_EQ(minimize(difference(a, a)).num_states(), 1u);
        EXPECT_FALSE(minimize(difference(a, a)).accepting[0]);
    }
}

TEST(BooleanOperations, BruteForceCheckCatchesAWrongProduct) {
    RandomDfaOptions o = options_for(11);
    const Dfa a = random_dfa(o);
    o.seed = 99;
    const Dfa c = random_dfa(o);
    const Dfa right = intersection(a, c);
    Dfa wrong = right;
    wrong.accepting[0].flip();  // the empty word now gets the wrong answer
    EXPECT_TRUE(brute_disagreement(wrong, right, 0).has_value());
    EXPECT_EQ(distinguishing_word(wrong, right)->size(), 0u);
}

TEST(EnumerateWords, VisitsAllWordsInLexicographicOrder) {
    for (std::size_t k = 1; k <= 3; ++k)
        for (std::size_t len = 0; len <= 5; ++len) {
            std::vector<std::vector<Letter>> seen;
            enumerate_words(k, len, [&](const std::vector<Letter>& w) {
                seen.push_back(w);
                return true;
            });
            ASSERT_EQ(seen.size(), power(k, len));
            for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], word_at(k, len, i));
            EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
        }
    std::size_t calls = 0;
    enumerate_words(2, 10, [&](const std::vector<Letter>&) { return ++calls < 5; });
    EXPECT_EQ(calls, 5u);
    calls = 0;
    enumerate_words(0, 0, [&](const std::vector<Letter>& w) { return ++calls, w.empty(); });
    EXPECT_EQ(calls, 1u);
    enumerate_words(0, 3, [&](const std::vector<Letter>&) { return ++calls, true; });
    EXPECT_EQ(calls, 1u);
}
