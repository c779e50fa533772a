// verify(): exact certificates, per-precision closures and failing words, on compiled zoo models and
// on deliberately broken ones.
#include <gtest/gtest.h>

#include <cmath>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/number.hpp"
#include "statetrack/proofs/verify.hpp"

using namespace statetrack;
using automata::zoo;

namespace {

proofs::VerifyOptions small_options() {
    proofs::VerifyOptions o;
    o.precision_max_pairs = 20'000;
    o.repeated_max_steps = 1 << 12;
    o.random_words = 4;
    o.random_max_length = 512;
    return o;
}

lrnn::Network compile(const automata::Dfa& dfa, lrnn::Construction c, lrnn::Wiring w = lrnn::Wiring::shift) {
    lrnn::CompileOptions o;
    o.construction = c;
    o.wiring = w;
    return lrnn::compile_dfa(dfa, o);
}

}  // namespace

TEST(Verify, ParityIsCertifiedExactlyAndInEveryPrecision) {
    const auto dfa = zoo("parity");
    const auto r = proofs::verify(compile(dfa, lrnn::Construction::parity), dfa, small_options());
    EXPECT_TRUE(r.passed());
    EXPECT_TRUE(r.exact.certified);
    EXPECT_EQ(r.exact.method, "integer closure");
    EXPECT_EQ(r.exact.pairs, 2u);
    ASSERT_EQ(r.precisions.size(), 4u);
    for (const auto& p : r.precisions) {
        EXPECT_TRUE(p.all_lengths) << p.name;
        EXPECT_FALSE(p.first_failure) << p.name;
        EXPECT_GT(p.certified_length, 0) << p.name;
    }
}

TEST(Verify, FlippedReflectionIsCaughtWithAShortestCounterexample) {
    const auto dfa = zoo("sym:3");
    lrnn::Network net = compile(dfa, lrnn::Construction::onehot);
    // Flip one reflection of the first transition that has one: swap which coordinates it exchanges.
    bool flipped = false;
    for (auto& t : net.layers[0].transitions) {
        for (auto& f : t.factors) {
            auto v = lrnn::dense_vector(f.v);
            std::rotate(v.begin(), v.begin() + 1, v.end());
            f.v = lrnn::sparse_vector(v);
            flipped = true;
            break;
        }
        if (flipped) break;
    }
    ASSERT_TRUE(flipped);
    const auto r = proofs::verify(net, dfa, small_options());
    EXPECT_FALSE(r.passed());
    ASSERT_TRUE(r.counterexample);
    EXPECT_NE(automata::accepts(dfa, *r.counterexample) ? 1 : 0, -1);
    // Every precision finds the same disagreement at the same (shortest) length.
    for (const auto& p : r.precisions) {
        ASSERT_TRUE(p.first_failure) << p.name;
        EXPECT_TRUE(p.failure_is_shortest);
        EXPECT_EQ(p.first_failure->size(), r.counterexample->size()) << p.name;
    }
}

TEST(Verify, RotationGetsAnIntervalBoundAndItsFloatOrbitsClose) {
    const auto dfa = zoo("mod:5");
    const auto r = proofs::verify(compile(dfa, lrnn::Construction::rotation), dfa, small_options());
    EXPECT_TRUE(r.passed());
    // The ideal model (cos / sin of multiples of pi / 5) closes exactly on 5 angles; the stored
    // decimals get a rigorous interval bound, not an all-length proof.
    EXPECT_EQ(r.exact.method, "angle closure (ideal model) + interval orbit (stored model)");
    EXPECT_TRUE(r.exact.complete);
    EXPECT_TRUE(r.exact.ideal);
    EXPECT_EQ(r.exact.pairs, 5u);
    EXPECT_TRUE(r.exact.certified);
    EXPECT_GT(r.exact.log2_certified_length, 100);
    EXPECT_TRUE(std::isfinite(r.exact.log2_certified_length));
    // Rounded rotations by 2 pi / 5 happen to cycle exactly on 1^k in these formats: the closure closes.
    for (const auto& p : r.precisions) EXPECT_TRUE(p.all_lengths) << p.name;
}

TEST(Verify, ARationalNonIntegerModelUsesTheRationalClosure) {
    // Scale the parity model's state by 1/2: still exact, no longer integer.
    const auto dfa = zoo("parity");
    auto net = compile(dfa, lrnn::Construction::parity);
    net.layers[0].h0 = {lrnn::rational(1, 2)};
    net.layers[0].readout.anchors = {{lrnn::rational(1, 2)}, {lrnn::rational(-1, 2)}};
    const auto r = proofs::verify(net, dfa, small_options());
    EXPECT_EQ(r.exact.method, "rational closure");
    EXPECT_TRUE(r.exact.certified);
    EXPECT_EQ(r.exact.pairs, 2u);
    EXPECT_NEAR(r.exact.margin, 0.5, 1e-12);
}

TEST(Verify, AWrongTheoremSixMirrorIsACounterexampleOfTheStoredModel) {
    const auto dfa = zoo("modsum:3");
    auto net = compile(dfa, lrnn::Construction::theorem6);
    // Without its bias the counter layer stays at 0: the adder never learns t mod 2.
    net.layers[0].transitions[0].bias.clear();
    const auto r = proofs::verify(net, dfa, small_options());
    EXPECT_FALSE(r.passed());
    ASSERT_TRUE(r.counterexample);
    EXPECT_TRUE(r.exact.ideal);
    EXPECT_LE(r.counterexample->size(), 3u);
}

TEST(Verify, BadPrecisionListsAreInputErrors) {
    EXPECT_THROW(proofs::parse_precision_list("fp16,,fp32"), InputError);
    EXPECT_THROW(proofs::parse_precision_list("exact"), InputError);
    EXPECT_THROW(proofs::parse_precision_list("fp8"), InputError);
    EXPECT_EQ(proofs::parse_precision_list("fp16,bits:12").size(), 2u);
}

TEST(Verify, DifferentAlphabetsAreInputErrors) {
    EXPECT_THROW(proofs::verify(compile(zoo("parity"), lrnn::Construction::parity), zoo("first"), small_options()), InputError);
}
