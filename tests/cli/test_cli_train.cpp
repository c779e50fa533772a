// End-to-end: `statetrack train` and `statetrack eval` as a user runs them, including bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "run_statetrack.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;

using Result = statetrack::testing::CliOutcome;
const auto slurp = statetrack::testing::read_text;

Result run(const std::string& args) { return statetrack::testing::run_statetrack(args, fs::temp_directory_path()); }

fs::path fresh_dir(const std::string& name) { return statetrack::testing::fresh_scratch_dir("cli_train_" + name); }

const std::string tiny = " --d-model 8 --heads 2 --batch 4 --steps 6 --eval-every 3 --eval-words 2 --train-len 2:6 --test-len 7:8 --quiet";

TEST(CliTrain, TrainsEvaluatesAndResumes) {
    const auto out = fresh_dir("ok");
    const Result use = run("train --task zoo:parity --json --out " + out.string() + tiny);
    ASSERT_EQ(use.code, 0) << use.err;
    const auto summary = nlohmann::json::parse(use.out);
    EXPECT_EQ(summary["steps"], 6);
    EXPECT_EQ(summary["final"]["per_length"].size(), 2u);
    EXPECT_TRUE(fs::exists(out / "summary.json"));
    EXPECT_TRUE(fs::exists(out / "metrics.jsonl"));

    const Result e = run("eval " + (out / "checkpoint.bin").string() + " --test-len 7:8 --eval-words 2 --json");
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_EQ(nlohmann::json::parse(e.out)["accuracy"], summary["final"]["accuracy"]);

    const Result human = run("eval " + (out / "checkpoint.bin").string() + " --test-len 5:6");
    EXPECT_EQ(human.code, 0) << human.err;
    EXPECT_NE(human.out.find("scaled accuracy"), std::string::npos) << human.out;
}

TEST(CliTrain, StopAndResumeGiveTheSameCheckpoint) {
    const auto a = fresh_dir("straight"), b = fresh_dir("split");
    ASSERT_EQ(run("train --task zoo:parity --out " + a.string() + tiny).code, 0);
    ASSERT_EQ(run("train --task zoo:parity --stop-at 3 --out " + b.string() + tiny).code, 0);
    const Result resumed = run("train --task zoo:parity --resume --out " + b.string() + tiny);
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    // weights and moments (everything after the JSON header, whose metrics carry wall times) agree
    const std::string x = slurp(a / "checkpoint.bin"), y = slurp(b / "checkpoint.bin");
    ASSERT_GT(x.size(), 64u);
    const auto header_end = [](const std::string& s) {
        std::uint64_t n;
        std::memcpy(&n, s.data() + 24, 8);
        return 32 + n;
    };
    EXPECT_EQ(x.substr(header_end(x), x.size() - 8 - header_end(x)), y.substr(header_end(y), y.size() - 8 - header_end(y)));
}

TEST(CliTrain, BadInputIsExitCodeTwoWithOneLine) {
    const auto out = fresh_dir("bad");
    const std::string o = " --out " + out.string();
    struct Case {
        std::string args, says;
    } cases[] = {
        {"train --task /nonexistent/dfa.json" + o, "no such file"},
        {"train --task zoo:parity --model transformer" + o, "unknown model"},
        {"train --task zoo:parity --model deltaproduct:0" + o, "deltaproduct:N"},
        {"train --task zoo:parity --device tpu" + o, "unknown device"},
        // no GPU here (CI): "no usable CUDA device", or "built without the CUDA backend" without nvcc
        {"train --task zoo:parity --device cuda" + o, "CUDA"},
        {"train --task zoo:parity --device cuda --precision fp64" + o, "fp32 only"},
        {"train --task zoo:parity --device cuda --cuda-device -1" + o, "GPU index"},
        {"train --task zoo:parity --device cuda --matmul bf8" + o, "fp32, tf32 or bf16"},
        {"train --task zoo:parity --device cuda --cuda-recurrences fast" + o, "chunked or steps"},
        {"train --task zoo:parity --device cuda --cuda-words squeezed" + o, "packed or padded"},
        {"train --task zoo:parity --d-model 10 --heads 3" + o, "not divisible"},
        {"train --task zoo:parity --eig 0,2" + o, "eigenvalue range"},
        {"train --task zoo:parity --train-len 9:3" + o, "empty range"},
        {"train --task zoo:parity --label sometimes" + o, "label mode"},
        {"train --task zoo:parity --lr -1" + o, "learning rate"},
        {"train --task zoo:parity --batch 0" + o, "batch"},
        {"eval /nonexistent/checkpoint.bin", "no such file"},
    };
    for (const auto& c : cases) {
        const Result r = run(c.args);
        EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
}

TEST(CliTrain, DivergenceCorruptionAndMismatchAreExitCodeTwo) {
    const auto out = fresh_dir("diverge");
    const Result nan = run("train --task zoo:parity --lr 1e30 --weight-decay 0 --eval-every 1 --d-model 8 --heads 2 "
                           "--batch 4 --steps 6 --train-len 2:6 --test-len 7:8 --quiet --out " + out.string());
    EXPECT_EQ(nan.code, 2) << nan.err;
    EXPECT_NE(nan.err.find("diverged"), std::string::npos) << nan.err;
    EXPECT_NE(nan.err.find("last good checkpoint (step 1)"), std::string::npos) << nan.err;
    EXPECT_EQ(run("eval " + (out / "checkpoint.bin").string() + " --test-len 3:4").code, 0);

    const auto good = fresh_dir("mismatch");
    ASSERT_EQ(run("train --task zoo:parity --out " + good.string() + tiny).code, 0);
    const Result other = run("train --task zoo:parity --resume --lr 0.5 --out " + good.string() + tiny);
    EXPECT_EQ(other.code, 2);
    EXPECT_NE(other.err.find("cannot resume"), std::string::npos) << other.err;

    std::string bytes = slurp(good / "checkpoint.bin");
    bytes[bytes.size() / 2] ^= 1;
    std::ofstream(good / "corrupt.bin", std::ios::binary) << bytes;
    const Result corrupt = run("eval " + (good / "corrupt.bin").string());
    EXPECT_EQ(corrupt.code, 2);
    EXPECT_NE(corrupt.err.find("checksum"), std::string::npos) << corrupt.err;
}

}  // namespace
