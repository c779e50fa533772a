// Round trips as properties (issue 8): for random DFAs and random compiled models,
// write -> read -> write is byte-identical and the language is unchanged.
#include <gtest/gtest.h>

#include <random>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/format.hpp"

namespace {

using namespace statetrack;
using namespace statetrack::automata;

// Symbols and names that stress the writers: JSON escapes, UTF-8, digits that look like indices.
const std::vector<std::string> awkward = {"a", "\"q\"", "back\\slash", "tab\there", "\xc3\xa9t\xc3\xa9", "0", "<eps>",
                                          "line\nbreak", "{", "null", "\x01", "x y"};

// A random DFA from seed: random size, kind and alphabet; awkward symbols and state names for some
// seeds (JSON only: AT&T cannot hold whitespace in a symbol).
Dfa random_case(std::uint64_t seed, bool awkward_names) {
    std::mt19937_64 rng(seed);
    RandomDfaOptions options;
    options.states = 1 + rng() % 40;
    options.letters = 1 + rng() % 6;
    options.kind = static_cast<RandomKind>(rng() % 3);
    options.seed = seed;
    options.accepting_probability = double(rng() % 5) / 4;
    Dfa dfa = random_dfa(options);
    if (awkward_names) {
        for (std::size_t a = 0; a < dfa.num_letters(); ++a) dfa.alphabet[a] = awkward[(a + seed) % awkward.size()] + std::to_string(a);
        if (seed % 2) {
            dfa.state_names.resize(dfa.num_states());
            for (std::size_t q = 0; q < dfa.num_states(); ++q)
                dfa.state_names[q] = q % 3 == 0 ? std::string() : awkward[(q * 7 + seed) % awkward.size()] + std::to_string(q);
        }
        dfa.name = awkward[seed % awkward.size()];
    }
    dfa.start = State(rng() % dfa.num_states());
    return dfa;
}

TEST(RoundTrip, DfaJsonIsByteIdenticalAndKeepsTheLanguage) {
    for (std::uint64_t seed = 1; seed <= 300; ++seed) {
        const Dfa dfa = random_case(seed, seed % 3 != 0);
        const std::string once = write_dfa_json(dfa);
        const Dfa back = read_dfa_json(once, "once.json");
        ASSERT_EQ(write_dfa_json(back), once) << "seed " << seed;
        // The reader keeps every field, so the DFA is the same one, not just an equivalent one.
        EXPECT_EQ(back.delta, dfa.delta) << "seed " << seed;
        EXPECT_EQ(back.state_names, dfa.state_names) << "seed " << seed;
        EXPECT_TRUE(equivalent(back, dfa)) << "seed " << seed;
    }
}

TEST(RoundTrip, AttIsByteIdenticalAndKeepsTheLanguage) {
    for (std::uint64_t seed = 1; seed <= 300; ++seed) {
        const Dfa dfa = random_case(seed, false);
        const std::string once = write_att(dfa);
        // The writer renumbers so the start is state 0; the alphabet order comes from first use, so
        // the reader is given the symbol table (as load_dfa does for MLRegTest files).
        const Dfa back = read_att(once, "once.att", nullptr, &dfa.alphabet);
        ASSERT_EQ(write_att(back), once) << "seed " << seed;
        EXPECT_TRUE(equivalent(back, dfa)) << "seed " << seed;
        // Through JSON and back to AT&T: the two formats agree.
        EXPECT_EQ(write_att(read_dfa_json(write_dfa_json(back), "via.json")), once) << "seed " << seed;
    }
}

TEST(RoundTrip, PropertyCatchesALanguageChange) {
    // The check above must be able to fail: flipping one accepting flag of a minimal DFA changes
    // its language, and equivalent() and the byte comparison both see it.
    const Dfa dfa = minimize(random_case(7, false));
    Dfa changed = read_dfa_json(write_dfa_json(dfa), "once.json");
    changed.accepting[0] = !changed.accepting[0];
    EXPECT_NE(write_dfa_json(changed), write_dfa_json(dfa));
    EXPECT_FALSE(equivalent(changed, dfa));
}

// Compiled models: random group automata (onehot, parity, rotation, theorem6 constructions) and
// random mixed automata (cascade), written, read and written again.
TEST(RoundTrip, CompiledModelsAreByteIdenticalAndKeepTheLanguage) {
    std::size_t compiled = 0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        RandomDfaOptions options;
        options.states = 2 + seed % 4;
        options.letters = 1 + seed % 3;
        options.kind = seed % 2 ? RandomKind::permutation : RandomKind::mixed;
        options.seed = seed;
        const Dfa dfa = minimize(random_dfa(options));
        for (auto construction : {lrnn::Construction::automatic, lrnn::Construction::rotation, lrnn::Construction::cascade}) {
            lrnn::CompileOptions co;
            co.construction = construction;
            co.reset = seed % 3 ? lrnn::ResetEncoding::projections : lrnn::ResetEncoding::diagonal;
            lrnn::Network net;
            try {
                net = lrnn::compile_dfa(dfa, co);
            } catch (const InputError&) {
                continue;  // the construction does not apply (rotation needs a cyclic group)
            }
            ++compiled;
            const std::string once = lrnn::write_network_json(net);
            const lrnn::Network back = lrnn::read_network_json(once, "once.lrnn.json");
            ASSERT_EQ(lrnn::write_network_json(back), once) << "seed " << seed << " " << lrnn::to_string(construction);
            // Language unchanged: the read model agrees with the DFA on all short words (exact or,
            // for irrational rotations, in certified intervals) and on random long words in fp64.
            const auto precision = lrnn::parse_precision(net.construction == "rotation" ? "interval:128" : "exact");
            const auto all = lrnn::check_all_words(back, dfa, 7, precision);
            EXPECT_TRUE(all.ok) << "seed " << seed << " " << net.construction;
            const auto random = lrnn::check_random_words(back, dfa, 20, 60, seed, lrnn::parse_precision("fp64"));
            EXPECT_TRUE(random.ok) << "seed " << seed << " " << net.construction;
        }
    }
    EXPECT_GE(compiled, 60u);
}

TEST(RoundTrip, ModelPropertyCatchesAChangedModel) {
    // A reflection turned into the identity (beta 2 -> 0) changes the language of parity: the
    // bytes differ and the word check finds a counterexample.
    const Dfa dfa = zoo("parity");
    lrnn::Network net = lrnn::compile_dfa(dfa);
    const std::string once = lrnn::write_network_json(net);
    for (auto& t : net.layers[0].transitions)
        for (auto& f : t.factors) f.beta = lrnn::integer(0);
    EXPECT_NE(lrnn::write_network_json(net), once);
    const auto all = lrnn::check_all_words(net, dfa, 3, lrnn::parse_precision("exact"));
    EXPECT_FALSE(all.ok);
    EXPECT_TRUE(all.counterexample.has_value());
}

}  // namespace
