// End-to-end runs of `statetrack info|convert|minimize|zoo` on the real binary, including the bad
// inputs of DESIGN.md: one line on stderr naming the file and the place, exit code 2, nothing written.
#include <gtest/gtest.h>


#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_statetrack.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
const std::string data_dir = STATETRACK_TEST_DATA "/dfa/";

using Result = statetrack::testing::CliOutcome;
const auto slurp = statetrack::testing::read_text;

class CliAutomata : public ::testing::Test {
protected:
    fs::path dir;

    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir = statetrack::testing::fresh_scratch_dir(std::string("cli_automata_") + info->name(), true);
    }
    void TearDown() override { fs::remove_all(dir); }

    Result run(const std::string& args) const { return statetrack::testing::run_statetrack(args, dir); }

    std::string write(const std::string& name, const std::string& text) const {
        std::ofstream(dir / name) << text;
        return (dir / name).string();
    }

    // The bad-input contract: exit 2, stdout empty, exactly one line on stderr with `expected` in it,
    // and nothing left in the output folder.
    void expect_bad_input(const std::string& args, const std::string& expected) const {
        SCOPED_TRACE(args);
        const Result r = run(args);
        EXPECT_EQ(r.code, 2);
        EXPECT_EQ(r.out, "");
        EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_TRUE(fs::is_empty(dir)) << "an output file was written";
    }
};

TEST_F(CliAutomata, InfoJsonOfParity) {
    const Result r = run("info zoo:parity --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["states"], 2);
    EXPECT_EQ(j["alphabet"], nlohmann::json({"0", "1"}));
    EXPECT_EQ(j["minimal"], true);
    EXPECT_EQ(j["monoid_size"], 2);
    EXPECT_EQ(j["class"], "group");
    EXPECT_EQ(j["group_orders"], nlohmann::json({2}));
}

TEST_F(CliAutomata, InfoReportsSinkAndNonMinimality) {
    Result r = run("info '" + data_dir + "partial.json' --json");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["states"], 4);
    EXPECT_EQ(j["loader"]["added_sink"], true);
    EXPECT_EQ(j["loader"]["missing_arcs"], 2);
    EXPECT_EQ(j["class"], "aperiodic");
    r = run("info '" + data_dir + "nonminimal.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("minimal:    no (the minimal DFA has 2 states)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("monoid:     4 elements"), std::string::npos) << r.out;
}

TEST_F(CliAutomata, InfoStopsAtTheMonoidLimit) {
    // Letters (0 1 ... 8), (0 1) and 0 -> 1 generate all 9^9 = 387,420,489 maps of 9 points.
    std::string rows;
    for (int q = 0; q < 9; ++q)
        rows += (q ? ", [" : "[") + std::to_string((q + 1) % 9) + ", " + std::to_string(q == 0 ? 1 : q == 1 ? 0 : q) + ", " +
                std::to_string(q == 0 ? 1 : q) + "]";
    const std::string file = write("t9.json", R"({"format": "statetrack.dfa/1", "alphabet": ["c", "t", "e"], "states": 9,
        "start": 0, "accepting": [0], "transitions": [)" + rows + "]}");
    Result r = run("info '" + file + "' --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["monoid_size"].is_null());
    EXPECT_EQ(j["class"], "mixed");
    EXPECT_NE(j["monoid_message"].get<std::string>().find("over the limit of 1000000"), std::string::npos);
    r = run("info '" + file + "' --monoid-limit 500");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("monoid:     over the limit of 500 elements (raise --monoid-limit)"), std::string::npos) << r.out;
}

TEST_F(CliAutomata, ConvertAttToJsonAndBack) {
    Result r = run("convert '" + data_dir + "ab-prefix.att' --to json -o '" + (dir / "ab.json").string() + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("added a rejecting sink state 3 for 2 missing arcs"), std::string::npos) << r.err;
    const auto j = nlohmann::json::parse(slurp(dir / "ab.json"));
    EXPECT_EQ(j["transitions"], nlohmann::json::parse("[[1, 3], [3, 2], [2, 2], [3, 3]]"));
    r = run("convert '" + (dir / "ab.json").string() + "' --to att");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "0\t1\ta\ta\n0\t3\tb\tb\n1\t3\ta\ta\n1\t2\tb\tb\n2\t2\ta\ta\n2\t2\tb\tb\n3\t3\ta\ta\n3\t3\tb\tb\n2\n");
    r = run("convert zoo:parity --to dot");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("shape=doublecircle"), std::string::npos);
    EXPECT_NE(r.out.find("__start -> 0;"), std::string::npos);
}

TEST_F(CliAutomata, MinimizeWritesMinimalJson) {
    const std::string out = (dir / "min.json").string();
    Result r = run("minimize '" + data_dir + "nonminimal.json' -o '" + out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("4 states -> 2 states (minimal)"), std::string::npos) << r.out;
    const auto j = nlohmann::json::parse(slurp(out));
    EXPECT_EQ(j["format"], "statetrack.dfa/1");
    EXPECT_EQ(j["states"], 2);
    EXPECT_EQ(j["transitions"], nlohmann::json::parse("[[1, 0], [0, 1]]"));
    r = run("minimize '" + out + "' --json -o '" + (dir / "again.json").string() + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["minimal_states"], 2);
    EXPECT_EQ(slurp(dir / "again.json"), slurp(out));
}

TEST_F(CliAutomata, ZooListAndShow) {
    Result r = run("zoo list --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto list = nlohmann::json::parse(r.out);
    ASSERT_TRUE(list.is_array());
    EXPECT_TRUE(std::any_of(list.begin(), list.end(), [](const auto& e) { return e["name"] == "parity"; }));
    r = run("zoo show mod:3 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const Result converted = run("convert zoo:mod:3 --to json");
    EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::parse(converted.out));
    r = run("zoo show zoo:mod:3");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("-> * 0  0  1"), std::string::npos) << r.out;
}

TEST_F(CliAutomata, BadInputs) {
    const std::string out = " -o '" + (dir / "out.json").string() + "'";
    expect_bad_input("convert '" + data_dir + "bad_syntax.json' --to json" + out,
                     "bad_syntax.json: line 8, column 1: malformed JSON: syntax error");
    expect_bad_input("info '" + data_dir + "bad_type.json'",
                     "bad_type.json: /transitions/1/1: expected a target (a non-negative integer), got string");
    expect_bad_input("minimize '" + data_dir + "bad_range.json'" + out,
                     "bad_range.json: /transitions/1/1: target 9 out of range 0..1");
    expect_bad_input("info '" + data_dir + "bad_duplicate.json' --json",
                     "bad_duplicate.json: /alphabet/2: duplicate symbol \"a\" (also /alphabet/0)");
    expect_bad_input("convert '" + data_dir + "bad_nondeterministic.att' --to dot" + out,
                     "bad_nondeterministic.att: line 4: not deterministic: state 0 on 'b' goes to 1 here and to 0 on line 3");
    expect_bad_input("info '" + data_dir + "empty.att'", "empty.att: the file is empty");
    expect_bad_input("info '" + data_dir + "empty.json'", "empty.json: line 1, column 1: malformed JSON");
    expect_bad_input("minimize '" + data_dir + "no-such-file.json'" + out, "no-such-file.json: no such file");
    expect_bad_input("info zoo:no-such-language", "zoo:no-such-language");
    expect_bad_input("zoo show no-such-language", "no-such-language");
    expect_bad_input("convert zoo:parity --to xml" + out, "--to: unknown format 'xml' (expected json, att or dot)");
    expect_bad_input("minimize zoo:parity -o '" + (dir / "missing" / "out.json").string() + "'",
                     "out.json: the output folder does not exist");
    expect_bad_input("info '" + data_dir + "parity.txt'", "unknown DFA format");
}

}  // namespace
