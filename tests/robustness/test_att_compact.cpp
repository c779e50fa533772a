// The att fuzz target's renumbering of state numbers (tests/fuzz/att_compact.cpp): it must keep
// what the loader sees (the language, the errors and their lines) and only shrink the table.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "../fuzz/fuzz_inputs.hpp"
#include "statetrack/automata/algorithms.hpp"

namespace {

using namespace statetrack;
using namespace statetrack::automata;

// The loader's outcome: "" for a DFA (stored in `dfa`), else the InputError's message.
std::string load(const std::string& text, Dfa* dfa = nullptr) {
    try {
        const Dfa loaded = read_att(text, "f.att");
        if (dfa) *dfa = loaded;
        return "";
    } catch (const InputError& e) {
        return e.what();
    }
}

// A random DFA in AT&T text with its states numbered sparsely: state q (start 0) becomes q * gap
// (+ an offset for q > 0), so the table the loader builds is ~gap times larger than the text.
std::string sparse_att(const Dfa& dfa, std::uint64_t gap, std::uint64_t offset) {
    const auto number = [&](std::size_t q) { return q == 0 ? std::uint64_t(0) : q * gap + offset; };
    std::string text;
    for (std::size_t q = 0; q < dfa.num_states(); ++q)
        for (std::size_t a = 0; a < dfa.num_letters(); ++a)
            text += std::to_string(number(q)) + "\t" + std::to_string(number(dfa.next(State(q), Letter(a)))) + "\t" +
                    dfa.alphabet[a] + "\t" + dfa.alphabet[a] + "\n";
    for (std::size_t q = 0; q < dfa.num_states(); ++q)
        if (dfa.accepting[q]) text += std::to_string(number(q)) + "\n";
    return text;
}

TEST(AttCompact, KeepsTheLanguageAndShrinksTheTable) {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        std::mt19937_64 rng(seed);
        RandomDfaOptions options;
        options.states = 2 + rng() % 12;
        options.letters = 1 + rng() % 4;
        options.seed = seed;
        options.accepting_probability = 0.5;
        Dfa dfa = random_dfa(options);
        dfa.start = 0;  // AT&T starts at state 0
        const std::string text = sparse_att(dfa, 1000 + rng() % 5000, rng() % 7);
        const std::string compact = fuzz::att_compact_states(text);
        ASSERT_NE(compact, text) << "seed " << seed;
        Dfa raw, small;
        ASSERT_EQ(load(text, &raw), "") << "seed " << seed;
        ASSERT_EQ(load(compact, &small), "") << "seed " << seed;
        // States 0..n-1 (plus a sink when the numbering left holes): the text's size, not the numbers'.
        EXPECT_LE(small.num_states(), dfa.num_states() + 1) << "seed " << seed;
        EXPECT_GT(raw.num_states(), 1000u) << "seed " << seed;
        EXPECT_TRUE(equivalent(raw, small)) << "seed " << seed;
        EXPECT_TRUE(equivalent(dfa, small)) << "seed " << seed;
    }
}

TEST(AttCompact, RenumbersInOrderAndKeepsEveryOtherByte) {
    // Ranks among 0, 7, 300000 (state 0 keeps 0); weights, symbols and blanks as they were.
    EXPECT_EQ(fuzz::att_compact_states("0 300000 a a\n300000\t7 b b 0.5\n7 1.5\r\n"), "0 2 a a\n2\t1 b b 0.5\n1 1.5\r\n");
    // State 0 need not appear: it is the start all the same, and stays 0.
    EXPECT_EQ(fuzz::att_compact_states("400000 500000 a a\n"), "1 2 a a\n");
    // Leading zeros are a number like any other.
    EXPECT_EQ(fuzz::att_compact_states("0 00300000 a a\n"), "0 1 a a\n");
}

TEST(AttCompact, LeavesSmallTablesAndLimitsAlone) {
    // Tables within the budget (dense files, small numbers) are loaded as given.
    const std::string dense = "0\t1\ta\ta\n1\t0\ta\ta\n1\n";
    EXPECT_EQ(fuzz::att_compact_states(dense), dense);
    // A state beyond the 2^24 limit, or a table beyond 2^28 entries: the loader refuses these before
    // it allocates anything, so they reach it unchanged and the limit checks stay fuzzed.
    const std::string beyond_state = "0 16777216 a a\n";
    EXPECT_EQ(fuzz::att_compact_states(beyond_state), beyond_state);
    std::string beyond_table = "0 16777215 a a\n";
    for (char c = 'b'; c <= 'q'; ++c) beyond_table += std::string("0 1 ") + c + " " + c + "\n";  // 17 letters
    EXPECT_EQ(fuzz::att_compact_states(beyond_table), beyond_table);
    EXPECT_NE(load(beyond_table).find("table entries"), std::string::npos) << load(beyond_table);
    // Unparsable fields are left for the loader to refuse.
    const std::string bad = "0 x9999999 a a\n0 9999999 b b\n";
    EXPECT_EQ(fuzz::att_compact_states(bad).substr(0, 15), "0 x9999999 a a\n");
    EXPECT_EQ(load(bad), load(fuzz::att_compact_states(bad)));
}

TEST(AttCompact, KeepsTheErrorsAndTheirLines) {
    // Non-determinism stays a conflict on the same line; the states in the message are renumbered.
    const std::string conflict = "0 900000 a a\n0 800000 a a\n";
    const std::string raw = load(conflict), small = load(fuzz::att_compact_states(conflict));
    EXPECT_NE(raw.find("line 2: not deterministic"), std::string::npos) << raw;
    EXPECT_NE(small.find("line 2: not deterministic"), std::string::npos) << small;
    // A bad line after sparse numbers: the same line, the same message.
    const std::string bad = "0 900000 a a\n900000 0 a b\n";
    EXPECT_EQ(load(bad), load(fuzz::att_compact_states(bad)));
}

TEST(AttCompact, TheLanguageCheckSeesAChange) {
    // The equivalence check above can fail: the compacted chain of three states is equivalent to
    // the sparse one, and moving its accepting state one step back is seen as a change.
    const std::string sparse = "0 7 a a\n7 900000 a a\n900000 900000 a a\n900000\n";
    Dfa raw, small, moved;
    ASSERT_EQ(load(sparse, &raw), "");
    ASSERT_EQ(load(fuzz::att_compact_states(sparse), &small), "");
    ASSERT_EQ(load("0 1 a a\n1 2 a a\n2 2 a a\n1\n", &moved), "");
    EXPECT_TRUE(equivalent(raw, small));
    EXPECT_FALSE(equivalent(raw, moved));
}

}  // namespace
