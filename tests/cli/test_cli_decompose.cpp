// End-to-end runs of `statetrack decompose` on the real binary: the JSON summary, --verify,
// -o (statetrack.cascade/1), the banned method and the fallback, and bad inputs (exit 2, nothing written).
#include <gtest/gtest.h>


#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_statetrack.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
using statetrack::testing::quoted;
using statetrack::testing::read_text;

class CliDecompose : public ::testing::Test {
protected:
    fs::path dir;

    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir = statetrack::testing::fresh_scratch_dir(std::string("cli_decompose_") + info->name(), true);
    }
    void TearDown() override { fs::remove_all(dir); }

    statetrack::testing::CliOutcome decompose(const std::string& args) const {
        return statetrack::testing::run_statetrack("decompose " + args, dir);
    }
};

std::vector<std::size_t> points(const nlohmann::json& j) {
    std::vector<std::size_t> p;
    for (const auto& level : j["levels"]) p.push_back(level["points"]);
    return p;
}

}  // namespace

TEST_F(CliDecompose, JsonSummaryOfKnownAnswers) {
    auto r = decompose("zoo:evenpairs --json --verify");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["method"], "holonomy");
    EXPECT_EQ(points(j), (std::vector<std::size_t>{3, 2}));
    EXPECT_EQ(j["one_hot_size"], 5);
    EXPECT_EQ(j["verified"], true);
    for (const auto& level : j["levels"]) EXPECT_TRUE(level["groups"].empty());

    r = decompose("zoo:mod:3 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["method"], "single");
    EXPECT_EQ(points(j), (std::vector<std::size_t>{3}));
    EXPECT_EQ(j["levels"][0]["groups"], nlohmann::json::array({3}));
    EXPECT_FALSE(j.contains("verified"));  // only with --verify
}

TEST_F(CliDecompose, HumanOutputNamesGroups) {
    const auto r = decompose("zoo:symreg:3 --verify");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("method single"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("S_3"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("verified for all words"), std::string::npos) << r.out;
    const auto t = decompose("zoo:tomita:3");
    ASSERT_EQ(t.code, 0) << t.err;
    EXPECT_NE(t.out.find("C_2"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("resets only"), std::string::npos) << t.out;
}

TEST_F(CliDecompose, CascadeFileAndBannedMethod) {
    const auto file = (dir / "c.json").string();
    const auto r = decompose("zoo:contains:abb --method banned --verify --json -o " + quoted(file));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["method"], "banned");
    EXPECT_EQ(points(j), (std::vector<std::size_t>{4, 3, 2}));
    const auto doc = nlohmann::json::parse(read_text(file));
    EXPECT_EQ(doc["format"], "statetrack.cascade/1");
    EXPECT_EQ(doc["method"], "banned");
    EXPECT_EQ(doc["levels"].size(), 3U);
    EXPECT_EQ(doc["decode"].size(), j["cascade_states"]);
}

TEST_F(CliDecompose, OrbitLimitFallsBackAndSaysSo) {
    const auto r = decompose("zoo:contains:abb --orbit-limit 3 --json --verify");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["method"], "banned");
    EXPECT_NE(j["fallback"].get<std::string>().find("limit of 3"), std::string::npos);
    EXPECT_EQ(j["verified"], true);
}

TEST_F(CliDecompose, MlregtestFileVerifies) {
    const auto r = decompose(quoted(STATETRACK_TEST_DATA "/mlregtest/att/04.04.Zp.3.1.2.att") + " --json --verify");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["verified"], true);
    std::vector<std::size_t> groups;
    for (const auto& level : j["levels"])
        for (const auto& g : level["groups"]) groups.push_back(g);
    EXPECT_EQ(groups, (std::vector<std::size_t>{3}));
}

TEST_F(CliDecompose, BadInputsExitTwoAndWriteNothing) {
    const auto out = (dir / "never.json").string();
    auto r = decompose(quoted((dir / "missing.att").string()) + " -o " + quoted(out));
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("missing.att"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));

    r = decompose("zoo:first --method quantum");
    EXPECT_EQ(r.code, 2);
    r = decompose("zoo:first --orbit-limit 0");
    EXPECT_EQ(r.code, 2);
    r = decompose("zoo:nosuchlanguage");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("nosuchlanguage"), std::string::npos) << r.err;
    // A state limit the cascade exceeds is a documented limit: exit 2, one line, nothing written.
    r = decompose("zoo:contains:abb --state-limit 2 -o " + quoted(out));
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("more than 2 reachable cascade states"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
    // An output folder that does not exist.
    r = decompose("zoo:first -o " + quoted((dir / "no" / "such" / "dir.json").string()));
    EXPECT_EQ(r.code, 2);
}
