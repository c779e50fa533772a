// The LRNN core and the compiler: numbers, factors, evaluation in every precision, the format,
// the checks (including ones that must fail), and the constructions of PAPER.md.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/lrnn/analysis.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/format.hpp"
#include "statetrack/lrnn/integer_eval.hpp"
#include "statetrack/lrnn/scalars.hpp"

using namespace statetrack;
using namespace statetrack::lrnn;
using automata::Dfa;
using automata::Letter;

namespace {

// Counting letter 1 modulo m over {0, 1}, accepting count 0.
Dfa counter(std::size_t m) {
    Dfa d = automata::make_dfa(m, {"0", "1"}, "count");
    for (std::size_t q = 0; q < m; ++q) d.next(automata::State(q), 1) = automata::State((q + 1) % m);
    d.accepting[0] = true;
    return d;
}

// Addition mod m over {0..m-1}.
Dfa modsum(std::size_t m) {
    std::vector<std::string> alphabet;
    for (std::size_t a = 0; a < m; ++a) alphabet.push_back(std::to_string(a));
    Dfa d = automata::make_dfa(m, alphabet, "modsum");
    for (std::size_t q = 0; q < m; ++q)
        for (std::size_t a = 0; a < m; ++a) d.next(automata::State(q), Letter(a)) = automata::State((q + a) % m);
    d.accepting[0] = true;
    return d;
}

// "The second-to-last letter is a" over {a, b}: states remember the last two letters.
Dfa second_to_last() {
    Dfa d = automata::make_dfa(4, {"a", "b"}, "second-to-last-a");
    // state = 2 * [previous letter is a] + [last letter is a]
    for (automata::State q = 0; q < 4; ++q) {
        d.next(q, 0) = automata::State(((q & 1) << 1) | 1);
        d.next(q, 1) = automata::State((q & 1) << 1);
    }
    d.accepting[2] = d.accepting[3] = true;
    return d;
}

std::vector<Letter> random_word(std::mt19937_64& rng, std::size_t letters, std::size_t length) {
    std::vector<Letter> w(length);
    for (auto& a : w) a = Letter(rng() % letters);
    return w;
}

void expect_agrees(const Network& net, const Dfa& dfa, const std::vector<Letter>& word, const Precision& p) {
    const RunOutput out = run_network(net, word, p);
    automata::State q = dfa.start;
    for (std::size_t t = 0; t < word.size(); ++t) {
        q = dfa.next(q, word[t]);
        ASSERT_TRUE(out.accept[t].has_value()) << p.name() << " undecided at " << t;
        ASSERT_EQ(*out.accept[t], bool(dfa.accepting[q])) << p.name() << " at position " << t + 1;
        ASSERT_EQ(out.states[t], std::int64_t(q)) << p.name() << " at position " << t + 1;
    }
}

}  // namespace

TEST(Number, ParsesExactAndApproximate) {
    EXPECT_EQ(parse_number("-2/4", "f", "/x").exact, "-1/2");
    EXPECT_EQ(parse_number("6/3", "f", "/x").exact, "2");
    EXPECT_DOUBLE_EQ(parse_number("1/3", "f", "/x").approx, 1.0 / 3.0);
    const Number d = parse_number("0.80901699437494742410229341718281905886", "f", "/x");
    EXPECT_FALSE(d.is_exact());
    EXPECT_DOUBLE_EQ(d.approx, 0.8090169943749474);
    for (const char* bad : {"", "1/0", "abc", "1/-2", "--1", "1e", "0x10", "1/2/3"}) {
        try {
            parse_number(bad, "f", "/x/0");
            ADD_FAILURE() << "accepted " << bad;
        } catch (const InputError& e) {
            EXPECT_EQ(e.place(), "/x/0");
        }
    }
}

TEST(Precision, ParsesNamesAndRejectsBadOnes) {
    EXPECT_EQ(parse_precision("bits:24").bits, 24u);
    EXPECT_EQ(parse_precision("mpfr:200").name(), "mpfr:200");
    EXPECT_EQ(parse_precision("interval:128").kind, Precision::Kind::interval);
    for (const char* bad : {"fp8", "bits:1", "bits:114", "mpfr:", "mpfr:x", "interval:-3", "bits:24x"})
        EXPECT_THROW(parse_precision(bad), InputError) << bad;
}

TEST(Evaluate, FactorApplicationMatchesTheDenseMatrix) {
    // One layer of dimension 3 with two unnormalised factors, a diagonal and a bias.
    Network net;
    net.alphabet = {"x"};
    Layer layer;
    layer.dim = 3;
    layer.num_inputs = 1;
    layer.h0 = {rational(1, 2), integer(-1), integer(2)};
    Transition t;
    t.factors.push_back({sparse_vector({integer(1), integer(2), integer(0)}), rational(3, 2)});
    t.factors.push_back({sparse_vector({integer(0), integer(1), integer(-1)}), integer(2)});
    t.diagonal = {rational(1, 2), integer(-1), integer(1)};
    t.bias = {integer(0), rational(1, 3), integer(0)};
    layer.transitions = {t};
    layer.input_transition = {0};
    layer.readout.labels = {0, 1, 2};
    layer.readout.num_labels = layer.readout.num_outputs = 3;
    net.layers.push_back(layer);
    net.states = {0, 1, 2};
    net.accept = {true, false, false};
    validate(net);
    const Eigen::MatrixXd a = transition_matrix(t, 3);
    Eigen::VectorXd h(3), b(3);
    h << 0.5, -1, 2;
    b << 0, 1.0 / 3, 0;
    const auto prepared = prepare<double>(net);
    auto state = initial_state(prepared);
    auto exact_prepared = prepare<Rational>(net);
    auto exact_state = initial_state(exact_prepared);
    for (int k = 0; k < 5; ++k) {
        h = a * h + b;
        step(prepared, state, 0);
        step(exact_prepared, exact_state, 0);
        for (int i = 0; i < 3; ++i) {
            EXPECT_NEAR(state.hidden[0][std::size_t(i)], h[i], 1e-12);
            EXPECT_NEAR(exact_state.hidden[0][std::size_t(i)].convert_to<double>(), h[i], 1e-12);
        }
    }
    // The eigenvalue bound: a product of factors with beta in [0, 2] and |diagonal| <= 1.
    EXPECT_LE(spectral_norm(a), 1 + 1e-12);
    for (auto lambda : eigenvalues(a)) EXPECT_LE(std::abs(lambda), 1 + 1e-12);
}

TEST(Compile, ParityIsTheScalarMinusOneAndCertified) {
    const Dfa dfa = counter(2);
    const Network net = compile_dfa(dfa);
    EXPECT_EQ(net.construction, "parity");
    ASSERT_EQ(net.layers.size(), 1u);
    EXPECT_EQ(net.layers[0].dim, 1u);
    const ClosureResult closure = exact_closure(net, dfa);
    EXPECT_TRUE(closure.certified) << closure.message;
    EXPECT_EQ(closure.pairs, 2u);
    std::mt19937_64 rng(7);
    const auto word = random_word(rng, 2, 3000);
    for (const char* p : {"fp16", "bf16", "fp32", "fp64", "bits:2", "mpfr:64", "exact", "interval:53"})
        expect_agrees(net, dfa, word, parse_precision(p));
}

TEST(Compile, OneHotUsesPMinusCReflections) {
    automata::RandomDfaOptions options;
    options.kind = automata::RandomKind::permutation;
    options.states = 6;
    options.letters = 3;
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        options.seed = seed;
        const Dfa dfa = automata::random_dfa(options);
        const Network net = compile_dfa(dfa, {Construction::onehot});
        const Layer& layer = net.layers[0];
        // Each letter: moved points minus cycles among the reachable states.
        for (Letter a = 0; a < dfa.num_letters(); ++a) {
            const auto& t = layer.transitions[layer.input_transition[a]];
            std::size_t moved = 0, cycles = 0;
            std::vector<bool> seen(dfa.num_states(), false);
            for (automata::State q : net.states) {
                if (seen[q] || dfa.next(q, a) == q) continue;
                ++cycles;
                for (automata::State r = q; !seen[r]; r = dfa.next(r, a)) seen[r] = true, ++moved;
            }
            EXPECT_EQ(t.factors.size(), moved - cycles);
            for (const auto& f : t.factors) EXPECT_EQ(f.beta.exact, "2");
            EXPECT_LE(spectral_norm(transition_matrix(t, layer.dim)), 1 + 1e-12);
        }
        const auto closure = exact_closure(net, dfa);
        EXPECT_TRUE(closure.certified) << closure.message;
        std::mt19937_64 rng(seed);
        expect_agrees(net, dfa, random_word(rng, 3, 2000), parse_precision("fp32"));
    }
}

TEST(Compile, RotationCountsModuloMInFloatingPoint) {
    for (std::size_t m : {3u, 5u, 7u}) {
        const Dfa dfa = counter(m);
        const Network net = compile_dfa(dfa, {Construction::rotation});
        ASSERT_EQ(net.layers[0].dim, 2u);
        const auto check = check_against_dfa(net, dfa);
        EXPECT_TRUE(check.ok);
        EXPECT_FALSE(check.closure.applicable);
        std::mt19937_64 rng(m);
        const auto word = random_word(rng, 2, 5000);
        for (const char* p : {"fp32", "fp64", "mpfr:100"}) expect_agrees(net, dfa, word, parse_precision(p));
        // The rotation is a product of two reflections with eigenvalues e^{+-2 pi i / m}.
        const auto& t = net.layers[0].transitions[net.layers[0].input_transition[1]];
        ASSERT_EQ(t.factors.size(), 2u);
        for (auto lambda : eigenvalues(transition_matrix(t, 2))) {
            EXPECT_NEAR(std::abs(lambda), 1, 1e-12);
            EXPECT_NEAR(std::abs(std::arg(lambda)), 2 * M_PI / double(m), 1e-12);
        }
        EXPECT_THROW(run_network(net, word, parse_precision("exact")), InputError);
    }
    EXPECT_THROW(compile_dfa(second_to_last(), {Construction::rotation}), InputError);
}

TEST(Compile, Theorem6AddsModuloMWithTwoReflectionLayers) {
    for (std::size_t m : {2u, 3u, 5u, 12u}) {
        const Dfa dfa = modsum(m);
        for (Wiring wiring : {Wiring::shift, Wiring::literal}) {
            const Network net = compile_dfa(dfa, {Construction::theorem6, ResetEncoding::projections, wiring});
            ASSERT_EQ(net.layers.size(), 2u);
            for (const auto& layer : net.layers)
                for (const auto& t : layer.transitions) {
                    EXPECT_EQ(t.factors.size(), 1u);
                    EXPECT_EQ(t.factors[0].beta.exact, "2");
                }
            std::mt19937_64 rng(m);
            const auto word = random_word(rng, m, 3000);
            expect_agrees(net, dfa, word, parse_precision("fp64"));
            expect_agrees(net, dfa, std::vector<Letter>(word.begin(), word.begin() + 500), parse_precision("fp32"));
        }
    }
}

TEST(Compile, CascadeShiftWiringIsCertifiedAndLiteralWiringFails) {
    const Dfa dfa = second_to_last();
    for (ResetEncoding reset : {ResetEncoding::projections, ResetEncoding::diagonal}) {
        const Network net = compile_dfa(dfa, {Construction::automatic, reset, Wiring::shift});
        EXPECT_EQ(net.construction, "cascade");
        EXPECT_GE(net.layers.size(), 2u);
        const auto closure = exact_closure(net, dfa);
        EXPECT_TRUE(closure.certified) << closure.message;
        std::mt19937_64 rng(3);
        expect_agrees(net, dfa, random_word(rng, 2, 5000), parse_precision("fp32"));
        expect_agrees(net, dfa, random_word(rng, 2, 500), parse_precision("bf16"));
    }
    const Network literal = compile_dfa(dfa, {Construction::cascade, ResetEncoding::projections, Wiring::literal});
    const auto closure = exact_closure(literal, dfa);
    EXPECT_FALSE(closure.certified);
    ASSERT_TRUE(closure.counterexample.has_value());
    // The counterexample is real: run it and compare with the DFA.
    const RunOutput out = run_network(literal, *closure.counterexample, parse_precision("exact"));
    const bool expected = automata::accepts(dfa, *closure.counterexample);
    EXPECT_TRUE(*out.accept.back() != expected || out.states.back() != std::int64_t(automata::run(dfa, *closure.counterexample)));
    EXPECT_FALSE(check_against_dfa(literal, dfa).ok);
}

TEST(Check, AFlippedReflectionIsCaught) {
    const Dfa dfa = counter(4);
    Network net = compile_dfa(dfa, {Construction::onehot});
    ASSERT_TRUE(exact_closure(net, dfa).certified);
    // Make letter 1 swap the wrong pair in its last reflection.
    auto& t = net.layers[0].transitions[net.layers[0].input_transition[1]];
    ASSERT_FALSE(t.factors.empty());
    auto v = dense_vector(t.factors.back().v);
    std::rotate(v.begin(), v.begin() + 1, v.end());
    t.factors.back().v = sparse_vector(v);
    const auto closure = exact_closure(net, dfa);
    EXPECT_FALSE(closure.certified);
    ASSERT_TRUE(closure.counterexample.has_value());
    const auto words = check_all_words(net, dfa, 4, parse_precision("fp32"));
    EXPECT_FALSE(words.ok);
    EXPECT_LE(closure.counterexample->size(), words.counterexample->size());  // the closure's is a shortest one
}

TEST(Format, RoundTripsEveryConstruction) {
    const std::vector<std::pair<Dfa, CompileOptions>> cases = {
        {counter(2), {}}, {counter(5), {Construction::onehot}}, {counter(5), {Construction::rotation}},
        {modsum(4), {Construction::theorem6}}, {second_to_last(), {}},
        {second_to_last(), {Construction::cascade, ResetEncoding::diagonal, Wiring::literal}}};
    for (const auto& [dfa, options] : cases) {
        const Network net = compile_dfa(dfa, options);
        const std::string text = write_network_json(net);
        const Network back = read_network_json(text, "mem");
        EXPECT_EQ(write_network_json(back), text);
        std::mt19937_64 rng(11);
        const auto word = random_word(rng, dfa.num_letters(), 300);
        for (const char* p : {"fp32", "mpfr:128"}) {
            const auto a = run_network(net, word, parse_precision(p)), b = run_network(back, word, parse_precision(p));
            EXPECT_EQ(a.accept, b.accept);
            EXPECT_EQ(a.states, b.states);
        }
    }
}

TEST(Format, BadModelsNameThePlace) {
    const std::string good = write_network_json(compile_dfa(counter(3), {Construction::onehot}));
    auto expect_error = [](const std::string& text, const std::string& place) {
        try {
            read_network_json(text, "m.json");
            ADD_FAILURE() << "accepted a bad model, expected an error at " << place;
        } catch (const InputError& e) {
            EXPECT_EQ(e.file(), "m.json");
            EXPECT_EQ(e.place(), place) << e.what();
        }
    };
    // The transition of letter "1" (letter "0" is the identity, with no factors).
    const std::size_t T = nlohmann::json::parse(good)["layers"][0]["input_transition"][1].get<std::size_t>();
    const std::string at = "/layers/0/transitions/" + std::to_string(T);
    auto edit = [&](auto&& f) {
        nlohmann::json j = nlohmann::json::parse(good);
        f(j);
        return j.dump();
    };
    expect_error("{", "byte 2");
    expect_error(edit([](nlohmann::json& j) { j["format"] = "other/1"; }), "/format");
    expect_error(edit([T](nlohmann::json& j) { j["layers"][0]["transitions"][T]["factors"][0]["beta"] = "5/2"; }),
                 at + "/factors/0/beta");
    expect_error(edit([T](nlohmann::json& j) { j["layers"][0]["transitions"][T]["factors"][0]["beta"] = "-1/2"; }),
                 at + "/factors/0/beta");
    expect_error(edit([](nlohmann::json& j) { j["layers"][0]["h0"] = nlohmann::json::array({"1"}); }), "/layers/0/h0");
    expect_error(edit([](nlohmann::json& j) { j["layers"][0]["input_transition"][1] = 9; }), "/layers/0/input_transition/1");
    expect_error(edit([](nlohmann::json& j) { j["layers"][0].erase("readout"); }), "/layers/0");
    expect_error(edit([T](nlohmann::json& j) { j["layers"][0]["transitions"][T]["factors"][0]["v"] = nlohmann::json::array({"0", "0", "0"}); }),
                 at + "/factors/0/v");
    expect_error(edit([T](nlohmann::json& j) { j["layers"][0]["transitions"][T]["diagonal"] = nlohmann::json::array({"1", "3/2", "0"}); }),
                 at + "/diagonal/1");
    expect_error(edit([](nlohmann::json& j) { j["accept"] = nlohmann::json::array({true}); }), "/states");
    expect_error(edit([](nlohmann::json& j) { j["alphabet"][1] = "0"; }), "/alphabet/1");
}

TEST(IntegerEval, AgreesWithRationalStepsAndRefusesNonIntegerNetworks) {
    const Dfa dfa = second_to_last();
    const Network net = compile_dfa(dfa, {Construction::cascade, ResetEncoding::projections, Wiring::shift});
    const auto fast = prepare_integer(net);
    ASSERT_TRUE(fast.has_value());
    const PreparedNetwork<Rational> exact = prepare<Rational>(net);
    NetworkState<Rational> s = initial_state(exact);
    std::vector<std::int32_t> packed = fast->initial;
    std::mt19937_64 rng(7);
    for (int t = 0; t < 200; ++t) {
        const Letter a = Letter(rng() % dfa.num_letters());
        const auto symbol = step_integer(*fast, packed, a);
        ASSERT_TRUE(symbol.has_value());
        EXPECT_EQ(*symbol, step(exact, s, a));
        for (std::size_t i = 0; i < net.layers.size(); ++i) {
            EXPECT_EQ(std::uint32_t(packed[i]), s.outputs[i]);
            const std::size_t offset = fast->layers[i].offset;
            for (std::size_t k = 0; k < net.layers[i].dim; ++k) EXPECT_EQ(Rational(packed[offset + k]), s.hidden[i][k]);
        }
    }
    // Irrational entries, and a coefficient beta / v.v = 1/2, are not integer networks.
    EXPECT_FALSE(prepare_integer(compile_dfa(counter(3), {Construction::rotation})).has_value());
    Network half = compile_dfa(counter(3), {Construction::onehot});
    half.layers[0].transitions[0].factors.push_back(GhFactor{sparse_vector({integer(1), integer(1), integer(0)}), integer(1)});
    EXPECT_FALSE(prepare_integer(half).has_value());
}

TEST(IntegerEval, ValuesPastTheGuardFallBackToRationals) {
    // One state, one letter; h grows by 1 per token from just below the guard: the integer path
    // overflows at the second token, the closure continues in rationals up to its pair limit.
    const Dfa dfa = automata::make_dfa(1, {"a"});
    Network net;
    net.name = "grows";
    net.construction = "test";
    net.alphabet = {"a"};
    Layer layer;
    layer.dim = 1;
    layer.h0 = {integer(integer_value_guard - 1)};
    layer.num_inputs = 1;
    Transition grow;
    grow.bias = {integer(1)};
    layer.transitions = {grow};
    layer.input_transition = {0};
    layer.readout.labels = {0};
    layer.readout.num_labels = layer.readout.num_outputs = 1;
    net.layers = {layer};
    net.states = {0};
    net.accept = {bool(dfa.accepting[0])};
    validate(net);
    const auto p = prepare_integer(net);
    ASSERT_TRUE(p.has_value());
    std::vector<std::int32_t> packed = p->initial;
    EXPECT_TRUE(step_integer(*p, packed, 0).has_value());
    EXPECT_FALSE(step_integer(*p, packed, 0).has_value());
    ClosureOptions options;
    options.max_pairs = 10;
    const ClosureResult closure = exact_closure(net, dfa, options);
    EXPECT_FALSE(closure.complete);
    EXPECT_EQ(closure.pairs, 10u);
    EXPECT_TRUE(check_random_words(net, dfa, 1, 50, 1, parse_precision("exact")).ok);
}
