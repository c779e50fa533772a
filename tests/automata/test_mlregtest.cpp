// External oracle: the 1,470 MLRegTest DFAs against Size and Monoid in counts.tsv.
//
// Convention of counts.tsv (found by checking every row; docs/formats.md, "MLRegTest"): the numbers
// describe the automaton as stored, completed with a rejecting sink; Size does not count the
// rejecting sink (explicit or implicit), Monoid is the transition monoid of the completed automaton.
// For the 1,461 stored automata that are minimal this is exactly "Size = states of the minimal
// complete DFA minus its sink, Monoid = the syntactic monoid". Nine stored automata are not minimal
// (unreachable or equivalent states); their rows describe the stored automaton, not the minimal one,
// and the test checks both that and that minimization really shrinks them without changing the language.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/monoid.hpp"

namespace {

using namespace statetrack::automata;

struct Row {
    std::size_t size = 0, monoid = 0;
    std::string klass;
};

std::map<std::string, Row> read_counts(const std::string& path) {
    std::ifstream in(path);
    std::map<std::string, Row> rows;
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string alph, tier, klass, k, j, i;
        Row row;
        fields >> alph >> tier >> klass >> k >> j >> i >> row.size >> row.monoid;
        row.klass = klass;
        rows[alph + "." + tier + "." + klass + "." + k + "." + j + "." + i] = row;
    }
    return rows;
}

// Rejecting states whose every arc is a self-loop.
std::size_t rejecting_sinks(const Dfa& dfa) {
    std::size_t count = 0;
    for (State q = 0; q < dfa.num_states(); ++q) {
        bool sink = !dfa.accepting[q];
        for (Letter a = 0; sink && a < dfa.num_letters(); ++a) sink = dfa.next(q, a) == q;
        count += sink;
    }
    return count;
}

TEST(MlRegTest, SizeAndMonoidOfEveryFileMatchCounts) {
    const std::string dir = STATETRACK_TEST_DATA "/mlregtest/";
    const auto rows = read_counts(dir + "counts.tsv");
    ASSERT_EQ(rows.size(), 1800u);
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir + "att"))
        if (entry.path().extension() == ".att") files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    ASSERT_EQ(files.size(), 1470u);

    std::size_t minimal_as_stored = 0, aperiodic = 0;
    std::vector<std::string> not_minimal;
    for (const auto& path : files) {
        const std::string key = std::filesystem::path(path).stem().string();
        SCOPED_TRACE(key);
        const auto row = rows.find(key);
        ASSERT_NE(row, rows.end()) << "no row in counts.tsv";
        const Dfa stored = load_dfa(path);
        const Dfa minimal = minimize(stored);
        ASSERT_LE(rejecting_sinks(minimal), 1u);
        const MonoidSummary syntactic = summarize_monoid(minimal);
        ASSERT_TRUE(syntactic.size.has_value());
        ASSERT_TRUE(syntactic.classification.has_value());
        if (*syntactic.classification == MonoidClass::aperiodic) {
            ++aperiodic;
        } else {
            // Only the Reg (C2) and Zp (C2, C3, C5) languages have groups.
            EXPECT_TRUE(row->second.klass == "Reg" || row->second.klass == "Zp") << row->second.klass;
            for (std::size_t order : syntactic.group_orders) EXPECT_TRUE(order == 2 || order == 3 || order == 5) << order;
        }
        if (minimal.num_states() == stored.num_states()) {
            ++minimal_as_stored;
            EXPECT_EQ(row->second.size, minimal.num_states() - rejecting_sinks(minimal));
            EXPECT_EQ(row->second.monoid, *syntactic.size);
        } else {
            not_minimal.push_back(key);
            EXPECT_LT(minimal.num_states(), stored.num_states());
            EXPECT_TRUE(equivalent(stored, minimal));
            EXPECT_EQ(row->second.size, stored.num_states() - rejecting_sinks(stored));
            const MonoidSummary as_stored = summarize_monoid(stored);
            ASSERT_TRUE(as_stored.size.has_value());
            EXPECT_EQ(row->second.monoid, *as_stored.size);
            EXPECT_GT(row->second.monoid, *syntactic.size);  // a non-minimal automaton's monoid is larger
        }
    }
    EXPECT_EQ(minimal_as_stored, 1461u);
    // The stored automata that are not minimal (docs/formats.md lists why).
    EXPECT_EQ(not_minimal, (std::vector<std::string>{"04.04.Reg.0.0.9", "04.04.SF.0.0.2", "04.04.SF.0.0.4",
                                                     "16.16.Reg.0.0.9", "16.16.SF.0.0.2", "16.16.SF.0.0.4",
                                                     "64.64.Reg.0.0.9", "64.64.SF.0.0.2", "64.64.SF.0.0.4"}));
    EXPECT_EQ(aperiodic, 1410u);  // README.md of the corpus
}

}  // namespace
