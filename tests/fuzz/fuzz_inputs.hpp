#pragma once
// One input of each fuzz target, as a function: the libFuzzer targets (fuzz_*.cpp) call these,
// and tests/robustness replays the seed and regression corpora through the very same functions
// with the normal compiler. The rule for every loader: return a value or throw InputError
// (LimitError included). Any other exception, a crash, a sanitizer report, a hang or running out
// of memory is a finding; so is an accepted input that does not survive write -> read -> write.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statetrack/automata/dfa.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/gpu/checkpoint.hpp"
#include "statetrack/gpu/sweep.hpp"
#include "statetrack/lrnn/evaluate.hpp"
#include "statetrack/lrnn/format.hpp"

namespace statetrack::fuzz {

// A property of an accepted input failed (libFuzzer reports the escaping exception as a crash).
struct Finding : std::logic_error {
    using std::logic_error::logic_error;
};

// A few bytes of AT&T can name a state near the 2^24 limit (docs/limits.md); loading that is
// legitimate, but writing and re-reading a table of millions of arcs per input would only measure
// the writer's speed, so the round trip is checked for tables up to this size.
inline constexpr std::size_t max_round_trip_entries = std::size_t(1) << 16;

// Runs `load`; an InputError is the documented way to refuse input and is swallowed.
template <class Load>
void value_or_input_error(Load load) {
    try {
        load();
    } catch (const InputError&) {
    }
}

inline void one_dfa_json(const std::string& text) {
    value_or_input_error([&] {
        const automata::Dfa dfa = automata::read_dfa_json(text, "fuzz.json");
        if (dfa.delta.size() > max_round_trip_entries) return;
        const std::string once = automata::write_dfa_json(dfa);
        if (automata::write_dfa_json(automata::read_dfa_json(once, "written.json")) != once)
            throw Finding("statetrack.dfa/1: write -> read -> write differs");
    });
}

// AT&T names states by number, so a few bytes ("0 9999999 a a") make the loader build, complete
// and validate a table of millions of entries: legitimate (within docs/limits.md, and tested at the
// limits by test_limits), but loops over a table that the text does not fill only spend the
// fuzzer's time. So the work per input is kept proportional to its length: a table of more than
// this many entries per input byte (plus a constant) is loaded from a renumbered copy of the text
// (att_compact_states).
inline constexpr std::size_t att_entries_per_byte = 4;
inline constexpr std::size_t att_entries_base = 256;
// The round trip writes one line per table entry and reads it back, several times the loader's
// cost per entry: it runs for tables of at most one entry per two input bytes (every dense file).
inline bool att_round_trip_cheap(std::size_t entries, std::size_t text_size) {
    return entries <= max_round_trip_entries && entries <= att_entries_base + text_size / 2;
}

// When the table the loader would build (largest state number + 2 for the sink, times the number
// of symbols, at least 4 for the fixed alphabet) exceeds att_entries_base + att_entries_per_byte x
// the text's length: the same text with its state numbers replaced by their ranks among the
// numbers it uses (0 kept as 0). That is an order-preserving bijection, so the lines, symbols,
// weights, accepting states, determinism conflicts, errors and line numbers stay as they are, and
// the DFA loaded is the original one without the states that no line mentions (unreachable, every
// arc to the sink). Otherwise, and when a state number or the table is beyond a limit (the loader
// refuses those before it allocates anything, so the limit checks stay fuzzed): the text unchanged.
// Defined in att_compact.cpp, which is compiled without coverage instrumentation: the fuzzer is
// guided by the loader's coverage only, and the helper costs a fraction of the loader.
std::string att_compact_states(const std::string& text);

inline void one_att(const std::string& input) {
    const std::string text = att_compact_states(input);
    value_or_input_error([&] {
        const automata::Dfa dfa = automata::read_att(text, "fuzz.att");
        if (!att_round_trip_cheap(dfa.delta.size(), text.size())) return;
        std::string once;
        try {
            once = automata::write_att(dfa);
        } catch (const InputError&) {
            return;  // a symbol AT&T text cannot hold: the writer refuses it, as documented
        }
        if (automata::write_att(automata::read_att(once, "written.att")) != once)
            throw Finding("AT&T: write -> read -> write differs");
    });
    value_or_input_error([&] { automata::read_att_symbols(text, "fuzz.txt"); });
    // Under a fixed symbol table: the path load_dfa takes for MLRegTest files.
    static const std::vector<std::string> alphabet = {"a", "b", "c", "d"};
    value_or_input_error([&] { automata::read_att(text, "fuzz.att", nullptr, &alphabet); });
}

inline void one_lrnn(const std::string& text) {
    value_or_input_error([&] {
        const lrnn::Network net = lrnn::read_network_json(text, "fuzz.lrnn.json");
        const std::string once = lrnn::write_network_json(net);
        if (lrnn::write_network_json(lrnn::read_network_json(once, "written.lrnn.json")) != once)
            throw Finding("statetrack.lrnn/1: write -> read -> write differs");
        // A validated model runs: a few tokens in fp64 (what `statetrack run` does by default).
        if (lrnn::total_dimension(net) <= 4096 && !net.alphabet.empty()) {
            std::vector<automata::Letter> word;
            for (std::size_t i = 0; i < 4; ++i) word.push_back(automata::Letter(i % net.alphabet.size()));
            lrnn::run_network(net, word, lrnn::parse_precision("fp64"), true);
        }
    });
}

// The first byte picks an alphabet (one-character symbols, symbols that are prefixes of others,
// separators as symbols); the rest is the --word text of `statetrack run`.
inline void one_word(const std::string& bytes) {
    if (bytes.empty()) return;
    static const std::vector<std::vector<std::string>> alphabets = {
        {"0", "1"}, {"a", "b", "c"}, {"ab", "a", "b"}, {"push", "pop", "x"}, {"0", "1", "01", "<eps>"}, {",", "-"}};
    const automata::Dfa dfa = automata::make_dfa(1, alphabets[static_cast<unsigned char>(bytes[0]) % alphabets.size()]);
    value_or_input_error([&] {
        const auto word = automata::parse_word(dfa, bytes.substr(1), "--word");
        for (auto a : word)
            if (a >= dfa.num_letters()) throw Finding("parse_word: letter out of range");
        // format_word joins with spaces; that parses back whenever no symbol holds a separator.
        bool separable = true;
        for (const auto& s : dfa.alphabet) separable = separable && s.find_first_of(" \t\n,") == std::string::npos;
        if (separable && !word.empty() && automata::parse_word(dfa, automata::format_word(dfa, word) + " ") != word)
            throw Finding("parse_word: format -> parse differs");
    });
}

// The FNV-1a checksum of the checkpoint format (gpu/include/statetrack/gpu/checkpoint.hpp).
inline std::uint64_t checkpoint_checksum(const std::string& bytes) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ULL;
    return h;
}

// Random bytes almost never carry a valid checksum, so the input is decoded as given and again
// with its correct checksum appended (reaching the header and weight parsing behind it).
inline void one_checkpoint(const std::string& bytes) {
    value_or_input_error([&] { gpu::decode_checkpoint(bytes, "fuzz.ckpt"); });
    std::string sealed = bytes;
    const std::uint64_t sum = checkpoint_checksum(bytes);
    sealed.append(reinterpret_cast<const char*>(&sum), 8);
    value_or_input_error([&] {
        const gpu::Checkpoint c = gpu::decode_checkpoint(sealed, "fuzz.ckpt");
        if (gpu::encode_checkpoint(gpu::decode_checkpoint(gpu::encode_checkpoint(c), "reencoded.ckpt")) !=
            gpu::encode_checkpoint(c))
            throw Finding("checkpoint: encode -> decode -> encode differs");
    });
}

// A sweep spec multiplies its lists into runs (up to the documented 100,000, docs/sweeps.md), so a
// few bytes can ask for thousands of runs, each validated: legitimate, but slow per input. A spec
// whose lists multiply to more runs than this per input byte (plus a constant) is skipped; the
// limit itself is tested by test_cli_sweep.
inline constexpr std::size_t sweep_runs_base = 64, sweep_runs_per_byte = 1;
inline double sweep_runs_asked(const nlohmann::json& spec) {
    auto lists = [](const nlohmann::json& object) {
        double product = 1;
        for (const auto& [key, value] : object.items())
            if (key != "grid" && value.is_array()) product *= double(std::max<std::size_t>(value.size(), 1));
        return product;
    };
    if (!spec.is_object()) return 0;
    const double base = lists(spec);
    const auto grid = spec.find("grid");
    if (grid == spec.end() || !grid->is_array()) return base;
    double total = 0;  // an upper bound: a grid entry's list may replace one of the spec's
    for (const auto& entry : *grid) total += base * (entry.is_object() ? lists(entry) : 1);
    return total;
}

// A sweep spec (statetrack.sweep/1, `statetrack sweep SPEC`): parsed, expanded and every run
// validated. Each run's id is the id of its configuration, each run turns into a train command
// line, and the spec as recorded (SweepSpec::source, written to the sweep's sweep.json) expands to
// the same runs.
inline void one_sweep_spec(const std::string& text) {
    const nlohmann::json spec = nlohmann::json::parse(text, nullptr, false);
    if (spec.is_discarded() || sweep_runs_asked(spec) > double(sweep_runs_base + sweep_runs_per_byte * text.size())) return;
    value_or_input_error([&] {
        const gpu::SweepSpec parsed = gpu::parse_sweep_spec(spec, "fuzz.json");
        for (const gpu::SweepRun& run : parsed.runs) {
            if (gpu::sweep_run_id(run.config) != run.id) throw Finding("sweep: a run's id is not the id of its configuration");
            gpu::train_arguments(run, "out", "cuda");
        }
        const gpu::SweepSpec again = gpu::parse_sweep_spec(parsed.source, "sweep.json");
        if (again.runs.size() != parsed.runs.size()) throw Finding("sweep: the recorded spec expands to other runs");
        for (std::size_t i = 0; i < again.runs.size(); ++i)
            if (again.runs[i].id != parsed.runs[i].id || again.runs[i].config != parsed.runs[i].config)
                throw Finding("sweep: the recorded spec expands to other runs");
    });
}

}  // namespace statetrack::fuzz
