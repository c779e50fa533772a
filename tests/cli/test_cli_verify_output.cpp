// `statetrack verify -o FILE`: the file holds the JSON certificate that --json prints; a missing
// output folder is bad input before any verification (exit 2, one line, nothing written).
#include <gtest/gtest.h>


#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "run_statetrack.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
using statetrack::testing::quoted;
using statetrack::testing::read_text;
using statetrack::testing::run_statetrack;

class CliVerifyOutput : public ::testing::Test {
protected:
    fs::path dir;
    void SetUp() override {
        dir = statetrack::testing::fresh_scratch_dir("cli_verify_output", true);
        ASSERT_EQ(run_statetrack("compile zoo:mod:3 -o " + quoted((dir / "model.json").string()), dir).code, 0);
    }
    void TearDown() override { fs::remove_all(dir); }
    std::string verify(const std::string& extra) const {
        return "verify " + quoted((dir / "model.json").string()) + " --against zoo:mod:3 " + extra;
    }
};

TEST_F(CliVerifyOutput, WritesTheCertificateThatJsonPrints) {
    const auto printed = run_statetrack(verify("--json"), dir);
    ASSERT_EQ(printed.code, 0) << printed.err;
    const fs::path file = dir / "certificate.json";
    const auto both = run_statetrack(verify("--json -o " + quoted(file.string())), dir);
    ASSERT_EQ(both.code, 0) << both.err;
    EXPECT_EQ(read_text(file), printed.out);
    EXPECT_TRUE(nlohmann::json::parse(read_text(file))["passed"].get<bool>());
    // Without --json: the human summary on stdout, the same certificate in the file.
    fs::remove(file);
    const auto human = run_statetrack(verify("-o " + quoted(file.string())), dir);
    ASSERT_EQ(human.code, 0) << human.err;
    EXPECT_NE(human.out.find("wrote " + file.string()), std::string::npos) << human.out;
    EXPECT_EQ(read_text(file), printed.out);
}

TEST_F(CliVerifyOutput, AMissingFolderIsBadInputBeforeVerifying) {
    const fs::path file = dir / "no" / "such" / "certificate.json";
    const auto o = run_statetrack(verify("-o " + quoted(file.string())), dir);
    EXPECT_EQ(o.code, 2);
    EXPECT_EQ(o.out, "");
    EXPECT_NE(o.err.find(file.string()), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("the output folder does not exist"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;  // no progress lines: nothing ran
    EXPECT_FALSE(fs::exists(dir / "no"));
}

}  // namespace
