// End-to-end runs of `statetrack compile` and `statetrack run` on the real binary: JSON shapes, the
// written model, --trace, every precision name, the literal wiring's counterexample (exit 1), and
// bad input (exit 2, one line on stderr naming the place, nothing written).
#include <gtest/gtest.h>


#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_statetrack.hpp"
#include "scratch_dir.hpp"
#include "statetrack/automata/dfa.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/zoo.hpp"

namespace {

namespace fs = std::filesystem;
namespace automata = statetrack::automata;
using nlohmann::json;
using Output = statetrack::testing::CliOutcome;
using statetrack::testing::quoted;
using statetrack::testing::read_text;

std::string example(const char* file) { return std::string(STATETRACK_SOURCE_DIR) + "/examples/" + file; }

class CliLrnn : public ::testing::Test {
protected:
    fs::path dir;

    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir = statetrack::testing::fresh_scratch_dir(std::string("cli_lrnn_") + info->name(), true);
    }
    void TearDown() override { fs::remove_all(dir); }

    Output cli(const std::string& args) const { return statetrack::testing::run_statetrack(args, dir); }
    std::string path(const char* name) const { return (dir / name).string(); }

    // Compiles `dfa` to model.json and returns the parsed --json summary.
    json compile(const std::string& dfa, const std::string& extra = "") const {
        const Output r = cli("compile " + quoted(dfa) + " -o " + quoted(path("model.json")) + " --json " + extra);
        EXPECT_EQ(r.code, 0) << r.err;
        return json::parse(r.out);
    }
};

void expect_one_line_naming(const Output& r, const std::string& place) {
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(r.out.empty()) << r.out;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // exactly one line
    EXPECT_NE(r.err.find(place), std::string::npos) << r.err;
}

}  // namespace

TEST_F(CliLrnn, CompileWritesACertifiedModelAndSummarizesIt) {
    const json j = compile("zoo:symreg:3");
    EXPECT_EQ(j["construction"], "onehot");
    EXPECT_EQ(j["wiring"], "shift");
    EXPECT_EQ(j["total_dim"], 6);
    ASSERT_EQ(j["layers"].size(), 1u);
    EXPECT_EQ(j["layers"][0]["dim"], 6);
    // S_3 acting on its 6 elements (p - c reflections): a transposition moves 6 points in 3 cycles
    // (3 reflections), a 3-cycle moves 6 points in 2 cycles (4 reflections).
    EXPECT_EQ(j["layers"][0]["max_factors"], 4);
    EXPECT_EQ(j["betas"], json::array({"2"}));
    EXPECT_EQ(j["eigenvalue_range"], json::array({-1.0, 1.0}));
    EXPECT_TRUE(j["exact"]);
    EXPECT_TRUE(j["check"]["ok"]);
    EXPECT_TRUE(j["check"]["closure"]["certified"]);
    EXPECT_EQ(j["check"]["closure"]["pairs"], 6);
    EXPECT_TRUE(j["counterexample"].is_null());
    EXPECT_TRUE(j["written"]);
    const json model = json::parse(read_text(path("model.json")));
    EXPECT_EQ(model["format"], "statetrack.lrnn/1");

    // Human text names the check and the file.
    const Output text = cli("compile zoo:parity -o " + quoted(path("parity.json")));
    EXPECT_EQ(text.code, 0) << text.err;
    EXPECT_NE(text.out.find("construction parity"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("exact closure: all 2 reachable"), std::string::npos) << text.out;
    EXPECT_TRUE(fs::exists(path("parity.json")));
}

TEST_F(CliLrnn, CompileCascadeFromAnExampleFileWithEitherReset) {
    for (const char* reset : {"projections", "diagonal"}) {
        const json j = compile(example("second_to_last_a.json"), std::string("--reset ") + reset);
        EXPECT_EQ(j["construction"], "cascade");
        EXPECT_GE(j["layers"].size(), 2u);
        EXPECT_TRUE(j["check"]["closure"]["certified"]) << reset;
    }
    const json rotation = compile(example("mod3.json"), "--construction rotation");
    EXPECT_EQ(rotation["construction"], "rotation");
    EXPECT_FALSE(rotation["exact"]);
    EXPECT_TRUE(rotation["check"]["closure"].is_null());  // irrational: random long words in mpfr:256 instead
    EXPECT_GT(rotation["check"]["random_words"].get<int>(), 0);
    EXPECT_TRUE(rotation["check"]["ok"]);
}

TEST_F(CliLrnn, RunGivesTheDfaAnswerPerPrefixInEveryPrecision) {
    compile(example("second_to_last_a.json"));
    const automata::Dfa dfa = automata::load_dfa(example("second_to_last_a.json"));
    const std::string word = "a b a a b b a b";
    const auto letters = automata::parse_word(dfa, word, "word");
    for (const char* precision : {"fp16", "bf16", "fp32", "fp64", "exact", "mpfr:200", "bits:24", "interval:64"}) {
        SCOPED_TRACE(precision);
        const Output r = cli("run " + quoted(path("model.json")) + " --word " + quoted(word) + " --precision " + precision + " --json");
        ASSERT_EQ(r.code, 0) << r.err;
        const json j = json::parse(r.out);
        ASSERT_EQ(j["accept"].size(), letters.size());
        ASSERT_EQ(j["states"].size(), letters.size());
        automata::State q = dfa.start;
        for (std::size_t t = 0; t < letters.size(); ++t) {
            q = dfa.next(q, letters[t]);
            EXPECT_EQ(j["accept"][t], bool(dfa.accepting[q])) << "prefix " << t + 1;
            EXPECT_EQ(j["states"][t], q) << "prefix " << t + 1;
        }
        EXPECT_FALSE(j.contains("hidden"));
    }
}

TEST_F(CliLrnn, TraceShowsHiddenStatesPerPrefixAndLayer) {
    compile("zoo:parity");
    const Output r = cli("run " + quoted(path("model.json")) + " --word '1 1 0 1' --precision exact --trace --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);
    // Parity is the scalar -1 per 1: h = -1, 1, 1, -1.
    EXPECT_EQ(j["hidden"], json::parse(R"([[["-1"]], [["1"]], [["1"]], [["-1"]]])"));
    ASSERT_EQ(j["outputs"].size(), 4u);
    const automata::Dfa dfa = automata::zoo("parity");
    EXPECT_EQ(j["accept"][1], bool(dfa.accepting[dfa.start]));
    EXPECT_NE(j["accept"][0], j["accept"][1]);

    const Output text = cli("run " + quoted(path("model.json")) + " --word '1 0' --trace");
    EXPECT_EQ(text.code, 0);
    EXPECT_NE(text.out.find("layer 0 output"), std::string::npos) << text.out;
}

TEST_F(CliLrnn, LiteralWiringIsRefusedWithACounterexample) {
    const std::string dfa_file = example("second_to_last_a.json");
    const Output r = cli("compile " + quoted(dfa_file) + " -o " + quoted(path("literal.json")) + " --wiring literal --json");
    EXPECT_EQ(r.code, 1) << r.err;
    const json j = json::parse(r.out);
    EXPECT_FALSE(j["check"]["ok"]);
    EXPECT_FALSE(j["written"]);
    EXPECT_FALSE(fs::exists(path("literal.json")));
    ASSERT_TRUE(j["counterexample"].is_string());
    // The counterexample is real: the written (--allow-wrong) model disagrees with the DFA on it.
    const Output forced = cli("compile " + quoted(dfa_file) + " -o " + quoted(path("literal.json")) + " --wiring literal --allow-wrong");
    EXPECT_EQ(forced.code, 1);
    EXPECT_NE(forced.out.find("COUNTEREXAMPLE"), std::string::npos) << forced.out;
    ASSERT_TRUE(fs::exists(path("literal.json")));
    const std::string word = j["counterexample"];
    const Output run = cli("run " + quoted(path("literal.json")) + " --word " + quoted(word) + " --precision exact --json");
    ASSERT_EQ(run.code, 0) << run.err;
    const json out = json::parse(run.out);
    const automata::Dfa dfa = automata::load_dfa(dfa_file);
    const automata::State q = automata::run(dfa, automata::parse_word(dfa, word, "word"));
    EXPECT_TRUE(out["accept"].back() != bool(dfa.accepting[q]) || out["states"].back() != q);
}

TEST_F(CliLrnn, BadWordsAndOptionsExitTwoNamingThePlace) {
    compile("zoo:parity");
    const std::string model = quoted(path("model.json"));
    expect_one_line_naming(cli("run " + model + " --word '1 0 x 1'"), "position 3");
    expect_one_line_naming(cli("run " + model + " --word '1' --precision fp8"), "fp8");
    expect_one_line_naming(cli("run " + model + " --word '1' --precision bits:1"), "bits:1");
    expect_one_line_naming(cli("compile zoo:parity -o " + quoted(path("x.json")) + " --construction fancy"), "fancy");
    expect_one_line_naming(cli("compile zoo:parity -o " + quoted(path("x.json")) + " --wiring sideways"), "sideways");
    expect_one_line_naming(cli("compile " + quoted(example("second_to_last_a.json")) + " -o " + quoted(path("x.json")) +
                               " --construction rotation"),
                           "rotation");
    EXPECT_FALSE(fs::exists(path("x.json")));
}

TEST_F(CliLrnn, BadModelsExitTwoNamingTheFileAndPlace) {
    compile("zoo:parity");
    json model = json::parse(read_text(path("model.json")));
    expect_one_line_naming(cli("run " + quoted(path("missing.json")) + " --word 1"), "missing.json");
    {
        std::ofstream(path("broken.json")) << "{\"format\": \"statetrack.lrnn/1\", ";
        expect_one_line_naming(cli("run " + quoted(path("broken.json")) + " --word 1"), "broken.json");
    }
    {
        // beta = 3 breaks the eigenvalue bound; the message names the JSON pointer.
        json bad = model;
        bad["layers"][0]["transitions"][1]["factors"][0]["beta"] = "3";
        std::ofstream(path("beta.json")) << bad.dump();
        const Output r = cli("run " + quoted(path("beta.json")) + " --word 1");
        expect_one_line_naming(r, "/layers/0/transitions/1/factors/0/beta");
        EXPECT_NE(r.err.find("beta.json"), std::string::npos) << r.err;
    }
    {
        json bad = model;
        bad["format"] = "statetrack.lrnn/99";
        std::ofstream(path("version.json")) << bad.dump();
        expect_one_line_naming(cli("run " + quoted(path("version.json")) + " --word 1"), "/format");
    }
    {
        // An exact run of a model with an irrational entry is refused, not approximated.
        const json rotation = compile(example("mod3.json"), "--construction rotation");
        ASSERT_TRUE(rotation["written"]);
        expect_one_line_naming(cli("run " + quoted(path("model.json")) + " --word '1' --precision exact"), "irrational");
    }
}
