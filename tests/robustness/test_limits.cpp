// Documented size limits (docs/limits.md): each is tested at the limit (accepted, or refused for
// another reason only after the size check passed) and just beyond it (a LimitError naming the
// place), always without allocating what the input asks for.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/format.hpp"
#include "../lrnn/limit_model.hpp"

namespace {

namespace fs = std::filesystem;
using namespace statetrack;
using nlohmann::json;

// What `load` throws: "limit: ..." for a LimitError, "input: ..." for another InputError, "" for none.
template <class Load>
std::string outcome(Load load) {
    try {
        load();
    } catch (const LimitError& e) {
        return std::string("limit: ") + e.what();
    } catch (const InputError& e) {
        return std::string("input: ") + e.what();
    }
    return {};
}

bool is_limit(const std::string& outcome) { return outcome.rfind("limit: ", 0) == 0; }

TEST(Limits, InputFileSize) {
    const fs::path path = fs::temp_directory_path() / ("statetrack-limit-" + std::to_string(::getpid()) + ".json");
    // A sparse file: its size is beyond the limit, its disk use nothing. Refused before reading.
    std::ofstream(path).close();
    fs::resize_file(path, max_input_file_bytes + 1);
    const std::string beyond = outcome([&] { read_text_file(path.string()); });
    EXPECT_TRUE(is_limit(beyond)) << beyond;
    EXPECT_NE(beyond.find(path.string()), std::string::npos);
    EXPECT_TRUE(is_limit(outcome([&] { automata::load_dfa(path.string()); })));
    EXPECT_TRUE(is_limit(outcome([&] { lrnn::load_network(path.string()); })));
#if !defined(__SANITIZE_ADDRESS__)
    // At the limit the file is read (256 MiB of zero bytes, then refused as malformed JSON).
    fs::resize_file(path, max_input_file_bytes);
    EXPECT_EQ(read_text_file(path.string()).size(), max_input_file_bytes);
#endif
    fs::remove(path);
}

// A file without a size (a device, a pipe) is counted while it is read: /dev/zero behind a link
// named like a DFA file stops at the limit instead of filling memory.
TEST(Limits, InputWithoutASizeStopsAtTheLimit) {
    if (!fs::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
    const fs::path link = fs::temp_directory_path() / ("statetrack-zero-" + std::to_string(::getpid()) + ".json");
    fs::remove(link);
    fs::create_symlink("/dev/zero", link);
    const std::string read = outcome([&] { read_text_file(link.string()); });
    EXPECT_TRUE(is_limit(read)) << read;
    EXPECT_NE(read.find("not a regular file"), std::string::npos) << read;
    EXPECT_TRUE(is_limit(outcome([&] { automata::load_dfa(link.string()); })));
    fs::remove(link);
}

// A statetrack.dfa/1 document with k letters and n states whose transition rows are missing.
std::string dfa_without_rows(std::size_t states, std::size_t letters) {
    json alphabet = json::array();
    for (std::size_t a = 0; a < letters; ++a) {
        std::string symbol = "s";  // appended, not "s" + ...: GCC 12 gives a false -Wrestrict there
        symbol += std::to_string(a);
        alphabet.push_back(symbol);
    }
    return json{{"format", "statetrack.dfa/1"}, {"alphabet", alphabet}, {"states", states},
                {"start", 0}, {"accepting", json::array()}, {"transitions", json::array()}}
        .dump();
}

TEST(Limits, TransitionTableEntries) {
    // At the limit (states x letters == 2^28) the size check passes and the missing rows are reported.
    const std::size_t letters = 1024, states = automata::max_table_entries / letters;
    const std::string at = outcome([&] { automata::read_dfa_json(dfa_without_rows(states, letters), "at.json"); });
    EXPECT_FALSE(is_limit(at)) << at;
    EXPECT_NE(at.find("0 rows for 262144 states"), std::string::npos) << at;
    const std::string beyond = outcome([&] { automata::read_dfa_json(dfa_without_rows(states + 1, letters), "beyond.json"); });
    EXPECT_TRUE(is_limit(beyond)) << beyond;
    EXPECT_NE(beyond.find("beyond.json: /states"), std::string::npos) << beyond;
}

TEST(Limits, AttStateNumbers) {
    // State numbers up to 2^24 - 1 are read (a 2^24-state table over one letter, 64 MiB).
    const std::string top = std::to_string((std::uint64_t(1) << 24) - 1);
    automata::Dfa dfa;
    ASSERT_EQ(outcome([&] { dfa = automata::read_att("0 " + top + " a a\n" + top + "\n", "at.att"); }), "");
    // States 0..2^24-1, plus the rejecting sink that completes the missing arcs.
    EXPECT_EQ(dfa.num_states(), (std::size_t(1) << 24) + 1);
    EXPECT_TRUE(dfa.accepting[(std::size_t(1) << 24) - 1]);
    const std::string beyond = outcome([&] { automata::read_att("0 16777216 a a\n", "beyond.att"); });
    EXPECT_TRUE(is_limit(beyond)) << beyond;
    EXPECT_NE(beyond.find("beyond.att: line 1"), std::string::npos) << beyond;
}

// h0 and `extra` biases, each held dense: (1 + extra) * dim numbers although the file lists one
// entry of each (tests/lrnn/limit_model.hpp).
json model(std::size_t dim, std::size_t extra) { return statetrack::testing::limit_model(dim, extra); }

TEST(Limits, ModelDimension) {
    const std::size_t max_dim = std::size_t(1) << 16;  // docs/limits.md
    lrnn::Network net;
    ASSERT_EQ(outcome([&] { net = lrnn::read_network_json(model(max_dim, 0).dump(), "at.lrnn.json"); }), "");
    EXPECT_EQ(net.layers[0].dim, max_dim);
    const std::string beyond = outcome([&] { lrnn::read_network_json(model(max_dim + 1, 0).dump(), "beyond.lrnn.json"); });
    EXPECT_NE(beyond.find("beyond.lrnn.json: /layers/0/dim"), std::string::npos) << beyond;
}

TEST(Limits, ModelNumbers) {
    // 2^23 numbers in all, counting each dense vector at its full dimension: dim 2^16 holds 128
    // (h0 and 127 biases). One more is refused before anything is built, so this costs no memory.
    const std::size_t dim = std::size_t(1) << 16;
    json at = model(dim, 127);
    at["layers"][0]["h0"] = "not a vector";  // refused right after the size check passed
    const std::string at_outcome = outcome([&] { lrnn::read_network_json(at.dump(), "at.lrnn.json"); });
    EXPECT_FALSE(is_limit(at_outcome)) << at_outcome;
    EXPECT_NE(at_outcome.find("/layers/0/h0"), std::string::npos) << at_outcome;
    const std::string beyond = outcome([&] { lrnn::read_network_json(model(dim, 128).dump(), "beyond.lrnn.json"); });
    EXPECT_TRUE(is_limit(beyond)) << beyond;
    EXPECT_NE(beyond.find("beyond.lrnn.json: /layers"), std::string::npos) << beyond;
    // A small model far below the limit reads fine.
    EXPECT_EQ(outcome([&] { lrnn::read_network_json(model(4, 3).dump(), "small.lrnn.json"); }), "");
}

}  // namespace
