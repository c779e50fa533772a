// Replays the fuzz corpora (tests/fuzz/corpus: seeds; tests/fuzz/regressions: every finding of a
// campaign, fixed) through the normal loaders with the normal compiler, using the same per-input
// checks as the libFuzzer targets (tests/fuzz/fuzz_inputs.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../fuzz/fuzz_inputs.hpp"
#include "../cli/run_statetrack.hpp"

#ifndef STATETRACK_FUZZ_CORPUS  // set by tests/fuzz/CMakeLists.txt; the same folder otherwise
#define STATETRACK_FUZZ_CORPUS STATETRACK_SOURCE_DIR "/tests/fuzz"
#endif

namespace {

namespace fs = std::filesystem;
using namespace statetrack;

using statetrack::testing::read_text;

// Every file of corpus/<target> and regressions/<target>; returns how many were replayed.
template <class One>
std::size_t replay(const std::string& target, One one) {
    std::size_t files = 0;
    for (const char* kind : {"corpus", "regressions"}) {
        const fs::path dir = fs::path(STATETRACK_FUZZ_CORPUS) / kind / target;
        if (!fs::is_directory(dir)) continue;
        for (const auto& entry : fs::directory_iterator(dir)) {
            if (!entry.is_regular_file() || entry.path().filename() == "README.md") continue;
            ++files;
            const std::string bytes = read_text(entry.path());
            try {
                one(bytes);
            } catch (const std::exception& e) {
                ADD_FAILURE() << entry.path() << ": " << e.what();
            }
        }
    }
    return files;
}

TEST(FuzzCorpus, DfaJson) { EXPECT_GE(replay("dfa_json", fuzz::one_dfa_json), 10u); }
TEST(FuzzCorpus, Att) { EXPECT_GE(replay("att", fuzz::one_att), 10u); }
TEST(FuzzCorpus, Lrnn) { EXPECT_GE(replay("lrnn", fuzz::one_lrnn), 5u); }
TEST(FuzzCorpus, Word) { EXPECT_GE(replay("word", fuzz::one_word), 5u); }
TEST(FuzzCorpus, Checkpoint) { EXPECT_GE(replay("checkpoint", fuzz::one_checkpoint), 3u); }
TEST(FuzzCorpus, SweepSpec) { EXPECT_GE(replay("sweep", fuzz::one_sweep_spec), 10u); }

TEST(FuzzCorpus, OnlyInputErrorsAreSwallowed) {
    // The replay can fail: an InputError is the documented refusal, anything else escapes.
    EXPECT_NO_THROW(fuzz::value_or_input_error([] { throw InputError("f", "p", "m"); }));
    EXPECT_NO_THROW(fuzz::value_or_input_error([] { throw LimitError("f", "p", "m"); }));
    EXPECT_THROW(fuzz::value_or_input_error([] { throw std::out_of_range("vector::at"); }), std::out_of_range);
    EXPECT_THROW(fuzz::value_or_input_error([] { throw nlohmann::json::type_error::create(302, "type", nullptr); }),
                 nlohmann::json::exception);
}

TEST(FuzzCorpus, SealedSeedCheckpointsDecode) {
    // The checkpoint seeds are stored without their checksum (the fuzz target appends it); sealed,
    // each must decode to a real checkpoint, or the fuzzer would never get past the header.
    const fs::path dir = fs::path(STATETRACK_FUZZ_CORPUS) / "corpus" / "checkpoint";
    std::size_t decoded = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        std::string bytes = read_text(entry.path());
        const std::uint64_t sum = fuzz::checkpoint_checksum(bytes);
        bytes.append(reinterpret_cast<const char*>(&sum), 8);
        const gpu::Checkpoint c = gpu::decode_checkpoint(bytes, entry.path().string());
        EXPECT_FALSE(c.params.empty());
        ++decoded;
    }
    EXPECT_GE(decoded, 3u);
}

}  // namespace
