// Training behaviour added with the CUDA work of issue 7: best.bin keeps the weights of the best
// evaluation (runs on the CPU reference, so it always runs; the trainer code is the same for both
// devices).
#include <gtest/gtest.h>

#include <filesystem>

#include "statetrack/automata/zoo.hpp"
#include "statetrack/gpu/trainer.hpp"
#include "scratch_dir.hpp"

namespace statetrack::gpu {
namespace {

namespace fs = std::filesystem;

TEST(BestCheckpoint, HoldsTheWeightsOfTheFirstBestEvaluation) {
    const fs::path out = statetrack::testing::fresh_scratch_dir("test_best_checkpoint");
    const Task task{automata::zoo("parity"), "zoo:parity", LabelMode::final_position, Target::accept};
    TrainOptions o;
    parse_model_name("deltanet", o.model);
    o.model.layers = 1, o.model.d_model = 8, o.model.heads = 1;
    o.batch = 8, o.steps = 60, o.eval_every = 5, o.eval_words = 4;
    o.train_len = {2, 6}, o.test_len = {7, 10};
    o.adamw.lr = 1e-1, o.adamw.clip = 1;
    o.seed = 7;  // scaled accuracy 0.125 ... 0.625 (step 45), 0.375 at the end
    o.out_dir = out.string();
    o.progress = false;
    const auto summary = train(task, o, nullptr);

    const Checkpoint last = read_checkpoint((out / "checkpoint.bin").string());
    ASSERT_EQ(last.history.size(), 12u);
    std::size_t best_at = 0;  // the first evaluation with the highest scaled accuracy
    for (std::size_t i = 1; i < last.history.size(); ++i)
        if (last.history[i]["eval"]["scaled_accuracy"].get<double>() >
            last.history[best_at]["eval"]["scaled_accuracy"].get<double>())
            best_at = i;
    const double best_accuracy = last.history[best_at]["eval"]["scaled_accuracy"].get<double>();
    const std::size_t best_step = last.history[best_at]["step"].get<std::size_t>();
    // The run is chosen so that the best is not the last evaluation (nor tied with it): a trainer
    // that wrote best.bin at every evaluation would fail the checks below.
    ASSERT_LT(last.history.back()["eval"]["scaled_accuracy"].get<double>(), best_accuracy);

    const Checkpoint best = read_checkpoint((out / "best.bin").string());
    EXPECT_EQ(best.step, best_step);
    EXPECT_EQ(best.history.size(), best_at + 1);
    EXPECT_EQ(summary["best_step"].get<std::size_t>(), best_step);
    EXPECT_EQ(summary["best_scaled_accuracy"].get<double>(), best_accuracy);
    // The weights are that evaluation's: evaluating them again on the same words gives its accuracy
    // (the CPU reference is deterministic), which the last weights do not.
    EXPECT_EQ(evaluate(best, o.test_len, o.eval_words).scaled_accuracy, best_accuracy);
    EXPECT_NE(evaluate(last, o.test_len, o.eval_words).scaled_accuracy, best_accuracy);
    fs::remove_all(out);
}

}  // namespace
}  // namespace statetrack::gpu
