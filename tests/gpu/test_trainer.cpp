// The trainer: tasks, schedule, checkpoints, bit-identical resume, divergence, evaluation, spectra.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/gpu/cuda_backend.hpp"
#include "statetrack/gpu/spectra.hpp"
#include "statetrack/gpu/trainer.hpp"
#include "scratch_dir.hpp"

namespace statetrack::gpu {
namespace {

namespace fs = std::filesystem;

automata::Dfa parity_dfa() { return automata::zoo("parity"); }

automata::Dfa mod3_dfa() {  // counts the letter "a" modulo 3; "b" keeps the state
    auto dfa = automata::make_dfa(3, {"a", "b"}, "mod3");
    for (automata::State q = 0; q < 3; ++q) dfa.next(q, 0) = (q + 1) % 3;
    dfa.accepting[0] = true;
    return dfa;
}

fs::path fresh_dir(const std::string& name) { return statetrack::testing::fresh_scratch_dir("test_trainer_" + name); }

TrainOptions tiny_options(const std::string& model, const fs::path& out) {
    TrainOptions o;
    parse_model_name(model, o.model);
    o.model.layers = 2, o.model.d_model = 8, o.model.heads = 2;
    o.batch = 4, o.steps = 12, o.eval_every = 4, o.eval_words = 2;
    o.train_len = {2, 9}, o.test_len = {10, 12};
    o.adamw.lr = 1e-2;
    o.out_dir = out.string();
    o.progress = false;
    return o;
}

TEST(Task, WordsAreReproducibleInRangeAndLabelledByTheDfa) {
    const Task task{mod3_dfa(), "mod3", LabelMode::every_position, Target::state};
    const Batch a = sample_batch(task, 50, {3, 9}, 7, 2), b = sample_batch(task, 50, {3, 9}, 7, 2);
    const Batch c = sample_batch(task, 50, {3, 9}, 7, 3);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_NE(a.tokens, c.tokens);
    std::set<std::int32_t> lengths;
    for (std::size_t i = 0; i < a.batch; ++i) {
        const auto len = std::size_t(a.lengths[i]);
        lengths.insert(a.lengths[i]);
        ASSERT_GE(len, 3u);
        ASSERT_LE(len, 9u);
        for (std::size_t t = 0; t < a.length; ++t) {
            const std::int32_t label = a.targets[i * a.length + t];
            if (t >= len) {
                EXPECT_EQ(label, -1);
                continue;
            }
            std::vector<automata::Letter> prefix(a.tokens.begin() + long(i * a.length), a.tokens.begin() + long(i * a.length + t + 1));
            EXPECT_EQ(label, std::int32_t(automata::run(task.dfa, prefix)));
        }
    }
    EXPECT_EQ(lengths.size(), 7u);  // every length of the range occurs in 50 words
    // final labels: one per word, the accept bit
    const Task final_task{mod3_dfa(), "mod3", LabelMode::final_position, Target::accept};
    const Batch f = sample_batch(final_task, 20, {1, 5}, 1, 1);
    EXPECT_EQ(labelled_positions(f), 20u);
}

TEST(Task, LengthRangesAreParsedAndCheckedAsInputs) {
    EXPECT_EQ(parse_length_range("3:40", "--train-len").max, 40u);
    EXPECT_EQ(parse_length_range("7", "--train-len").min, 7u);
    for (const char* bad : {"", "a:3", "5:3", "0:4", "3:", "3:4:5", "1:99999999"})
        EXPECT_THROW(parse_length_range(bad, "--test-len"), InputError) << bad;
}

// A task read back from a checkpoint header is held to the DFA readers' table limit before its
// table is allocated: 2^28 / letters states are the most, one more is a LimitError naming
// /task/dfa/states; no states or no letters are refused too.
TEST(Task, CheckpointTaskDfaSizeIsLimitedBeforeAllocation) {
    const Task task{parity_dfa(), "parity", LabelMode::final_position, Target::accept};
    const nlohmann::json good = task_to_json(task);
    EXPECT_EQ(task_from_json(good, "t").dfa.num_states(), task.dfa.num_states());
    const std::size_t letters = task.dfa.num_letters(), most = automata::max_table_entries / letters;
    auto with_states = [&](std::size_t states) {
        nlohmann::json j = good;
        j["dfa"]["states"] = states;
        return j;
    };
    try {
        task_from_json(with_states(most + 1), "big.ckpt");
        FAIL() << "one state beyond the limit must be refused";
    } catch (const LimitError& e) {
        EXPECT_NE(std::string(e.what()).find("/task/dfa/states"), std::string::npos) << e.what();
    }
    // at the limit the size is accepted, and the file is refused only for its short transition table
    try {
        task_from_json(with_states(most), "at-limit.ckpt");
        FAIL() << "the transition rows do not match the states";
    } catch (const LimitError& e) {
        FAIL() << "at the limit is not over it: " << e.what();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/task/dfa/transitions"), std::string::npos) << e.what();
    }
    EXPECT_THROW(task_from_json(with_states(0), "zero.ckpt"), InputError);
    EXPECT_THROW(task_from_json(with_states(3333333333333333), "fuzz.ckpt"), LimitError);
    nlohmann::json no_letters = good;
    no_letters["dfa"]["alphabet"] = nlohmann::json::array();
    EXPECT_THROW(task_from_json(no_letters, "empty.ckpt"), InputError);
}

TEST(Schedule, WarmupThenCosineToMinimum) {
    AdamWOptions o;
    o.lr = 1e-2;
    EXPECT_DOUBLE_EQ(learning_rate(o, 0, 100), 1e-3);   // 1/10 of the way up
    EXPECT_DOUBLE_EQ(learning_rate(o, 9, 100), 1e-2);   // end of the 10% warm-up
    EXPECT_DOUBLE_EQ(learning_rate(o, 99, 100), 1e-6);  // cosine down to 1e-6 at the last step
    EXPECT_GT(learning_rate(o, 40, 100), learning_rate(o, 60, 100));
}

TEST(Model, BadHyperparametersAreInputErrors) {
    ModelConfig c;
    c.d_model = 10, c.heads = 3;
    EXPECT_THROW(validate(c), InputError);
    c.heads = 2;
    EXPECT_NO_THROW(validate(c));
    EXPECT_THROW(parse_model_name("transformer", c), InputError);
    EXPECT_THROW(parse_model_name("deltaproduct:0", c), InputError);
    EXPECT_THROW(parse_model_name("deltaproduct:x", c), InputError);
    EXPECT_THROW(parse_eig_range("0,2"), InputError);
}

TEST(Model, LayoutTilesTheBufferWithoutGaps) {
    ModelConfig c;
    parse_model_name("deltaproduct:2", c);
    c.layers = 2, c.d_model = 8, c.heads = 2;
    const auto layout = parameter_layout(c);
    std::size_t at = 0;
    for (const auto& t : layout.tensors) {
        EXPECT_EQ(t.offset, at) << t.name;
        at += t.size();
    }
    EXPECT_EQ(at, layout.total);
    EXPECT_EQ(layout.tensors[std::size_t(std::find_if(layout.tensors.begin(), layout.tensors.end(),
                                                       [](const auto& t) { return t.name == "layers.1.wk"; }) -
                                          layout.tensors.begin())]
                  .rows,
              16u);
}


// The CUDA backend's order: the gate projection right after wv, so that [wq; wk; wv; gate] is one
// matrix, then rows of no tensor up to projection_rows (a multiple of 8); every other tensor in its
// order, and reorder_parameters a permutation both ways that leaves the padding rows alone;
// first_nonzero_padding finds what is there.
TEST(Model, DeviceOrderPutsTheGateAfterTheValuesAndReordersBothWays) {
    // deltaproduct:2 at d 8 with 2 heads: 44 rows, padded to 48; deltanet at d 128 with 4 heads (the
    // paper's): 388 -> 392; mamba: 32 rows, no padding
    struct Case { const char* mixer; std::size_t d, heads, padded; };
    for (const Case& k : {Case{"deltaproduct:2", 8, 2, 48}, Case{"deltanet", 128, 4, 392}, Case{"mamba", 8, 2, 32}}) {
        const char* mixer = k.mixer;
        ModelConfig c;
        parse_model_name(mixer, c);
        c.layers = 2, c.d_model = k.d, c.heads = k.heads;
        const auto canonical = parameter_layout(c), device = parameter_layout(c, GateSlot::after_values);
        const std::size_t F = c.factors, d = c.d_model, gate_rows = c.mixer == Mixer::mamba ? d : F * c.heads;
        const std::size_t rows = (1 + 2 * F) * d + gate_rows;
        ASSERT_EQ(projection_rows(c), k.padded) << mixer;
        ASSERT_EQ(device.total, canonical.total + c.layers * (k.padded - rows) * d) << mixer;
        ASSERT_EQ(device.tensors.size(), canonical.tensors.size()) << mixer;
        for (std::size_t l = 0; l < c.layers; ++l) {
            const LayerSlots &a = canonical.layers[l], &b = device.layers[l];
            const std::size_t gate = c.mixer == Mixer::mamba ? b.wdt : b.wbeta;
            EXPECT_EQ(b.wq, a.wq + l * (k.padded - rows) * d) << mixer << ": after the layers below's padding";
            EXPECT_EQ(gate, b.wq + (1 + 2 * F) * d * d) << mixer << ": the gate follows wv";
            EXPECT_EQ(b.conv_q, b.wq + k.padded * d) << mixer << ": after the padding rows";
            EXPECT_EQ(b.onorm, a.onorm + (l + 1) * (k.padded - rows) * d) << mixer << ": the layer's other tensors in order";
        }
        std::vector<float> values(canonical.total), there(device.total, -7.0f), back(canonical.total, -1.0f);
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(i);
        reorder_parameters(canonical, values, device, there);
        for (std::size_t l = 0; l < c.layers; ++l) {  // the padding rows alone keep what was there
            const std::size_t first = device.layers[l].wq + rows * d, end = device.layers[l].wq + k.padded * d;
            for (std::size_t i = first; i < end; ++i) EXPECT_EQ(there[i], -7.0f) << mixer << " at " << i;
        }
        EXPECT_EQ(std::size_t(std::count(there.begin(), there.end(), -7.0f)), device.total - canonical.total) << mixer;
        for (const auto& t : device.tensors) {
            const auto same = std::find_if(canonical.tensors.begin(), canonical.tensors.end(),
                                           [&](const auto& u) { return u.name == t.name; });
            ASSERT_NE(same, canonical.tensors.end());
            EXPECT_EQ(there[t.offset], float(same->offset)) << t.name;
            EXPECT_EQ(there[t.offset + t.size() - 1], float(same->offset + t.size() - 1)) << t.name;
        }
        reorder_parameters(device, there, canonical, back);
        EXPECT_EQ(back, values) << mixer;
        // first_nonzero_padding: the padding rows' -7 is found; zeros there (and anything in the
        // tensors) pass; a NaN in the last layer's padding is found too
        const std::size_t first_pad = device.layers[0].wq + rows * d;
        EXPECT_EQ(first_nonzero_padding(device, there), k.padded == rows ? device.total : first_pad) << mixer;
        std::vector<float> zeros_there(device.total, 0.0f);
        reorder_parameters(canonical, values, device, zeros_there);
        EXPECT_EQ(first_nonzero_padding(device, zeros_there), device.total) << mixer;
        EXPECT_EQ(first_nonzero_padding(canonical, values), canonical.total) << mixer << ": no padding at all";
        if (k.padded != rows) {
            const std::size_t last_pad = device.layers.back().wq + k.padded * d - 1;
            zeros_there[last_pad] = NAN;
            EXPECT_EQ(first_nonzero_padding(device, zeros_there), last_pad) << mixer;
        }
        EXPECT_THROW(first_nonzero_padding(device, std::vector<float>(device.total + 1)), std::invalid_argument);
        std::vector<float> short_buffer(canonical.total - 1);
        EXPECT_THROW(reorder_parameters(canonical, values, device, short_buffer), std::invalid_argument);
    }
}
void expect_same_run(const Checkpoint& a, const Checkpoint& b) {
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.params, b.params);  // bit-identical
    EXPECT_EQ(a.m, b.m);
    EXPECT_EQ(a.v, b.v);
    ASSERT_EQ(a.history.size(), b.history.size());
    for (std::size_t i = 0; i < a.history.size(); ++i) {
        EXPECT_EQ(a.history[i]["train_loss"], b.history[i]["train_loss"]);
        EXPECT_EQ(a.history[i]["eval"], b.history[i]["eval"]);
    }
}

TEST(Trainer, ResumeContinuesBitIdentically) {
    const Task task{parity_dfa(), "parity", LabelMode::final_position, Target::accept};
    for (Precision precision : {Precision::fp32, Precision::fp64})
        for (const char* model : {"deltanet", "mamba", "lstm"}) {
            const auto straight = fresh_dir("straight"), split = fresh_dir("split");
            TrainOptions o = tiny_options(model, straight);
            o.precision = precision;
            train(task, o, nullptr);
            o.out_dir = split.string();
            o.stop_at = 8;
            train(task, o, nullptr);
            EXPECT_EQ(read_checkpoint((split / "checkpoint.bin").string()).step, 8u);
            o.stop_at = 0;
            o.resume = true;
            train(task, o, nullptr);
            expect_same_run(read_checkpoint((straight / "checkpoint.bin").string()),
                            read_checkpoint((split / "checkpoint.bin").string()));
            // a different seed gives different weights: the comparison above can fail
            const auto other = fresh_dir("other");
            o.out_dir = other.string(), o.resume = false, o.seed = 2;
            train(task, o, nullptr);
            EXPECT_NE(read_checkpoint((straight / "checkpoint.bin").string()).params,
                      read_checkpoint((other / "checkpoint.bin").string()).params);
        }
}

// The trainer begins each step while the one before runs, except across an evaluation. With an
// evaluation after every step no two steps are ever in flight: the weights must come out the same,
// to the bit, as with evaluations every 4 steps (up to two in flight), on the CPU and, where there is
// one, on the GPU (with its resume across the pipeline's boundary).
TEST(Trainer, StepsBegunAheadTrainAsStepsOneAtATime) {
    const Task task{parity_dfa(), "parity", LabelMode::final_position, Target::accept};
    std::vector<Device> devices{Device::cpu};
    if (cuda_available()) devices.push_back(Device::cuda);
    for (Device device : devices)
        for (const char* model : {"deltanet", "mamba"}) {
            SCOPED_TRACE(std::string(model) + (device == Device::cuda ? " cuda" : " cpu"));
            const auto ahead = fresh_dir("ahead"), one = fresh_dir("one"), split = fresh_dir("split");
            TrainOptions o = tiny_options(model, ahead);
            // evaluations at steps 4, 8 and 10; head_dim 32 on the GPU: its chunked delta rule
            o.device = device, o.model.d_model = device == Device::cuda ? 64 : 16, o.steps = 10, o.eval_every = 4;
            train(task, o, nullptr);
            const Checkpoint a = read_checkpoint((ahead / "checkpoint.bin").string());
            o.out_dir = one.string(), o.eval_every = 1;
            train(task, o, nullptr);
            const Checkpoint b = read_checkpoint((one / "checkpoint.bin").string());
            EXPECT_EQ(a.step, 10u);
            EXPECT_EQ(a.params, b.params);
            EXPECT_EQ(a.m, b.m);
            EXPECT_EQ(a.v, b.v);
            EXPECT_EQ(a.history.back()["eval"], b.history.back()["eval"]);
            o.out_dir = split.string(), o.eval_every = 4, o.stop_at = 8;
            train(task, o, nullptr);
            o.stop_at = 0, o.resume = true;
            train(task, o, nullptr);
            expect_same_run(a, read_checkpoint((split / "checkpoint.bin").string()));
        }
}

// --cuda-words padded runs every word on T rows, as before words were packed: the same gradients to
// rounding, every step on the padded rows (summary.json's packed_steps), recorded in the checkpoint,
// and a resume that asks for packed words is refused by name.
TEST(Trainer, CudaWordsPaddedIsARecordedOptionOfTheRun) {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    const Task task{parity_dfa(), "parity", LabelMode::final_position, Target::accept};
    const auto packed = fresh_dir("words_packed"), padded = fresh_dir("words_padded");
    TrainOptions o = tiny_options("deltanet", packed);
    // head_dim 32, and 32 words of lengths 3-40: their rows (~700, rounded up to a multiple of 256)
    // are fewer than B T = 1280, so the steps pack
    o.device = Device::cuda, o.model.d_model = 64, o.batch = 32, o.train_len = {3, 40};
    // AdamW moves a weight whose gradient is rounding noise by the learning rate either way: at 1e-6
    // the two runs' weights stay together, and their gradient moments m (0.1 g the first step)
    // compare the gradients themselves
    o.steps = 4, o.eval_every = 2, o.adamw.lr = 1e-6;
    EXPECT_EQ(train(task, o, nullptr).at("packed_steps"), 4);
    o.out_dir = padded.string(), o.cuda_packed = false, o.stop_at = 2;
    EXPECT_EQ(train(task, o, nullptr).at("packed_steps"), 0);
    const std::string path = (padded / "checkpoint.bin").string();
    EXPECT_FALSE(read_checkpoint(path).options.cuda_packed);
    o.stop_at = 0, o.resume = true, o.cuda_packed = true;
    try {
        train(task, o, nullptr);
        ADD_FAILURE() << "a padded run resumed with packed words";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("cuda_words"), std::string::npos) << e.what();
    }
    o.cuda_packed = false;
    EXPECT_EQ(train(task, o, nullptr).at("packed_steps"), 0);
    const Checkpoint a = read_checkpoint((packed / "checkpoint.bin").string()), b = read_checkpoint(path);
    ASSERT_EQ(b.step, 4u);
    ASSERT_EQ(a.m.size(), b.m.size());
    double largest = 0, worst = 0;
    for (std::size_t i = 0; i < a.m.size(); ++i)
        largest = std::max(largest, std::abs(a.m[i])), worst = std::max(worst, std::abs(a.m[i] - b.m[i]));
    EXPECT_GT(largest, 0.0);
    EXPECT_LT(worst, 1e-3 * largest) << "packed and padded words gave different gradients";
}

TEST(Trainer, WritesMetricsSummaryAndAnEvaluableCheckpoint) {
    const Task task{mod3_dfa(), "mod3", LabelMode::every_position, Target::state};
    const auto out = fresh_dir("outputs");
    const auto summary = train(task, tiny_options("deltaproduct:2", out), nullptr);
    std::istringstream lines(read_text_file((out / "metrics.jsonl").string()));
    std::vector<nlohmann::json> records;
    for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(records.size(), 3u);  // steps 4, 8, 12
    EXPECT_EQ(records.back()["step"], 12);
    EXPECT_EQ(records.back()["eval"]["per_length"].size(), 3u);
    EXPECT_DOUBLE_EQ(records.back()["eval"]["chance"].get<double>(), 1.0 / 3);
    const auto saved = nlohmann::json::parse(read_text_file((out / "summary.json").string()));
    EXPECT_EQ(saved["final"], records.back()["eval"]);
    // the wall time's parts: three evaluations and three checkpoints took some of it, not more
    EXPECT_GT(saved["evaluation_s"].get<double>(), 0.0);
    EXPECT_GT(saved["checkpoint_s"].get<double>(), 0.0);
    EXPECT_LT(saved["evaluation_s"].get<double>() + saved["checkpoint_s"].get<double>(), saved["wall_s"].get<double>());
    EXPECT_EQ(saved["spectra"].size(), 4u);  // 2 layers x 2 heads
    // eval from the checkpoint reproduces the last evaluation
    const Checkpoint c = read_checkpoint((out / "checkpoint.bin").string());
    const Evaluation e = evaluate(c, {10, 12}, 2);
    EXPECT_EQ(evaluation_to_json(e, true), records.back()["eval"]);
}

TEST(Trainer, DivergenceStopsAndKeepsTheLastGoodCheckpoint) {
    const Task task{parity_dfa(), "parity", LabelMode::final_position, Target::accept};
    const auto out = fresh_dir("diverge");
    TrainOptions o = tiny_options("deltanet", out);
    o.adamw.lr = 1e30, o.adamw.weight_decay = 0, o.eval_every = 1;
    try {
        train(task, o, nullptr);
        FAIL() << "a learning rate of 1e30 must diverge";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("diverged"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("last good checkpoint (step 1)"), std::string::npos) << e.what();
    }
    const Checkpoint kept = read_checkpoint((out / "checkpoint.bin").string());
    EXPECT_EQ(kept.step, 1u);
    for (double w : kept.params) ASSERT_TRUE(std::isfinite(w));
}

// The evaluations' files are written beside the steps that follow; a write that fails still stops
// the run with an error naming the file (here best.bin cannot replace a folder of that name), and
// the files written before it are whole.
TEST(Trainer, AFailedCheckpointWriteStopsTheRun) {
    const Task task{parity_dfa(), "parity", LabelMode::final_position, Target::accept};
    const auto out = fresh_dir("unwritable");
    fs::create_directories(out / "best.bin" / "inside");
    TrainOptions o = tiny_options("deltanet", out);
    try {
        train(task, o, nullptr);
        FAIL() << "best.bin is a folder: the run must stop";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("best.bin"), std::string::npos) << e.what();
    }
    EXPECT_EQ(read_checkpoint((out / "checkpoint.bin").string()).step, 4u);  // the first evaluation's
    EXPECT_FALSE(fs::exists(out / "summary.json"));
    for (const auto& entry : fs::directory_iterator(out))  // no temporary file left behind
        EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

// A finished 4-step parity run in a fresh folder `name`; returns its options (out_dir included).
TrainOptions four_step_parity_run(const std::string& name) {
    const Task task{parity_dfa(), "parity", LabelMode::final_position, Target::accept};
    TrainOptions o = tiny_options("deltanet", fresh_dir(name));
    o.steps = 4;
    train(task, o, nullptr);
    return o;
}

// The CUDA backend's paths are options a resume must keep (they round differently): the
// recurrences' (chunked or step by step) and the words' rows (packed or padded). Each is stored for
// CUDA runs ("none" for the CPU, which has one path), read back, defaulting to the first path in
// checkpoints written before the option existed, and refused by name when misspelt.
TEST(Checkpoint, CudaPathsAreStoredAndReadBack) {
    struct Option {
        const char* key;
        bool TrainOptions::*on;
        const char *yes, *no, *misspelt;
    };
    for (const Option& option : {Option{"cuda_recurrences", &TrainOptions::cuda_chunked, "chunked", "steps", "fast"},
                                 Option{"cuda_words", &TrainOptions::cuda_packed, "packed", "padded", "squeezed"}}) {
        SCOPED_TRACE(option.key);
        TrainOptions o;
        EXPECT_EQ(options_to_json(o).at(option.key), "none");
        o.device = Device::cuda;
        EXPECT_EQ(options_to_json(o).at(option.key), option.yes);
        o.*option.on = false;
        auto json = options_to_json(o);
        EXPECT_EQ(json.at(option.key), option.no);
        EXPECT_FALSE(options_from_json(json, "test").*option.on);
        json.erase(option.key);
        EXPECT_TRUE(options_from_json(json, "test").*option.on);
        json[option.key] = option.misspelt;
        EXPECT_THROW(options_from_json(json, "test"), InputError);
    }
}

TEST(Checkpoint, CorruptTruncatedOrMismatchedCheckpointsAreRefused) {
    const Task task{parity_dfa(), "parity", LabelMode::final_position, Target::accept};
    TrainOptions o = four_step_parity_run("corrupt");
    const fs::path out = o.out_dir;
    const std::string path = (out / "checkpoint.bin").string();
    const std::string good = read_text_file(path);
    EXPECT_NO_THROW(decode_checkpoint(good, path));
    std::string flipped = good;
    flipped[flipped.size() / 2] ^= 0x10;
    EXPECT_THROW(decode_checkpoint(flipped, path), InputError);
    EXPECT_THROW(decode_checkpoint(good.substr(0, good.size() - 100), path), InputError);
    EXPECT_THROW(decode_checkpoint("{\"format\": 1}", path), InputError);
    EXPECT_THROW(decode_checkpoint("", path), InputError);
    // resume with other settings or another task
    o.resume = true;
    o.adamw.lr = 5e-3;
    try {
        train(task, o, nullptr);
        FAIL() << "resume with another learning rate must be refused";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("lr"), std::string::npos) << e.what();
    }
    o.adamw.lr = 1e-2;
    const Task other{mod3_dfa(), "mod3", LabelMode::final_position, Target::accept};
    EXPECT_THROW(train(other, o, nullptr), InputError);
    EXPECT_THROW(read_checkpoint((out / "missing.bin").string()), InputError);
}

// A checkpoint whose checksum is right but whose evaluation history `train --resume` could not read
// (edited by hand, or written by another tool) is refused when it is loaded, naming the record.
TEST(Checkpoint, MalformedHistoryIsRefusedAtLoad) {
    const fs::path out = four_step_parity_run("history").out_dir;
    const Checkpoint good = read_checkpoint((out / "checkpoint.bin").string());
    ASSERT_FALSE(good.history.empty());
    EXPECT_NO_THROW(decode_checkpoint(encode_checkpoint(good), "good"));
    const auto refused_at = [&](nlohmann::json history) {
        Checkpoint bad = good;
        bad.history = std::move(history);
        try {
            decode_checkpoint(encode_checkpoint(bad), "bad.ckpt");
        } catch (const InputError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    nlohmann::json float_step = good.history;
    float_step[0]["step"] = 6.7e58;  // a float beyond size_t: undefined behaviour if converted
    EXPECT_NE(refused_at(float_step).find("/history/0"), std::string::npos) << refused_at(float_step);
    nlohmann::json no_eval = good.history;
    no_eval.back().erase("eval");
    EXPECT_NE(refused_at(no_eval).find("/eval"), std::string::npos) << refused_at(no_eval);
    nlohmann::json text_accuracy = good.history;
    text_accuracy[0]["eval"]["scaled_accuracy"] = "high";
    EXPECT_NE(refused_at(text_accuracy).find("/history/0/eval"), std::string::npos);
    EXPECT_NE(refused_at(nlohmann::json::array({1, 2})).find("/history/0"), std::string::npos);
    EXPECT_NE(refused_at(nlohmann::json::object()).find("/history"), std::string::npos);
}

TEST(Spectra, EigenvaluesStayInTheRangeOfEachModel) {
    const Task task{parity_dfa(), "parity", LabelMode::final_position, Target::accept};
    for (const char* model : {"deltanet", "deltaproduct:3", "mamba"})
        for (EigRange eig : {EigRange::unit, EigRange::signed_unit}) {
            ModelConfig c;
            parse_model_name(model, c);
            c.eig = eig, c.layers = 1, c.d_model = 8, c.heads = 2;
            const auto layout = parameter_layout(c);
            std::vector<double> w(layout.total);
            init_parameters<double>(c, layout, 3, w);
            Workspace<double> ws;
            const Batch batch = sample_batch(task, 4, {5, 9}, 1, 1);
            const auto spectra = learned_spectra<double>(c, layout, w, batch, ws);
            ASSERT_EQ(spectra.size(), 2u);
            for (const auto& s : spectra) {
                EXPECT_GT(s.count, 0u);
                EXPECT_LE(s.max_modulus, 1 + 1e-12) << model;
                EXPECT_GE(s.min_real, eig == EigRange::unit && c.factors <= 2 ? -1e-12 : -1 - 1e-12) << model;
                // [0,1] with at most two factors: real eigenvalues in [0,1] (PAPER.md, Proposition 1).
                // Three factors can give negative real parts (Spectra.ThreeProjectionsCanGiveANegativeEigenvalue),
                // so for deltaproduct:3 only the modulus bound is a theorem.
                if (eig == EigRange::unit && c.factors <= 2) {
                    EXPECT_EQ(s.fraction_negative, 0.0) << model;
                }
            }
        }
}

TEST(Spectra, DeltaProductEigenvaluesAreBoundedAndCanBeComplex) {
    // Two GH factors in general position restricted to span(k_1, k_2): a 2x2 block whose
    // eigenvalues may be a complex pair, always of modulus <= 1 (PAPER.md, Proposition 1).
    const Task task{parity_dfa(), "parity", LabelMode::final_position, Target::accept};
    ModelConfig c;
    parse_model_name("deltaproduct:2", c);
    c.eig = EigRange::signed_unit, c.layers = 1, c.d_model = 4, c.heads = 1;
    const auto layout = parameter_layout(c);
    std::vector<double> w(layout.total);
    init_parameters<double>(c, layout, 5, w);
    Workspace<double> ws;
    const Batch batch = sample_batch(task, 2, {4, 6}, 2, 2);
    std::size_t complex_pairs = 0, total = 0;
    transition_eigenvalues<double>(c, layout, w, batch, ws, [&](std::size_t, std::size_t, std::complex<double> z) {
        total += 1;
        complex_pairs += std::abs(z.imag()) > 1e-9;
        EXPECT_LE(std::abs(z), 1 + 1e-12);
    });
    EXPECT_GT(total, 0u);
    // two reflections of beta in (0, 2) in general position give a complex pair: the [-1,1] model can rotate
    EXPECT_GT(complex_pairs, 0u);
}

}  // namespace
}  // namespace statetrack::gpu
