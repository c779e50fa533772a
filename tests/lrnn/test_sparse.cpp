// Sparse storage (issue 4, the SP.6.1.x MLRegTest cascades): sparse GH factor vectors, sparse
// readout output tables, token classes, the closure's sparse state set and step memo, and the
// model-size limit that counts what is really stored.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <deque>
#include <random>
#include <set>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/format.hpp"
#include "statetrack/lrnn/scalars.hpp"
#include "statetrack/lrnn/state_set.hpp"
#include "limit_model.hpp"

using namespace statetrack;
using namespace statetrack::lrnn;
using automata::Dfa;
using automata::Letter;
using nlohmann::json;

namespace {

// "The second-to-last letter is a" over {a, b, c, d}: c and d act like b (not a).
Dfa second_to_last_four_letters() {
    Dfa d = automata::make_dfa(4, {"a", "b", "c", "d"}, "second-to-last-a");
    for (automata::State q = 0; q < 4; ++q) {
        d.next(q, 0) = automata::State(((q & 1) << 1) | 1);
        for (Letter a = 1; a < 4; ++a) d.next(q, a) = automata::State((q & 1) << 1);
    }
    d.accepting[2] = d.accepting[3] = true;
    return d;
}

// Whole-state breadth-first search with exact rationals: the number of reachable pairs.
std::size_t pairs_by_whole_states(const Network& net, const Dfa& dfa) {
    const PreparedNetwork<Rational> prepared = prepare<Rational>(net);
    std::set<std::string> seen{state_key(dfa.start, initial_state(prepared))};
    std::deque<std::pair<automata::State, NetworkState<Rational>>> queue{{dfa.start, initial_state(prepared)}};
    while (!queue.empty()) {
        auto [q, s] = queue.front();
        queue.pop_front();
        for (Letter a = 0; a < dfa.num_letters(); ++a) {
            NetworkState<Rational> t = s;
            step(prepared, t, a);
            const automata::State r = dfa.next(q, a);
            if (seen.insert(state_key(r, t)).second) queue.emplace_back(r, std::move(t));
        }
    }
    return seen.size();
}

std::string error_place(const std::string& text) {
    try {
        read_network_json(text, "m.json");
    } catch (const InputError& e) {
        return e.place();
    }
    return "accepted";
}

}  // namespace

TEST(SparseVector, KeepsOnlyNonZeroEntriesInIndexOrder) {
    const std::vector<Number> dense = {integer(0), rational(-1, 2), integer(0), parse_number("0.0", "t", "x"), integer(3)};
    const SparseVector v = sparse_vector(dense);
    EXPECT_EQ(v.dim, 5u);
    ASSERT_EQ(v.entries.size(), 3u);  // an approximate 0.0 is not an exact zero: kept
    EXPECT_EQ(v.entries[0].index, 1u);
    EXPECT_EQ(v.entries[1].index, 3u);
    EXPECT_EQ(v.entries[2].index, 4u);
    EXPECT_EQ(dense_vector(v), dense);
    const SparseVector e = unit_vector(7, 4);
    EXPECT_EQ(e.dim, 7u);
    ASSERT_EQ(e.entries.size(), 1u);
    EXPECT_EQ(e.entries[0].index, 4u);
    EXPECT_EQ(e.entries[0].value.exact, "1");
}

TEST(SparseVector, ResetsStoreOneNumberPerProjection) {
    const Dfa dfa = automata::random_dfa({8, 3, automata::RandomKind::mixed, 17});
    const Network net = compile_dfa(dfa, {Construction::cascade});
    std::size_t factors = 0;
    for (const auto& layer : net.layers)
        for (const auto& t : layer.transitions)
            for (const auto& f : t.factors) {
                ++factors;
                EXPECT_EQ(f.v.dim, layer.dim);
                EXPECT_LE(f.v.entries.size(), 2u);  // e_i (a projection) or e_a - e_b (a reflection)
            }
    EXPECT_GT(factors, 0u);
    EXPECT_TRUE(check_against_dfa(net, dfa).ok);
}

TEST(TokenClasses, LettersThatActAlikeShareInputLetters) {
    const Dfa dfa = second_to_last_four_letters();
    const Network net = compile_dfa(dfa);
    ASSERT_EQ(net.construction, "cascade");
    EXPECT_EQ(net.token_class, (std::vector<std::uint32_t>{0, 1, 1, 1}));
    EXPECT_EQ(num_token_classes(net), 2u);
    for (std::size_t i = 1; i < net.layers.size(); ++i)
        EXPECT_EQ(net.layers[i].num_inputs, net.layers[i - 1].readout.num_outputs * 2);
    const CompileCheck check = check_against_dfa(net, dfa);
    EXPECT_TRUE(check.ok);
    EXPECT_TRUE(check.closure.certified);
    EXPECT_EQ(closure_letters(net, dfa), (std::vector<Letter>{0, 1}));
    EXPECT_TRUE(check_random_words(net, dfa, 5, 300, 3, parse_precision("fp32")).ok);
    EXPECT_TRUE(check_random_words(net, dfa, 5, 300, 4, parse_precision("exact")).ok);
    // Written and read back byte for byte, with the classes.
    const std::string text = write_network_json(net);
    EXPECT_NE(text.find("\"token_classes\""), std::string::npos);
    EXPECT_EQ(write_network_json(read_network_json(text, "mem")), text);
    // A class out of range, and a class without a token, are named.
    json j = json::parse(text);
    j["token_classes"][2] = 7;
    EXPECT_EQ(error_place(j.dump()), "/token_classes/2");
    j["token_classes"] = {0, 2, 2, 2};
    EXPECT_EQ(error_place(j.dump()), "/token_classes");
}

TEST(TokenClasses, TheClosureOverRepresentativesStillFindsAWrongTransition) {
    const Dfa dfa = second_to_last_four_letters();
    Network net = compile_dfa(dfa);
    // Layer 0 with the two classes' transitions swapped: "a" now acts like b, c, d.
    auto& it = net.layers[0].input_transition;
    ASSERT_EQ(it.size(), 2u);
    std::swap(it[0], it[1]);
    const ClosureResult closure = exact_closure(net, dfa);
    EXPECT_FALSE(closure.certified);
    ASSERT_TRUE(closure.counterexample.has_value());
    EXPECT_FALSE(check_all_words(net, dfa, 3, parse_precision("exact")).ok);
}

TEST(SparseFormat, OutputTablesReadFromTheDenseOrTheSparseForm) {
    const Dfa dfa = second_to_last_four_letters();
    const Network net = compile_dfa(dfa);
    json j = json::parse(write_network_json(net));
    // Rewrite layer 1's dense table [label * inputs + input] as {"indices", "values"}.
    json& readout = j["layers"][1]["readout"];
    ASSERT_TRUE(readout["outputs"].is_array());
    json indices = json::array(), values = json::array();
    for (std::size_t k = 0; k < readout["outputs"].size(); ++k)
        if (readout["outputs"][k].get<std::uint32_t>() != 0) indices.push_back(k), values.push_back(readout["outputs"][k]);
    ASSERT_FALSE(indices.empty());
    readout["outputs"] = {{"indices", indices}, {"values", values}};
    const Network back = read_network_json(j.dump(), "sparse.json");
    EXPECT_EQ(write_network_json(back), write_network_json(net));  // small tables are written dense again
    std::mt19937_64 rng(5);
    std::vector<Letter> word(400);
    for (auto& a : word) a = Letter(rng() % 4);
    EXPECT_EQ(run_network(back, word, parse_precision("exact")).states, run_network(net, word, parse_precision("exact")).states);
    // An index beyond labels x inputs, and an output beyond num_outputs, are named.
    json bad = j;
    bad["layers"][1]["readout"]["outputs"]["indices"][0] = 1000000;
    EXPECT_EQ(error_place(bad.dump()), "/layers/1/readout/outputs/indices/0");
    bad = j;
    bad["layers"][1]["readout"]["outputs"]["values"][0] = 99;
    EXPECT_EQ(error_place(bad.dump()), "/layers/1/readout/outputs/values/0");
}

TEST(SparseFormat, SparseFactorEntriesAreSortedAndRepeatsNamed) {
    const Dfa dfa = automata::random_dfa({7, 2, automata::RandomKind::mixed, 3});
    const Network net = compile_dfa(dfa, {Construction::cascade});
    json j = json::parse(write_network_json(net));
    // The widest layer's first projection, written sparse with an extra explicit zero out of order.
    std::size_t widest = 0;
    for (std::size_t i = 0; i < net.layers.size(); ++i)
        if (net.layers[i].dim > net.layers[widest].dim) widest = i;
    const std::size_t dim = net.layers[widest].dim;
    ASSERT_GE(dim, 3u);
    std::size_t t = 0;
    while (t < net.layers[widest].transitions.size() && net.layers[widest].transitions[t].factors.empty()) ++t;
    ASSERT_LT(t, net.layers[widest].transitions.size());
    const SparseVector& v = net.layers[widest].transitions[t].factors[0].v;
    ASSERT_FALSE(v.entries.empty());
    std::uint32_t other = 0;
    while (other == v.entries[0].index || (v.entries.size() == 2 && other == v.entries[1].index)) ++other;
    json& vj = j["layers"][widest]["transitions"][t]["factors"][0]["v"];
    vj = {{"indices", {v.entries[0].index, other}}, {"values", {to_string(v.entries[0].value), "0"}}};
    if (v.entries.size() == 2) vj["indices"].push_back(v.entries[1].index), vj["values"].push_back(to_string(v.entries[1].value));
    const Network back = read_network_json(j.dump(), "m.json");
    EXPECT_EQ(back.layers[widest].transitions[t].factors[0].v.entries.size(), v.entries.size());  // the explicit zero is not stored
    EXPECT_EQ(write_network_json(back), write_network_json(net));
    vj["indices"][1] = v.entries[0].index;
    const std::string at = "/layers/" + std::to_string(widest) + "/transitions/" + std::to_string(t) + "/factors/0/v/indices/1";
    EXPECT_EQ(error_place(j.dump()), at);
}

TEST(SparseStateSet, NumbersDistinctVectorsAndGivesThemBack) {
    SparseStateSet<std::int32_t> set(6);
    const std::vector<std::vector<std::int32_t>> vectors = {
        {0, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, -1}, {0, 5, 0, 0, 0, 0}, {0, 0, 5, 0, 0, 0}, {3, 0, -2, 0, 0, 7}};
    for (std::size_t i = 0; i < vectors.size(); ++i) {
        const auto [n, inserted] = set.insert(vectors[i].data());
        EXPECT_TRUE(inserted);
        EXPECT_EQ(n, i);
    }
    std::mt19937_64 rng(9);
    std::set<std::vector<std::int32_t>> distinct(vectors.begin(), vectors.end());
    std::vector<std::vector<std::int32_t>> numbered = vectors;
    for (int k = 0; k < 5000; ++k) {  // random sparse vectors, many repeated: numbered in first-insertion order
        std::vector<std::int32_t> x(6, 0);
        x[rng() % 6] = std::int32_t(rng() % 5) - 2;
        x[rng() % 6] = std::int32_t(rng() % 3);
        const auto [n, inserted] = set.insert(x.data());
        EXPECT_EQ(inserted, distinct.insert(x).second);
        if (inserted) numbered.push_back(x);
        EXPECT_EQ(numbered[n], x);
    }
    EXPECT_EQ(set.size(), distinct.size());
    std::vector<std::int32_t> out(6, 99);
    for (std::size_t n = 0; n < set.size(); ++n) {
        set.get(std::uint32_t(n), out.data());
        EXPECT_EQ(out, numbered[n]);
    }
}

TEST(Closure, StepMemoReachesTheSamePairsAsWholeRationalStates) {
    // The integer closure steps each layer's (state, input letter) once; a plain breadth-first
    // search over whole exact states (state_key) must find the same number of pairs.
    for (std::uint64_t seed : {1u, 2u, 3u}) {
        const Dfa dfa = automata::random_dfa({9, 3, automata::RandomKind::uniform, seed});
        const Network net = compile_dfa(dfa, {Construction::cascade});
        const ClosureResult closure = exact_closure(net, dfa);
        ASSERT_TRUE(closure.certified) << closure.message;
        EXPECT_EQ(closure.pairs, pairs_by_whole_states(net, dfa)) << "seed " << seed;
    }
}

TEST(Limits, ModelNumbersCountWhatIsStored) {
    // 2^23 numbers: dim 2^16 holds 128 dense vectors (h0 and 127 biases, each written as one
    // sparse entry). A factor counts 1 (beta) plus its listed entries, not the dimension.
    const std::size_t dim = std::size_t(1) << 16;
    auto model = [&](std::size_t biases, std::size_t factors) { return statetrack::testing::limit_model(dim, biases, factors); };
    auto outcome = [](const json& j) {
        try {
            read_network_json(j.dump(), "m.json");
        } catch (const LimitError& e) {
            return std::string("limit: ") + e.place();
        } catch (const InputError& e) {
            return std::string("input: ") + e.place();
        }
        return std::string("accepted");
    };
    json at = model(127, 0);
    at["layers"][0]["h0"] = "not a vector";  // refused right after the count passed: nothing is built
    EXPECT_EQ(outcome(at), "input: /layers/0/h0");
    EXPECT_EQ(outcome(model(127, 1)), "limit: /layers");  // 2^23 + 2
    EXPECT_EQ(outcome(model(128, 0)), "limit: /layers");  // 2^23 + 2^16
    // 1000 one-entry factors in that layer: 2,000 numbers, not 1000 x 2^16 (the old count).
    EXPECT_EQ(outcome(model(2, 1000)), "accepted");
}


TEST(Closure, StepMemoHandlesALayerWhoseStateDoesNotFixItsInput) {
    // Layer 0 tracks the parity of a's (one-hot, dim 2); layer 1 counts b's mod 3 (one-hot, dim 3)
    // whatever layer 0 says, and outputs only its count. So one state of layer 1 meets both input
    // letters (parity 0 and 1) for the same token: the memo's map behind the direct-mapped slots.
    const Dfa dfa = [] {
        Dfa d = automata::make_dfa(3, {"a", "b"}, "count-b-mod-3");
        for (automata::State q = 0; q < 3; ++q) d.next(q, 0) = q, d.next(q, 1) = automata::State((q + 1) % 3);
        d.accepting[0] = true;
        return d;
    }();
    Network net;
    net.name = "parity-then-count";
    net.construction = "test";
    net.alphabet = dfa.alphabet;
    Layer parity;
    parity.dim = 2;
    parity.h0 = {integer(1), integer(0)};
    parity.num_inputs = 2;
    Transition swap;
    swap.factors.push_back({sparse_vector({integer(1), integer(-1)}), integer(2)});
    parity.transitions = {swap, Transition{}};
    parity.input_transition = {0, 1};
    parity.readout.labels = {0, 1};
    parity.readout.num_labels = parity.readout.num_outputs = 2;
    Layer count;
    count.dim = 3;
    count.h0 = {integer(1), integer(0), integer(0)};
    count.num_inputs = 4;  // (parity output) x 2 tokens
    Transition cycle;      // (0 1 2): two reflections
    cycle.factors.push_back({sparse_vector({integer(1), integer(-1), integer(0)}), integer(2)});
    cycle.factors.push_back({sparse_vector({integer(1), integer(0), integer(-1)}), integer(2)});
    count.transitions = {Transition{}, cycle};
    count.input_transition = {0, 1, 0, 1};
    count.readout.labels = {0, 1, 2};
    count.readout.num_labels = count.readout.num_outputs = 3;
    net.layers = {parity, count};
    net.states = {0, 1, 2};
    net.accept = {true, false, false};
    validate(net);
    ASSERT_TRUE(check_random_words(net, dfa, 3, 200, 1, parse_precision("exact")).ok);
    const ClosureResult closure = exact_closure(net, dfa);
    ASSERT_TRUE(closure.certified) << closure.message;
    EXPECT_EQ(closure.pairs, pairs_by_whole_states(net, dfa));
    // The same network counting in the wrong direction on parity 1 is caught.
    net.layers[1].input_transition = {0, 1, 0, 0};
    const ClosureResult wrong = exact_closure(net, dfa);
    EXPECT_FALSE(wrong.certified);
    EXPECT_TRUE(wrong.counterexample.has_value());
}
