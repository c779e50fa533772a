// End-to-end: `statetrack eval CHECKPOINT --export-word ... -o MODEL.json` on a tiny trained model:
// the file is a valid statetrack.lrnn/1 model that `statetrack run` replays; bad input exits 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "run_statetrack.hpp"
#include "scratch_dir.hpp"
#include "statetrack/lrnn/format.hpp"

namespace {

namespace fs = std::filesystem;
using statetrack::testing::run_statetrack;

class CliExport : public ::testing::Test {
protected:
    fs::path dir;
    void SetUp() override {
        dir = statetrack::testing::fresh_scratch_dir("cli_export", true);
    }
    void TearDown() override { fs::remove_all(dir); }
    // A few steps of a real training run: the export reads whatever weights the checkpoint holds.
    std::string train(const std::string& model) {
        const fs::path out = dir / model;
        const auto o = run_statetrack("train --task zoo:parity --model " + model +
                                          " --eig -1,1 --layers 1 --d-model 8 --heads 2 --batch 4 --steps 6 --seed 3"
                                          " --train-len 2:6 --test-len 7:8 --out '" + out.string() + "'",
                                      dir);
        EXPECT_EQ(o.code, 0) << o.err;
        return (out / "checkpoint.bin").string();
    }
};

TEST_F(CliExport, WritesAModelThatRunReplays) {
    const std::string ckpt = train("deltaproduct:2");
    const fs::path model = dir / "m.json";
    auto o = run_statetrack("eval '" + ckpt + "' --export-word '1 0 1' -o '" + model.string() + "' --json", dir);
    ASSERT_EQ(o.code, 0) << o.err;
    const auto report = nlohmann::json::parse(o.out);
    EXPECT_EQ(report["positions"], 3);
    EXPECT_EQ(report["word"], "1 0 1");
    ASSERT_EQ(report["layers"].size(), 2u);
    EXPECT_EQ(report["layers"][1]["head"], 1);
    const auto net = statetrack::lrnn::load_network(model.string());
    EXPECT_EQ(net.construction, "trained");
    ASSERT_EQ(net.layers.size(), 2u);
    EXPECT_EQ(net.layers[0].dim, 16u);
    EXPECT_EQ(net.layers[0].transitions[0].factors.size(), 2u * 4u);  // F factors x head_dim columns
    o = run_statetrack("run '" + model.string() + "' --word 't1 t2 t3' --precision fp64", dir);
    EXPECT_EQ(o.code, 0) << o.err;
}

TEST_F(CliExport, BadInputExitsTwoWithoutWriting) {
    const std::string ckpt = train("deltanet");
    const fs::path model = dir / "m.json";
    auto o = run_statetrack("eval '" + ckpt + "' --export-word '1 x 1' -o '" + model.string() + "'", dir);
    EXPECT_EQ(o.code, 2);
    EXPECT_NE(o.err.find("x"), std::string::npos) << o.err;
    o = run_statetrack("eval '" + ckpt + "' --export-word '' -o '" + model.string() + "'", dir);
    EXPECT_EQ(o.code, 2) << o.err;
    o = run_statetrack("eval '" + ckpt + "' --export-word '1 0'", dir);
    EXPECT_EQ(o.code, 2);
    EXPECT_NE(o.err.find("-o"), std::string::npos) << o.err;
    o = run_statetrack("eval '" + ckpt + "' -o '" + model.string() + "'", dir);
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_FALSE(fs::exists(model));

    const std::string lstm = train("lstm");
    o = run_statetrack("eval '" + lstm + "' --export-word '1 0' -o '" + model.string() + "'", dir);
    EXPECT_EQ(o.code, 2);
    EXPECT_NE(o.err.find("lstm"), std::string::npos) << o.err;
    EXPECT_FALSE(fs::exists(model));
}

}  // namespace
