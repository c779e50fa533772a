// The deciding pieces of the theorem checkers, each fed a case where the statement must fail, and
// integer_closure against lrnn's rational closure (same pairs, same shortest counterexample).
#include <gtest/gtest.h>

#include <cmath>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/number.hpp"
#include "statetrack/proofs/integer_closure.hpp"
#include "statetrack/proofs/theorems.hpp"

using namespace statetrack;
using automata::zoo;

namespace {

lrnn::Network compile(const automata::Dfa& dfa, lrnn::Construction c, lrnn::Wiring w = lrnn::Wiring::shift) {
    lrnn::CompileOptions o;
    o.construction = c;
    o.wiring = w;
    return lrnn::compile_dfa(dfa, o);
}

// A one-layer dense model on the constant input with transition A.
proofs::DenseLrnn constant_input_model(const Eigen::MatrixXd& a, const Eigen::VectorXd& h0) {
    proofs::DenseLayer layer;
    layer.h0 = h0;
    layer.A = {a};
    layer.B = {Eigen::VectorXd::Zero(h0.size())};
    layer.readout = Eigen::VectorXd::Unit(h0.size(), 0);
    return {{layer}};
}

}  // namespace

TEST(IntegerClosure, AgreesWithTheRationalClosureOnCascades) {
    for (const char* spec : {"parity", "first", "evenpairs", "tomita:3", "tomita:5", "dyck:1:3", "contains:abb", "sym:3", "flipflop"}) {
        const auto dfa = zoo(spec);
        const auto net = compile(dfa, lrnn::Construction::cascade);
        const auto fast = proofs::integer_closure(net, dfa);
        const auto slow = lrnn::exact_closure(net, dfa);
        ASSERT_TRUE(fast.applicable) << spec << ": " << fast.message;
        EXPECT_FALSE(fast.ideal) << spec;
        EXPECT_TRUE(fast.certified) << spec;
        EXPECT_EQ(fast.certified, slow.certified) << spec;
        EXPECT_EQ(fast.pairs, slow.pairs) << spec;
    }
}

TEST(IntegerClosure, FindsTheSameShortestCounterexampleAsTheRationalClosure) {
    // The literal (post-update) wiring of Theorem 4 on "the second-to-last letter is a".
    const auto dfa = proofs::second_to_last_a();
    const auto literal = compile(dfa, lrnn::Construction::cascade, lrnn::Wiring::literal);
    const auto fast = proofs::integer_closure(literal, dfa);
    const auto slow = lrnn::exact_closure(literal, dfa);
    ASSERT_TRUE(fast.counterexample);
    ASSERT_TRUE(slow.counterexample);
    EXPECT_EQ(*fast.counterexample, *slow.counterexample);
    EXPECT_FALSE(fast.certified);
    // The shift wiring is certified.
    EXPECT_TRUE(proofs::integer_closure(compile(dfa, lrnn::Construction::cascade), dfa).certified);
}

TEST(IntegerClosure, RefusesNonIntegerModelsAndStopsAtItsBudget) {
    const auto dfa = zoo("parity");
    auto net = compile(dfa, lrnn::Construction::parity);
    net.layers[0].h0 = {lrnn::rational(1, 2)};
    const auto r = proofs::integer_closure(net, dfa);
    EXPECT_FALSE(r.applicable);
    EXPECT_FALSE(r.message.empty());
    const auto big = zoo("sym:4");
    const auto budget = proofs::integer_closure(compile(big, lrnn::Construction::onehot), big, 2);
    EXPECT_TRUE(budget.applicable);
    EXPECT_FALSE(budget.complete);
    EXPECT_FALSE(budget.certified);
}

TEST(IntegerClosure, TheoremSixIdealModelIsCertifiedAndAWrongMirrorIsCaught) {
    const auto dfa = zoo("modsum:5");
    auto net = compile(dfa, lrnn::Construction::theorem6);
    const auto good = proofs::integer_closure(net, dfa);
    ASSERT_TRUE(good.applicable) << good.message;
    EXPECT_TRUE(good.ideal);
    EXPECT_TRUE(good.certified);
    EXPECT_EQ(good.pairs, 10u);  // 2m points of the orbit
    EXPECT_LT(good.recognition_error, 1e-100);
    // Turn one mirror of the adder layer by 90 degrees (v -> its normal): a different reflection.
    auto v = lrnn::dense_vector(net.layers[1].transitions[1].factors[0].v);
    std::swap(v[0], v[1]);
    v[0] = lrnn::parse_number(lrnn::to_string(v[0]).front() == '-' ? lrnn::to_string(v[0]).substr(1) : "-" + lrnn::to_string(v[0]), "t", "v");
    net.layers[1].transitions[1].factors[0].v = lrnn::sparse_vector(v);
    const auto bad = proofs::integer_closure(net, dfa);
    ASSERT_TRUE(bad.applicable) << bad.message;
    EXPECT_FALSE(bad.certified);
    EXPECT_TRUE(bad.counterexample || !bad.complete);
}

TEST(Theorem2, TheCheckerFindsPeriodThreeOnTheCyclicPermutation) {
    // The exact rotation of three points counts mod 3: its period 3 does not divide 2.
    Eigen::MatrixXd p(3, 3);
    p << 0, 0, 1, 1, 0, 0, 0, 1, 0;
    Eigen::VectorXd h0(3);
    h0 << 1, 2, 3;
    for (const char* a : {"fp32", "fp64", "bf16"}) {
        const auto period = proofs::find_period(constant_input_model(p, h0), proofs::parse_arithmetic(a), 1000);
        ASSERT_TRUE(period.found) << a;
        EXPECT_EQ(period.period, 3u) << a;
        EXPECT_FALSE(proofs::periods_divide_powers_of_two(period)) << a;
    }
    // A real diagonal with a negative entry: period 2, allowed.
    Eigen::MatrixXd d = Eigen::MatrixXd::Zero(3, 3);
    d.diagonal() << -1, 0.5, 1;
    const auto period = proofs::find_period(constant_input_model(d, h0), proofs::parse_arithmetic("fp32"), 100000);
    ASSERT_TRUE(period.found);
    EXPECT_TRUE(proofs::periods_divide_powers_of_two(period));
}

TEST(Theorem1, TheCheckerSeesAlternationOnlyWithANegativeEigenvalue) {
    Eigen::VectorXd h0(1);
    h0 << 1;
    const auto flip = proofs::find_period(constant_input_model(Eigen::MatrixXd::Constant(1, 1, -1), h0), proofs::parse_arithmetic("fp32"), 100);
    ASSERT_TRUE(flip.found);
    EXPECT_TRUE(proofs::outputs_alternate(flip));
    const auto decay = proofs::find_period(constant_input_model(Eigen::MatrixXd::Constant(1, 1, 0.5), h0), proofs::parse_arithmetic("fp16"), 100000);
    ASSERT_TRUE(decay.found);
    EXPECT_EQ(decay.period, 1u);
    EXPECT_FALSE(proofs::outputs_alternate(decay));
}

TEST(Prop1, EigenvalueClaimsFailWhenReflectionsAreAllowed) {
    // k = 3 factors with beta = 2 (reflections): a rotation, eigenvalues of modulus 1 that are not 1.
    const double a = 0.3, b = 1.1, c = 2.0;
    std::vector<proofs::Factor> reflections;
    for (double t : {a, b, c}) reflections.push_back({(Eigen::VectorXd(2) << std::cos(t), std::sin(t)).finished(), 2.0});
    std::vector<proofs::Factor> two(reflections.begin(), reflections.begin() + 2);
    const auto open = proofs::check_open_interval_claim(two, 2);
    EXPECT_FALSE(open.holds);
    ASSERT_TRUE(open.violation);
    EXPECT_NEAR(std::abs(*open.violation), 1.0, 1e-9);
    const auto unit = proofs::check_real_unit_claim(reflections, 2);
    EXPECT_FALSE(unit.holds);
    // With beta in [0, 1] and k = 2 the claim holds.
    std::vector<proofs::Factor> soft = two;
    for (auto& f : soft) f.beta = 0.7;
    EXPECT_TRUE(proofs::check_real_unit_claim(soft, 2).holds);
    EXPECT_TRUE(proofs::check_open_interval_claim(soft, 2).holds);
    // Norm: a GH factor with beta > 2 is not a contraction.
    EXPECT_TRUE(proofs::norm_at_most_one_exact(two, 2));
    std::vector<proofs::Factor> stretched{{(Eigen::VectorXd(2) << 1, 0).finished(), 2.5}};
    EXPECT_FALSE(proofs::norm_at_most_one_exact(stretched, 2));
}

TEST(Prop1, FactorizationsReconstructTheirTargets) {
    const std::vector<std::size_t> cycle = {1, 2, 3, 0, 5, 4};  // a 4-cycle and a swap: 6 - 2 = 4 swaps
    const auto swaps = proofs::factor_permutation(cycle);
    EXPECT_EQ(swaps.size(), 4u);
    Eigen::MatrixXd p = Eigen::MatrixXd::Zero(6, 6);
    for (std::size_t i = 0; i < 6; ++i) p(Eigen::Index(cycle[i]), Eigen::Index(i)) = 1;
    EXPECT_LT(proofs::reconstruction_error(swaps, p), 1e-12);
    Eigen::MatrixXd m(2, 2);
    m << 0.3, -0.2, 0.1, 0.5;
    const auto factors = proofs::factor_contraction(m);
    EXPECT_LE(factors.size(), 6u);
    EXPECT_LT(proofs::reconstruction_error(factors, m), 1e-9);
}

TEST(Prove, UnknownNamesAreInputErrors) { EXPECT_THROW(proofs::prove("theorem5"), InputError); }
