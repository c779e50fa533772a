// Transition monoids: sizes and classes of known monoids, and a naive independent recomputation
// (std::set closure, powers, Green's relations by ideals) on random small DFAs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/monoid.hpp"
#include "statetrack/automata/zoo.hpp"

namespace statetrack::automata {
namespace {

// A local generator (the shared random_dfa is another module's work): the first `permutations`
// letters are random permutations, the others uniform random maps.
Dfa local_random_dfa(std::size_t states, std::size_t letters, std::uint64_t seed, std::size_t permutations = 0) {
    std::mt19937_64 rng(seed);
    std::vector<std::string> alphabet;
    for (std::size_t a = 0; a < letters; ++a) alphabet.push_back(std::string(1, char('a' + a)));
    Dfa dfa = make_dfa(states, alphabet, "random");
    for (Letter a = 0; a < letters; ++a) {
        std::vector<State> map(states);
        std::iota(map.begin(), map.end(), State(0));
        if (a < permutations) std::shuffle(map.begin(), map.end(), rng);
        else
            for (auto& t : map) t = State(rng() % states);
        for (State q = 0; q < states; ++q) dfa.next(q, a) = map[q];
    }
    for (std::size_t q = 0; q < states; ++q) dfa.accepting[q] = rng() % 2 == 0;
    return dfa;
}

// A DFA whose letters are the given transformations.
Dfa from_maps(const std::vector<Transformation>& maps) {
    std::vector<std::string> alphabet;
    for (std::size_t a = 0; a < maps.size(); ++a) alphabet.push_back(std::string(1, char('a' + a)));
    Dfa dfa = make_dfa(maps[0].size(), alphabet, "maps");
    for (std::size_t a = 0; a < maps.size(); ++a)
        for (std::size_t q = 0; q < maps[a].size(); ++q) dfa.next(State(q), Letter(a)) = maps[a][q];
    return dfa;
}

Transformation compose(const Transformation& x, const Transformation& y) {  // first x, then y
    Transformation z(x.size());
    for (std::size_t q = 0; q < x.size(); ++q) z[q] = y[x[q]];
    return z;
}

Transformation act(const Dfa& dfa, const std::vector<Letter>& word) {
    Transformation t(dfa.num_states());
    for (std::size_t q = 0; q < t.size(); ++q) t[q] = run(dfa, word, State(q));
    return t;
}

// x^n x != x^n, with n >= the index of x: x generates a non-trivial group.
bool has_nontrivial_period(const Transformation& x) {
    Transformation power = x;
    for (std::size_t k = 1; k < x.size(); ++k) power = compose(power, x);
    return compose(power, x) != power;
}

// Naive closure: breadth-first levels with std::set; returns element -> BFS depth.
std::map<Transformation, std::size_t> naive_monoid(const Dfa& dfa) {
    Transformation id(dfa.num_states());
    for (std::size_t q = 0; q < id.size(); ++q) id[q] = State(q);
    std::map<Transformation, std::size_t> depth = {{id, 0}};
    std::vector<Transformation> frontier = {id};
    for (std::size_t d = 1; !frontier.empty(); ++d) {
        std::vector<Transformation> next;
        for (const auto& x : frontier)
            for (Letter a = 0; a < dfa.num_letters(); ++a) {
                auto y = compose(x, act(dfa, {a}));
                if (depth.emplace(y, d).second) next.push_back(y);
            }
        frontier.swap(next);
    }
    return depth;
}

bool naive_aperiodic(const std::map<Transformation, std::size_t>& monoid) {
    for (const auto& [x, d] : monoid) {
        std::vector<Transformation> powers = {x};
        while (true) {
            auto next = compose(powers.back(), x);
            if (next == powers.back()) break;  // x^k = x^(k+1)
            if (std::find(powers.begin(), powers.end(), next) != powers.end()) return false;  // a cycle of length > 1
            powers.push_back(next);
        }
    }
    return true;
}

// Orders of the non-trivial H-classes of idempotents, by Green's relations on principal ideals.
std::vector<std::size_t> naive_group_orders(const std::map<Transformation, std::size_t>& monoid) {
    std::vector<Transformation> m;
    for (const auto& [x, d] : monoid) m.push_back(x);
    auto right_ideal = [&](const Transformation& x) {
        std::set<Transformation> s;
        for (const auto& y : m) s.insert(compose(x, y));
        return s;
    };
    auto left_ideal = [&](const Transformation& x) {
        std::set<Transformation> s;
        for (const auto& y : m) s.insert(compose(y, x));
        return s;
    };
    std::set<std::size_t> orders;
    for (const auto& e : m) {
        if (compose(e, e) != e) continue;
        const auto re = right_ideal(e), le = left_ideal(e);
        std::size_t count = 0;
        for (const auto& x : m) count += right_ideal(x) == re && left_ideal(x) == le;
        if (count > 1) orders.insert(count);
    }
    return {orders.begin(), orders.end()};
}

TEST(Monoid, FullTransformationMonoidT3) {
    // (0 1), (0 1 2) and a rank-2 map generate T_3: 27 elements; maximal subgroups S3, S2, 1.
    const Dfa t3 = from_maps({{1, 0, 2}, {1, 2, 0}, {0, 0, 2}});
    const auto s = summarize_monoid(t3);
    ASSERT_TRUE(s.size.has_value());
    EXPECT_EQ(*s.size, 27u);
    EXPECT_EQ(s.classification, MonoidClass::mixed);
    EXPECT_EQ(s.group_orders, (std::vector<std::size_t>{2, 6}));
    // The shortest word with a non-trivial period is a single letter (the transposition).
    EXPECT_EQ(s.witness, (std::vector<Letter>{0}));
    EXPECT_EQ(s.witness_period, 2u);
}

TEST(Monoid, FullTransformationMonoidT4HasFourToTheFour) {
    const Dfa t4 = from_maps({{1, 0, 2, 3}, {1, 2, 3, 0}, {0, 0, 2, 3}});
    const auto s = summarize_monoid(t4);
    ASSERT_TRUE(s.size.has_value());
    EXPECT_EQ(*s.size, 256u);
    EXPECT_EQ(s.group_orders, (std::vector<std::size_t>{2, 6, 24}));
}

TEST(Monoid, TrivialMonoidIsAperiodic) {
    const auto s = summarize_monoid(from_maps({{0, 1, 2}}));
    EXPECT_EQ(s.size, std::optional<std::size_t>(1));
    EXPECT_EQ(s.classification, MonoidClass::aperiodic);
    EXPECT_TRUE(s.group_orders.empty());
    EXPECT_TRUE(s.witness.empty());
}

TEST(Monoid, CyclicGroupOfOrderSix) {
    // One letter acting as a 2-cycle and a 3-cycle on disjoint points: Z6.
    const auto s = summarize_monoid(from_maps({{1, 0, 3, 4, 2}}));
    EXPECT_EQ(s.size, std::optional<std::size_t>(6));
    EXPECT_EQ(s.classification, MonoidClass::group);
    EXPECT_EQ(s.group_orders, (std::vector<std::size_t>{6}));
    EXPECT_EQ(s.witness_period, 6u);
}

TEST(Monoid, HiddenGroupInsideAnAperiodicLookingDfa) {
    // No letter is a permutation and neither letter has a cycle (a: 0->1->2 fixed, b: 2->0, 0 and 1
    // fixed), yet ab swaps 0 and 1: the class must be mixed, with the witness ab.
    const Dfa dfa = from_maps({{1, 2, 2}, {0, 1, 0}});
    const auto s = summarize_monoid(dfa);
    EXPECT_EQ(s.classification, MonoidClass::mixed);
    EXPECT_EQ(s.witness, (std::vector<Letter>{0, 1}));
    EXPECT_EQ(s.witness_period, 2u);
    EXPECT_EQ(s.group_orders, (std::vector<std::size_t>{2}));
    EXPECT_TRUE(has_nontrivial_period(act(dfa, s.witness)));
    // Without b the monoid {1, a, aa} is aperiodic.
    EXPECT_EQ(summarize_monoid(from_maps({{1, 2, 2}})).classification, MonoidClass::aperiodic);
}

TEST(Monoid, AgreesWithNaiveComputationOnRandomDfas) {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        const Dfa dfa = local_random_dfa(2 + seed % 4, 1 + seed % 3, seed);
        const auto naive = naive_monoid(dfa);
        if (naive.size() > 300) continue;  // keep the quadratic Green's relations cheap
        const auto m = transition_monoid(dfa);
        ASSERT_TRUE(m.complete);
        ASSERT_EQ(m.elements.size(), naive.size()) << "seed " << seed;
        EXPECT_EQ(m.elements[0], act(dfa, {}));
        for (std::size_t i = 0; i < m.elements.size(); ++i) {
            EXPECT_EQ(act(dfa, m.words[i]), m.elements[i]) << "seed " << seed;
            EXPECT_EQ(m.words[i].size(), naive.at(m.elements[i])) << "the word is not shortest, seed " << seed;
        }
        const auto s = summarize_monoid(dfa);
        EXPECT_EQ(s.size, std::optional<std::size_t>(naive.size()));
        EXPECT_EQ(s.classification == MonoidClass::aperiodic, naive_aperiodic(naive)) << "seed " << seed;
        EXPECT_EQ(s.group_orders, naive_group_orders(naive)) << "seed " << seed;
    }
}

TEST(Monoid, LimitIsExact) {
    const Dfa s4 = zoo("sym:4");
    EXPECT_TRUE(transition_monoid(s4, 24).complete);
    const auto cut = transition_monoid(s4, 23);
    EXPECT_FALSE(cut.complete);
    EXPECT_EQ(cut.elements.size(), 23u);
    const auto s = summarize_monoid(s4, 23);
    EXPECT_FALSE(s.size.has_value());
    EXPECT_EQ(s.classification, MonoidClass::group);
    EXPECT_NE(s.message.find("over the limit of 23 elements"), std::string::npos) << s.message;
}

TEST(Monoid, OverTheLimitAperiodicIsUndecided) {
    // contains:abbab has an aperiodic monoid bigger than 5 elements: nothing proves a class.
    const auto s = summarize_monoid(zoo("contains:abbab"), 5);
    EXPECT_FALSE(s.size.has_value());
    EXPECT_FALSE(s.classification.has_value());
    EXPECT_NE(s.message.find("undecided"), std::string::npos) << s.message;
}

TEST(Monoid, RandomNineStateDfaIsOverTheDefaultLimit) {
    // Two random permutations and one random map on 9 states generate a large part of T_9 (9^9,
    // about 3.9e8 elements). (Three uniform random maps generate far less: 2e3 to 5e5 measured.)
    for (std::uint64_t seed : {7u, 8u}) {
        const Dfa dfa = local_random_dfa(9, 3, seed, 2);
        const auto s = summarize_monoid(dfa);
        EXPECT_FALSE(s.size.has_value());
        EXPECT_EQ(s.elements_seen, default_monoid_limit);
        EXPECT_NE(s.message.find("over the limit of 1000000 elements"), std::string::npos) << s.message;
        // Its classification, when given, comes with a witness that really has a non-trivial period.
        EXPECT_EQ(s.classification, MonoidClass::mixed);
        EXPECT_TRUE(has_nontrivial_period(act(dfa, s.witness)));
    }
}

TEST(Monoid, MemoryBudgetBoundsHugeDfas) {
    // A cycle on 100000 states: the group Z_100000 does not fit the budget, so it is cut off.
    const std::size_t n = 100000;
    Transformation cycle(n);
    for (std::size_t q = 0; q < n; ++q) cycle[q] = State((q + 1) % n);
    const std::size_t limit = monoid_element_limit(n);
    ASSERT_LT(limit, n);
    const auto s = summarize_monoid(from_maps({cycle}));
    EXPECT_FALSE(s.size.has_value());
    EXPECT_EQ(s.elements_seen, limit);
    EXPECT_EQ(s.classification, MonoidClass::group);
}

// A minimal AT&T reader for the corpus test (the shared reader is another module's work): arcs
// `src dst in out`, accepting lines `q [weight]`, state 0 starts, missing arcs go to a new sink.
Dfa read_att_locally(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::tuple<State, State, std::string>> arcs;
    std::vector<State> finals;
    std::map<std::string, Letter> letters;
    std::size_t n = 1;
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::vector<std::string> f;
        for (std::string x; fields >> x;) f.push_back(x);
        if (f.size() >= 4) {
            arcs.emplace_back(State(std::stoul(f[0])), State(std::stoul(f[1])), f[2]);
            letters.emplace(f[2], Letter(letters.size()));
            n = std::max<std::size_t>({n, std::get<0>(arcs.back()) + 1u, std::get<1>(arcs.back()) + 1u});
        } else if (!f.empty()) {
            finals.push_back(State(std::stoul(f[0])));
            n = std::max<std::size_t>(n, finals.back() + 1u);
        }
    }
    std::vector<std::string> alphabet(letters.size());
    for (const auto& [name, a] : letters) alphabet[a] = name;
    Dfa dfa = make_dfa(n + 1, alphabet, path);  // state n: the sink
    for (auto& t : dfa.delta) t = State(n);
    for (const auto& [p, q, a] : arcs) dfa.next(p, letters.at(a)) = q;
    for (State q : finals) dfa.accepting[q] = true;
    return dfa;
}

TEST(Monoid, MlregtestCorpusClasses) {
    // The corpus README: 1,410 of the 1,470 stored DFAs are aperiodic; the only non-trivial groups
    // are C2 (Reg) and C2, C3, C5 (Zp).
    std::size_t files = 0, aperiodic = 0;
    std::set<std::size_t> orders;
    for (const auto& entry : std::filesystem::directory_iterator(std::string(STATETRACK_TEST_DATA) + "/mlregtest/att")) {
        if (entry.path().extension() != ".att") continue;
        const std::string name = entry.path().filename().string();
        const auto s = summarize_monoid(read_att_locally(entry.path().string()));
        ASSERT_TRUE(s.size.has_value()) << name;
        ++files;
        if (s.classification == MonoidClass::aperiodic) {
            ++aperiodic;
            continue;
        }
        EXPECT_TRUE(name.find(".Reg.") != std::string::npos || name.find(".Zp.") != std::string::npos) << name;
        orders.insert(s.group_orders.begin(), s.group_orders.end());
    }
    EXPECT_EQ(files, 1470u);
    EXPECT_EQ(aperiodic, 1410u);
    EXPECT_EQ(orders, (std::set<std::size_t>{2, 3, 5}));
}

TEST(Monoid, InvalidDfaIsAnInputError) {
    Dfa dfa = make_dfa(2, {"a"});
    dfa.delta[1] = 5;
    EXPECT_THROW(summarize_monoid(dfa), InputError);
}

}  // namespace
}  // namespace statetrack::automata
