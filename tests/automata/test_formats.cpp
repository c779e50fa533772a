// statetrack.dfa/1 JSON, AT&T and DOT: round trips, sink completion, and every kind of bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"

namespace {

using namespace statetrack;
using namespace statetrack::automata;

const std::string data_dir = STATETRACK_TEST_DATA "/dfa/";

// The message of the InputError that `load` throws (fails the test when none is thrown).
template <class F>
std::string input_error(F load) {
    try {
        load();
    } catch (const InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no InputError thrown";
    return {};
}

std::vector<Dfa> sample_dfas() {
    std::vector<Dfa> dfas;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        RandomDfaOptions options;
        options.states = 1 + seed % 9;
        options.letters = 1 + seed % 4;
        options.kind = seed % 3 == 0 ? RandomKind::permutation : seed % 3 == 1 ? RandomKind::uniform : RandomKind::mixed;
        options.seed = seed;
        Dfa dfa = random_dfa(options);
        dfa.start = State(seed % dfa.num_states());  // not always 0: AT&T must renumber
        dfas.push_back(std::move(dfa));
    }
    return dfas;
}

TEST(DfaJson, ReadsNamedStates) {
    LoadNotes notes;
    const Dfa dfa = read_dfa_json(read_text_file(data_dir + "parity.json"), "parity.json", &notes);
    EXPECT_EQ(dfa.name, "parity");
    EXPECT_EQ(dfa.alphabet, (std::vector<std::string>{"0", "1"}));
    EXPECT_EQ(dfa.state_names, (std::vector<std::string>{"even", "odd"}));
    EXPECT_EQ(dfa.accepting, (std::vector<bool>{true, false}));
    EXPECT_EQ(dfa.delta, (std::vector<State>{0, 1, 1, 0}));
    EXPECT_FALSE(notes.added_sink);
    EXPECT_TRUE(notes.messages.empty());
}

TEST(DfaJson, WriterReproducesCanonicalFileByteForByte) {
    const std::string text = read_text_file(data_dir + "parity.json");
    EXPECT_EQ(write_dfa_json(read_dfa_json(text, "parity.json")), text);
    const std::string partial = read_text_file(data_dir + "nonminimal.json");
    EXPECT_EQ(write_dfa_json(read_dfa_json(partial, "nonminimal.json")), partial);
}

TEST(DfaJson, RoundTripIsIdenticalForRandomDfas) {
    for (Dfa dfa : sample_dfas()) {
        dfa.name = "r\"and\\om";  // needs escaping
        const std::string text = write_dfa_json(dfa);
        const Dfa back = read_dfa_json(text, "roundtrip");
        EXPECT_EQ(back.delta, dfa.delta);
        EXPECT_EQ(back.accepting, dfa.accepting);
        EXPECT_EQ(back.start, dfa.start);
        EXPECT_EQ(back.alphabet, dfa.alphabet);
        EXPECT_EQ(back.name, dfa.name);
        EXPECT_EQ(write_dfa_json(back), text);
    }
}

TEST(DfaJson, NullArcsGetAReportedSink) {
    LoadNotes notes;
    const Dfa dfa = read_dfa_json(read_text_file(data_dir + "partial.json"), "partial.json", &notes);
    ASSERT_EQ(dfa.num_states(), 4u);
    EXPECT_TRUE(notes.added_sink);
    EXPECT_EQ(notes.missing_arcs, 2u);
    ASSERT_EQ(notes.messages.size(), 1u);
    EXPECT_EQ(notes.messages[0], "added a rejecting sink state 3 for 2 missing arcs");
    EXPECT_EQ(dfa.next(0, 1), 3u);
    EXPECT_EQ(dfa.next(1, 0), 3u);
    EXPECT_EQ(dfa.next(3, 0), 3u);
    EXPECT_EQ(dfa.next(3, 1), 3u);
    EXPECT_FALSE(dfa.accepting[3]);
    EXPECT_TRUE(accepts(dfa, parse_word(dfa, "ab")));
    EXPECT_FALSE(accepts(dfa, parse_word(dfa, "ba")));
}

TEST(DfaJson, SinkGetsAFreshNameWhenStatesAreNamed) {
    const std::string text = R"({"format": "statetrack.dfa/1", "alphabet": ["a"], "states": ["sink", "x"],
        "start": 0, "accepting": [1], "transitions": [[1], [null]]})";
    const Dfa dfa = read_dfa_json(text, "t.json");
    EXPECT_EQ(dfa.state_names, (std::vector<std::string>{"sink", "x", "sink2"}));
}

TEST(DfaJson, UnknownFieldsAreReportedNotFatal) {
    LoadNotes notes;
    read_dfa_json(R"({"format": "statetrack.dfa/1", "alphabet": ["a"], "states": 1, "start": 0,
        "accepting": [], "transitions": [[0]], "comment": "hi"})", "t.json", &notes);
    ASSERT_EQ(notes.messages.size(), 1u);
    EXPECT_EQ(notes.messages[0], "ignored unknown field /comment");
}

TEST(DfaJson, BadInputNamesFileAndPlace) {
    const auto error = [](const std::string& file) {
        return input_error([&] { read_dfa_json(read_text_file(data_dir + file), file); });
    };
    EXPECT_EQ(error("bad_range.json"), "bad_range.json: /transitions/1/1: target 9 out of range 0..1");
    EXPECT_EQ(error("bad_type.json"),
              "bad_type.json: /transitions/1/1: expected a target (a non-negative integer), got string");
    EXPECT_EQ(error("bad_duplicate.json"), "bad_duplicate.json: /alphabet/2: duplicate symbol \"a\" (also /alphabet/0)");
    EXPECT_EQ(error("bad_missing.json"), "bad_missing.json: /start: missing field");
    EXPECT_EQ(error("bad_format.json"), "bad_format.json: /format: expected \"statetrack.dfa/1\", got \"statetrack.dfa/2\"");
    // The missing ']' is noticed at the closing brace on line 8.
    const std::string syntax = error("bad_syntax.json");
    EXPECT_TRUE(syntax.starts_with("bad_syntax.json: line 8, column 1: malformed JSON: syntax error")) << syntax;
    EXPECT_TRUE(error("empty.json").starts_with("empty.json: line 1, column 1: malformed JSON")) << error("empty.json");
}

TEST(DfaJson, EachWrongShapeIsCaught) {
    const std::string head = R"({"format": "statetrack.dfa/1", )";
    const auto error = [&](const std::string& rest) { return input_error([&] { read_dfa_json(head + rest, "x.json"); }); };
    EXPECT_EQ(error(R"("alphabet": [], "states": 1, "start": 0, "accepting": [], "transitions": [[]]})"),
              "x.json: /alphabet: the alphabet is empty");
    EXPECT_EQ(error(R"("alphabet": ["a", 3], "states": 1, "start": 0, "accepting": [], "transitions": [[0]]})"),
              "x.json: /alphabet/1: expected a symbol (a string), got a non-negative integer");
    EXPECT_EQ(error(R"("alphabet": ["a"], "states": 0, "start": 0, "accepting": [], "transitions": []})"),
              "x.json: /states: the automaton has no states");
    EXPECT_EQ(error(R"("alphabet": ["a"], "states": -2, "start": 0, "accepting": [], "transitions": []})"),
              "x.json: /states: expected a state count or a list of state names, got a negative integer");
    EXPECT_EQ(error(R"("alphabet": ["a"], "states": ["p", "p"], "start": 0, "accepting": [], "transitions": [[0], [0]]})"),
              "x.json: /states/1: duplicate state name \"p\" (also /states/0)");
    EXPECT_EQ(error(R"("alphabet": ["a"], "states": 2, "start": 2, "accepting": [], "transitions": [[0], [0]]})"),
              "x.json: /start: start state 2 out of range 0..1");
    EXPECT_EQ(error(R"("alphabet": ["a"], "states": 2, "start": 0, "accepting": [1.5], "transitions": [[0], [0]]})"),
              "x.json: /accepting/0: expected a state (a non-negative integer), got a fractional number");
    EXPECT_EQ(error(R"("alphabet": ["a"], "states": 2, "start": 0, "accepting": {}, "transitions": [[0], [0]]})"),
              "x.json: /accepting: expected an array, got object");
    EXPECT_EQ(error(R"("alphabet": ["a"], "states": 2, "start": 0, "accepting": [], "transitions": [[0]]})"),
              "x.json: /transitions: 1 rows for 2 states (one row per state is needed)");
    EXPECT_EQ(error(R"("alphabet": ["a"], "states": 2, "start": 0, "accepting": [], "transitions": [[0], [0, 1]]})"),
              "x.json: /transitions/1: 2 targets for 1 letters (one per letter, null for a missing arc)");
    EXPECT_EQ(error(R"("alphabet": ["a", "b"], "states": 4000000000, "start": 0, "accepting": [], "transitions": []})"),
              "x.json: /states: 4000000000 states x 2 letters exceeds the limit of 268435456 table entries (docs/formats.md)");
    EXPECT_EQ(input_error([] { read_dfa_json("[1, 2]", "y.json"); }), "y.json: /: expected a JSON object, got array");
}

TEST(Att, ReadsPartialAutomatonWithSink) {
    LoadNotes notes;
    const Dfa dfa = read_att(read_text_file(data_dir + "ab-prefix.att"), "ab-prefix.att", &notes);
    EXPECT_EQ(dfa.alphabet, (std::vector<std::string>{"a", "b"}));  // first appearance
    ASSERT_EQ(dfa.num_states(), 4u);
    EXPECT_TRUE(notes.added_sink);
    EXPECT_EQ(notes.missing_arcs, 2u);
    const Dfa from_json = read_dfa_json(read_text_file(data_dir + "partial.json"), "partial.json");
    EXPECT_EQ(dfa.delta, from_json.delta);
    EXPECT_EQ(dfa.accepting, from_json.accepting);
}

TEST(Att, GivenAlphabetFixesLetterOrder) {
    const std::vector<std::string> alphabet = {"b", "a", "c"};
    LoadNotes notes;
    const Dfa dfa = read_att("0\t0\ta\ta\n0\t0\tb\tb\n0\n", "t.att", &notes, &alphabet);
    EXPECT_EQ(dfa.alphabet, alphabet);
    EXPECT_EQ(dfa.num_states(), 2u);  // 'c' is missing everywhere: sink
    EXPECT_EQ(dfa.next(0, 2), 1u);
    EXPECT_EQ(input_error([&] { read_att("0\t0\tz\tz\n", "t.att", nullptr, &alphabet); }),
              "t.att: line 1: symbol 'z' is not in the given alphabet");
}

TEST(Att, RoundTripKeepsTheTable) {
    for (const Dfa& dfa : sample_dfas()) {
        const std::string text = write_att(dfa);
        const Dfa back = read_att(text, "roundtrip.att");
        // The writer renumbers so the start state is 0 (AT&T convention): compare languages and the
        // table after the same renumbering.
        ASSERT_EQ(back.num_states(), dfa.num_states());
        EXPECT_EQ(back.start, 0u);
        EXPECT_EQ(back.alphabet, dfa.alphabet);
        std::vector<State> number(dfa.num_states());
        for (std::size_t q = 0; q < number.size(); ++q) number[q] = State(q);
        std::swap(number[0], number[dfa.start]);
        for (std::size_t q = 0; q < dfa.num_states(); ++q) {
            EXPECT_EQ(back.accepting[number[q]], dfa.accepting[q]);
            for (Letter a = 0; a < dfa.num_letters(); ++a) EXPECT_EQ(back.next(number[q], a), number[dfa.next(State(q), a)]);
        }
        EXPECT_TRUE(equivalent(back, dfa));
        EXPECT_EQ(write_att(back), write_att(read_att(write_att(back), "again.att")));
    }
}

TEST(Att, BadInputNamesTheLine) {
    const auto error = [](const std::string& file) {
        return input_error([&] { read_att(read_text_file(data_dir + file), file); });
    };
    EXPECT_EQ(error("bad_nondeterministic.att"),
              "bad_nondeterministic.att: line 4: not deterministic: state 0 on 'b' goes to 1 here and to 0 on line 3");
    EXPECT_EQ(error("bad_transducer.att"),
              "bad_transducer.att: line 1: input symbol 'a' differs from output symbol 'b' (only acceptors are supported)");
    EXPECT_EQ(error("bad_line.att"), "bad_line.att: line 2: expected a weight (a number), got 'x'");
    EXPECT_EQ(error("bad_fields.att"),
              "bad_fields.att: line 1: expected 'src dst in out [weight]' or 'state [weight]', got 3 fields");
    EXPECT_EQ(error("empty.att"), "empty.att: the file is empty (no arcs and no accepting states)");
    EXPECT_EQ(error("blank.att"), "blank.att: the file is empty (no arcs and no accepting states)");
    EXPECT_EQ(input_error([] { read_att("0\t-1\ta\ta\n", "n.att"); }), "n.att: line 1: expected a state number, got '-1'");
    EXPECT_EQ(input_error([] { read_att("0\t99999999999\ta\ta\n", "n.att"); }),
              "n.att: line 1: state 99999999999 exceeds the limit of 16777216 states");
    EXPECT_EQ(input_error([] { read_att("0\t0\t<eps>\t<eps>\n", "n.att"); }),
              "n.att: line 1: epsilon arc '<eps>': the automaton must be deterministic");
    EXPECT_EQ(input_error([] { read_att("0\n", "n.att"); }), "n.att: no arcs and no alphabet: the alphabet is empty");
    EXPECT_EQ(input_error([] { read_att("0\t0\t\xe9\t\xe9\n", "latin1.att"); }), "latin1.att: line 1: symbol is not valid UTF-8");
    EXPECT_EQ(read_att("0\t0\t\xc3\xa9\t\xc3\xa9\n", "utf8.att").alphabet, (std::vector<std::string>{"\xc3\xa9"}));
    // The same arc twice is not non-determinism.
    EXPECT_EQ(read_att("0\t0\ta\ta\n0\t0\ta\ta\n", "dup.att").num_states(), 1u);
}

TEST(Att, WriterRefusesUnwritableSymbols) {
    Dfa dfa = make_dfa(1, {"a b"}, "spaced");
    EXPECT_EQ(input_error([&] { write_att(dfa); }),
              "spaced: /alphabet/0: symbol 'a b' cannot be written in AT&T text (empty or contains whitespace)");
}

TEST(AttSymbols, ReadsOpenFstSymbolTableInFileOrder) {
    EXPECT_EQ(read_att_symbols("<EPS>\t0\nz\t122\na\t97\n", "s.txt"), (std::vector<std::string>{"z", "a"}));
    EXPECT_EQ(input_error([] { read_att_symbols("a\t1\na\t2\n", "s.txt"); }), "s.txt: line 2: duplicate symbol 'a'");
    EXPECT_EQ(input_error([] { read_att_symbols("a\n", "s.txt"); }), "s.txt: line 1: expected 'symbol number', got 1 fields");
    EXPECT_EQ(input_error([] { read_att_symbols("<EPS>\t0\n", "s.txt"); }), "s.txt: the symbol table lists no symbols");
}

// The structure of a DOT file, independent of whitespace: node attributes and edges with labels.
struct DotGraph {
    std::set<std::string> nodes;  // "id label shape"
    std::set<std::string> edges;  // "from -> to : label"
};

DotGraph parse_dot(const std::string& text) {
    DotGraph g;
    const std::regex node(R"re(\s*(\w+)\s*\[label="([^"]*)"(?:,\s*shape=(\w+))?\];)re");
    const std::regex edge(R"re(\s*(\w+)\s*->\s*(\w+)\s*(?:\[label="([^"]*)"\])?;)re");
    std::smatch m;
    std::size_t begin = 0;
    while (begin < text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(begin, end - begin);
        begin = end + 1;
        if (std::regex_match(line, m, node)) g.nodes.insert(m[1].str() + " " + m[2].str() + " " + m[3].str());
        else if (std::regex_match(line, m, edge)) g.edges.insert(m[1].str() + " -> " + m[2].str() + " : " + m[3].str());
    }
    return g;
}

TEST(Dot, StructureOfParity) {
    const Dfa dfa = read_dfa_json(read_text_file(data_dir + "parity.json"), "parity.json");
    const std::string text = write_dot(dfa);
    EXPECT_TRUE(text.starts_with("digraph \"parity\" {"));
    const DotGraph g = parse_dot(text);
    EXPECT_EQ(g.nodes, (std::set<std::string>{"0 even doublecircle", "1 odd "}));
    EXPECT_EQ(g.edges, (std::set<std::string>{"__start -> 0 : ", "0 -> 0 : 0", "0 -> 1 : 1", "1 -> 1 : 0", "1 -> 0 : 1"}));
}

TEST(Dot, ParallelArcsShareOneEdge) {
    Dfa dfa = make_dfa(2, {"a", "b", "c"}, "merge");
    dfa.next(0, 0) = 1;
    dfa.next(0, 2) = 1;
    dfa.accepting[1] = true;
    dfa.start = 1;
    const DotGraph g = parse_dot(write_dot(dfa));
    EXPECT_EQ(g.nodes, (std::set<std::string>{"0 0 ", "1 1 doublecircle"}));
    EXPECT_EQ(g.edges, (std::set<std::string>{"__start -> 1 : ", "0 -> 1 : a, c", "0 -> 0 : b", "1 -> 1 : a, b, c"}));
}

TEST(Table, MarksStartAndAccepting) {
    const Dfa dfa = read_dfa_json(read_text_file(data_dir + "parity.json"), "parity.json");
    EXPECT_EQ(write_table(dfa),
              "           0     1\n"
              "-> * even  even  odd\n"
              "     odd   odd   even\n");
}

TEST(LoadDfa, DispatchesOnExtensionAndReportsProblems) {
    LoadNotes notes;
    const Dfa att = load_dfa(data_dir + "ab-prefix.att", &notes);
    EXPECT_EQ(att.name, "ab-prefix");
    EXPECT_TRUE(notes.added_sink);
    const Dfa json = load_dfa(data_dir + "parity.json");
    EXPECT_EQ(json.name, "parity");
    EXPECT_EQ(input_error([] { load_dfa(data_dir + "missing.json"); }), data_dir + "missing.json: no such file");
    EXPECT_EQ(input_error([] { load_dfa(data_dir + "parity.txt"); }),
              data_dir + "parity.txt: unknown DFA format: expected a .json or .att file, or zoo:NAME[:ARGS]");
    EXPECT_TRUE(input_error([] { load_dfa("zoo:no-such-language"); }).starts_with("zoo:no-such-language"));
}

TEST(LoadDfa, ZooLanguages) {
    const Dfa parity = load_dfa("zoo:parity");
    EXPECT_EQ(parity.num_letters(), 2u);
    EXPECT_EQ(minimize(parity).num_states(), 2u);
    EXPECT_EQ(minimize(load_dfa("zoo:mod:3")).num_states(), 3u);
}

TEST(LoadDfa, FindsMlRegTestAlphabetBesideTheFile) {
    const std::string dir = STATETRACK_TEST_DATA "/mlregtest/att/";
    EXPECT_EQ(att_alphabet_file_for(dir + "04.03.TLT.2.1.0.att"), dir + "alph4.txt");
    EXPECT_EQ(att_alphabet_file_for(dir + "64.64.Zp.5.1.9.att"), dir + "alph64.txt");
    EXPECT_EQ(att_alphabet_file_for(dir + "99.x.att"), "");
    EXPECT_EQ(att_alphabet_file_for(data_dir + "ab-prefix.att"), "");
    LoadNotes notes;
    const Dfa dfa = load_dfa(dir + "04.03.TLT.2.1.0.att", &notes);
    EXPECT_EQ(dfa.alphabet, (std::vector<std::string>{"a", "b", "c", "d"}));  // file lists c d b a first
    EXPECT_FALSE(notes.added_sink);
    EXPECT_EQ(notes.messages, (std::vector<std::string>{"symbols named by alph4.txt"}));
}

}  // namespace
