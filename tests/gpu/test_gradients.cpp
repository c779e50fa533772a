// Every parameter tensor's analytic gradient against central finite differences in fp64, for each
// recurrence and both eigenvalue ranges; and a planted bug in the gradient must be caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/gpu/cpu_backend.hpp"
#include "statetrack/gpu/random.hpp"

namespace statetrack::gpu {
namespace {

Task parity_task(LabelMode label) {
    const auto dfa = automata::zoo("parity");
    return Task{dfa, "parity", label, Target::accept};
}

ModelConfig small_config(const std::string& model, EigRange eig) {
    ModelConfig c;
    parse_model_name(model, c);
    c.eig = eig;
    c.layers = 2, c.d_model = 8, c.heads = 2, c.vocab = 2, c.classes = 2, c.mlp_hidden = 6;
    validate(c);
    return c;
}

// Random parameters (not the initialisation: gates away from their resting values) so every path
// carries gradient.
std::vector<double> random_params(const ParameterLayout& layout, std::uint64_t seed) {
    std::vector<double> w(layout.total);
    Rng rng = make_rng(seed, 99);
    for (auto& x : w) x = 0.6 * normal(rng);
    return w;
}

// Largest relative error of one tensor: ||g_analytic - g_fd|| / max(||g_analytic||, ||g_fd||).
struct TensorError {
    std::string name;
    double error, norm;
};

std::vector<TensorError> check_gradients(const ModelConfig& c, const Batch& batch, std::uint64_t seed,
                                         const std::function<void(std::vector<double>&)>& tamper = {}) {
    const auto layout = parameter_layout(c);
    auto w = random_params(layout, seed);
    Workspace<double> ws;
    std::vector<double> g(layout.total);
    loss_and_gradient<double>(c, layout, w, batch, ws, g);
    if (tamper) tamper(g);
    std::vector<TensorError> out;
    // Fourth-order central differences: truncation O(h^4), rounding O(eps / h).
    const double h = 3e-5;
    auto loss_at = [&](std::size_t i, double value) {
        const double keep = w[i];
        w[i] = value;
        const double loss = loss_and_gradient<double>(c, layout, w, batch, ws, {});
        w[i] = keep;
        return loss;
    };
    for (const auto& t : layout.tensors) {
        double diff = 0, na = 0, nf = 0;
        for (std::size_t i = t.offset; i < t.offset + t.size(); ++i) {
            const double x = w[i];
            const double fd = (8 * (loss_at(i, x + h) - loss_at(i, x - h)) - (loss_at(i, x + 2 * h) - loss_at(i, x - 2 * h))) / (12 * h);
            diff += (fd - g[i]) * (fd - g[i]);
            na += g[i] * g[i];
            nf += fd * fd;
        }
        const double scale = std::max(std::sqrt(na), std::sqrt(nf));
        out.push_back({t.name, scale > 0 ? std::sqrt(diff) / scale : 0.0, scale});
    }
    return out;
}

struct Case {
    std::string model;
    EigRange eig;
};

class GradientCheck : public ::testing::TestWithParam<Case> {};

TEST_P(GradientCheck, EveryTensorMatchesCentralDifferences) {
    const auto& [model, eig] = GetParam();
    const auto c = small_config(model, eig);
    for (auto label : {LabelMode::final_position, LabelMode::every_position}) {
        const Task task = parity_task(label);
        const Batch batch = sample_batch(task, 3, {2, 7}, 5, 1);  // ragged: padding is exercised
        for (const auto& e : check_gradients(c, batch, 11)) {
            EXPECT_LT(e.error, 1e-6) << model << " eig " << to_string(eig) << " label " << to_string(label) << " "
                                     << e.name << " (norm " << e.norm << ")";
            EXPECT_GT(e.norm, 0.0) << e.name << " gets no gradient";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllRecurrences, GradientCheck,
                         ::testing::Values(Case{"deltanet", EigRange::unit}, Case{"deltanet", EigRange::signed_unit},
                                           Case{"deltaproduct:2", EigRange::unit},
                                           Case{"deltaproduct:3", EigRange::signed_unit},
                                           Case{"mamba", EigRange::unit}, Case{"mamba", EigRange::signed_unit},
                                           Case{"lstm", EigRange::unit}),
                         [](const auto& info) {
                             std::string name = info.param.model + (info.param.eig == EigRange::unit ? "_01" : "_m11");
                             for (auto& ch : name)
                                 if (ch == ':') ch = '_';
                             return name;
                         });

TEST(GradientCheck, FindsAPlantedError) {
    // The check must be able to fail: perturb one entry of one tensor's gradient by 1e-4 of its norm.
    const auto c = small_config("deltanet", EigRange::signed_unit);
    const auto layout = parameter_layout(c);
    const Batch batch = sample_batch(parity_task(LabelMode::final_position), 3, {2, 7}, 5, 1);
    const auto& slot = layout.tensors[3];
    const auto errors = check_gradients(c, batch, 11, [&](std::vector<double>& g) { g[slot.offset] += 1e-3; });
    EXPECT_GT(errors[3].error, 1e-6) << slot.name;
}

TEST(Forward, FloatAgreesWithDouble) {
    for (const char* model : {"deltanet", "deltaproduct:2", "mamba", "lstm"}) {
        const auto c = small_config(model, EigRange::signed_unit);
        const auto layout = parameter_layout(c);
        const auto w = random_params(layout, 3);
        const std::vector<float> wf(w.begin(), w.end());
        const Batch batch = sample_batch(parity_task(LabelMode::every_position), 4, {5, 20}, 9, 2);
        Workspace<double> wsd;
        Workspace<float> wsf;
        const double ld = loss_and_gradient<double>(c, layout, w, batch, wsd, {});
        const double lf = loss_and_gradient<float>(c, layout, wf, batch, wsf, {});
        EXPECT_NEAR(ld, lf, 1e-4 * std::max(1.0, ld)) << model;
    }
}

TEST(Forward, PaddingDoesNotChangeRealPositions) {
    // The same word alone and padded inside a batch with a longer word gives the same logits.
    const auto c = small_config("deltaproduct:2", EigRange::signed_unit);
    const auto layout = parameter_layout(c);
    const auto w = random_params(layout, 4);
    const Task task = parity_task(LabelMode::every_position);
    Batch pair = sample_batch(task, 2, {3, 12}, 1, 7);
    pair.lengths = {4, std::int32_t(pair.length)};
    for (std::size_t t = 4; t < pair.length; ++t) pair.tokens[t] = 1;
    label_batch(task, pair);
    Batch single;
    single.batch = 1, single.length = 4;
    single.tokens.assign(pair.tokens.begin(), pair.tokens.begin() + 4);
    single.lengths = {4};
    label_batch(task, single);
    Workspace<double> a, b;
    forward<double>(c, layout, w, pair, a);
    forward<double>(c, layout, w, single, b);
    const auto za = logits(c, pair, a), zb = logits(c, single, b);
    for (std::size_t i = 0; i < 4 * c.classes; ++i) EXPECT_DOUBLE_EQ(za[i], zb[i]);
}

// The linear-attention recurrences stop at each word's length (Batch): past it their output is 0,
// so a padded position's logits depend on its own (padding) token only, not on the word before it
// (this fails where a recurrence runs on past the word); the loss and gradients are those of the
// word alone, up to the order of Eigen's sums. The LSTM runs to T: its padded logits do depend on
// the word.
TEST(Forward, RecurrencesStopAtTheWordsLength) {
    const Task task = parity_task(LabelMode::every_position);
    for (const char* model : {"deltanet", "deltaproduct:2", "mamba", "lstm"}) {
        const auto c = small_config(model, EigRange::signed_unit);
        const auto layout = parameter_layout(c);
        const auto w = random_params(layout, 5);
        Batch one = sample_batch(task, 2, {9, 9}, 3, 1);
        one.lengths = {9, 5};
        for (std::size_t t = 5; t < 9; ++t) one.tokens[9 + t] = 0;
        label_batch(task, one);
        Batch other = one;  // the second word's real letters flipped, its padding the same
        for (std::size_t t = 0; t < 5; ++t) other.tokens[9 + t] ^= 1;
        label_batch(task, other);
        Workspace<double> a, b;
        std::vector<double> ga(layout.total), gb(layout.total);
        loss_and_gradient<double>(c, layout, w, one, a, ga);
        loss_and_gradient<double>(c, layout, w, other, b, gb);
        const auto za = logits(c, one, a), zb = logits(c, other, b);
        bool padded_same = true, real_differ = false;
        for (std::size_t t = 0; t < 9; ++t)
            for (std::size_t k = 0; k < c.classes; ++k) {
                const std::size_t i = (9 + t) * c.classes + k;
                if (t >= 5) padded_same &= za[i] == zb[i];
                else real_differ |= za[i] != zb[i];
            }
        SCOPED_TRACE(model);
        EXPECT_TRUE(real_differ);
        EXPECT_EQ(padded_same, c.mixer != Mixer::lstm);
    }
    // The gradients of a padded word are those of the same word alone, for each recurrence.
    for (const char* model : {"deltanet", "deltaproduct:2", "mamba"}) {
        const auto c = small_config(model, EigRange::signed_unit);
        const auto layout = parameter_layout(c);
        const auto w = random_params(layout, 6);
        Batch padded = sample_batch(task, 1, {6, 6}, 4, 2);
        padded.length = 10, padded.tokens.resize(10, 1), padded.lengths = {6};
        label_batch(task, padded);
        Batch alone = sample_batch(task, 1, {6, 6}, 4, 2);
        label_batch(task, alone);
        Workspace<double> a, b;
        std::vector<double> ga(layout.total), gb(layout.total);
        const double la = loss_and_gradient<double>(c, layout, w, padded, a, ga);
        const double lb = loss_and_gradient<double>(c, layout, w, alone, b, gb);
        SCOPED_TRACE(model);
        EXPECT_NEAR(la, lb, 1e-13 * std::abs(lb));  // Eigen's products block 10 rows and 6 differently
        double diff = 0, norm = 0;
        for (std::size_t i = 0; i < ga.size(); ++i) diff += (ga[i] - gb[i]) * (ga[i] - gb[i]), norm += gb[i] * gb[i];
        EXPECT_LT(std::sqrt(diff / norm), 1e-13);
    }
}

TEST(Forward, BadWordLengthsAreRejected) {
    const auto c = small_config("deltanet", EigRange::signed_unit);
    const auto layout = parameter_layout(c);
    const auto w = random_params(layout, 7);
    const Task task = parity_task(LabelMode::every_position);
    Workspace<double> ws;
    Batch batch = sample_batch(task, 2, {4, 6}, 5, 1);
    Batch too_long = batch;
    too_long.lengths[1] = std::int32_t(batch.length + 1);
    EXPECT_THROW(forward<double>(c, layout, w, too_long, ws), InputError);
    Batch too_few = batch;
    too_few.lengths.pop_back();
    EXPECT_THROW(forward<double>(c, layout, w, too_few, ws), InputError);
    Batch label_past = batch;
    label_past.lengths[0] = 2;  // word 0 keeps its labels at positions 2 and up
    EXPECT_THROW(loss_and_gradient<double>(c, layout, w, label_past, ws, {}), InputError);
    Batch none = batch;  // no lengths: every word T long
    none.lengths.clear();
    EXPECT_NO_THROW(forward<double>(c, layout, w, none, ws));
    Batch short_targets = batch;
    short_targets.targets.pop_back();
    EXPECT_THROW(loss_and_gradient<double>(c, layout, w, short_targets, ws, {}), InputError);
    Batch no_targets = batch;  // a forward pass needs none, a loss does
    no_targets.targets.clear();
    EXPECT_NO_THROW(forward<double>(c, layout, w, no_targets, ws));
    EXPECT_THROW(loss_and_gradient<double>(c, layout, w, no_targets, ws, {}), InputError);
    Batch short_tokens = batch;
    short_tokens.tokens.pop_back();
    EXPECT_THROW(forward<double>(c, layout, w, short_tokens, ws), InputError);
}

TEST(Forward, TrainingAndInferenceModesAgree) {
    const auto c = small_config("mamba", EigRange::signed_unit);
    const auto layout = parameter_layout(c);
    const auto w = random_params(layout, 4);
    const Batch batch = sample_batch(parity_task(LabelMode::every_position), 3, {5, 9}, 2, 3);
    Workspace<double> ws;
    std::vector<double> g(layout.total);
    const double train_loss = loss_and_gradient<double>(c, layout, w, batch, ws, g);
    const double eval_loss = loss_and_gradient<double>(c, layout, w, batch, ws, {});
    EXPECT_DOUBLE_EQ(train_loss, eval_loss);
}

}  // namespace
}  // namespace statetrack::gpu
