// Corpus-wide: every zoo language and the MLRegTest DFAs compile, pass the compiler's own check
// (the exact closure: correct for every length), and agree with the DFA on random words of length
// 1..5000 in exact arithmetic and in fp32.
#include <gtest/gtest.h>

#include <filesystem>

#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/compile.hpp"

using namespace statetrack;
using namespace statetrack::lrnn;

namespace {

void expect_random_words_agree(const Network& net, const automata::Dfa& dfa, std::uint64_t seed, std::size_t count,
                               std::size_t max_length, const char* precision) {
    const auto r = check_random_words(net, dfa, count, max_length, seed, parse_precision(precision));
    EXPECT_TRUE(r.ok) << dfa.name << " " << precision << " fails on a word of length "
                      << (r.counterexample ? r.counterexample->size() : 0);
}

}  // namespace

TEST(Corpus, EveryZooLanguageCompilesAndAgrees) {
    for (const auto& entry : automata::zoo_entries()) {
        SCOPED_TRACE(entry.example);
        const automata::Dfa dfa = automata::zoo(entry.example);
        const Network net = compile_dfa(dfa);
        const CompileCheck check = check_against_dfa(net, dfa);
        EXPECT_TRUE(check.ok) << entry.example;
        EXPECT_TRUE(check.closure.certified) << check.closure.message;
        expect_random_words_agree(net, dfa, 5, 2, 5000, "exact");
        expect_random_words_agree(net, dfa, 6, 3, 5000, "fp32");
    }
}

TEST(Corpus, EveryMlRegTestDfaCompilesIsCertifiedAndAgrees) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(std::string(STATETRACK_TEST_DATA) + "/mlregtest/att"))
        if (e.path().extension() == ".att") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    ASSERT_EQ(files.size(), 1470u);
    std::size_t checked = 0;
    for (std::size_t i = 0; i < files.size(); ++i) {
        SCOPED_TRACE(files[i].filename().string());
        const automata::Dfa dfa = automata::load_dfa(files[i].string());
        const Network net = compile_dfa(dfa);
        const CompileCheck check = check_against_dfa(net, dfa);
        ASSERT_TRUE(check.ok);
        ASSERT_TRUE(check.closure.certified) << check.closure.message;
        // The closure certifies every length; random long words exercise the evaluators (the
        // integer fast path for exact, float for fp32). Large networks get shorter words.
        const std::size_t length = total_dimension(net) > 200 ? 500 : 5000;
        expect_random_words_agree(net, dfa, 2 * i, 2, length, "exact");
        expect_random_words_agree(net, dfa, 2 * i + 1, 2, length, "fp32");
        ++checked;
    }
    EXPECT_EQ(checked, 1470u);
}
