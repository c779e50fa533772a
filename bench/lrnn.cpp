// The LRNN compiler and evaluators (issue 4): compile time (compile alone, then the two checks
// `statetrack compile` runs before writing: all short words, and the exact closure), then evaluation throughput in tokens/s for fp32, fp64
// and exact (GMP rationals, and the integer fast path the checks use) beside plain DFA table
// simulation on the same random word. Prints a table and writes JSON (default bench_lrnn.json).
// Usage: bench_lrnn [OUTPUT.json] [--mlregtest FILE.att] [--tokens N]
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "statetrack/automata/decompose.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/integer_eval.hpp"
#include "statetrack/lrnn/precision.hpp"
#include "statetrack/lrnn/scalars.hpp"

namespace sa = statetrack::automata;
namespace sl = statetrack::lrnn;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// Process CPU time: on the shared, loaded machine the steadier figure for single-threaded phases.
double cpu_since(std::clock_t c0) { return double(std::clock() - c0) / CLOCKS_PER_SEC; }

// Repeats `run` (which processes `tokens` tokens) until at least 0.3 s have passed; tokens/s.
template <class F>
double throughput(std::size_t tokens, F&& run) {
    std::size_t done = 0;
    const auto t0 = Clock::now();
    do {
        run();
        done += tokens;
    } while (seconds_since(t0) < 0.3);
    return double(done) / seconds_since(t0);
}

std::uint64_t sink = 0;  // keeps the loops' results alive

double table_rate(const sa::Dfa& dfa, const std::vector<sa::Letter>& word) {
    return throughput(word.size(), [&] {
        sa::State q = dfa.start;
        std::uint64_t accepted = 0;
        for (sa::Letter a : word) {
            q = dfa.next(q, a);
            accepted += dfa.accepting[q];
        }
        sink += accepted;
    });
}

template <class T>
double network_rate(const sl::Network& net, const std::vector<sa::Letter>& word) {
    const sl::PreparedNetwork<T> prepared = sl::prepare<T>(net);
    return throughput(word.size(), [&] {
        sl::NetworkState<T> state = sl::initial_state(prepared);
        std::uint64_t accepted = 0;
        for (sa::Letter a : word) accepted += net.accept[sl::step(prepared, state, a)];
        sink += accepted;
    });
}

double integer_rate(const sl::Network& net, const std::vector<sa::Letter>& word) {
    const auto prepared = sl::prepare_integer(net);
    if (!prepared) return 0;
    return throughput(word.size(), [&] {
        std::vector<std::int32_t> state = prepared->initial;
        std::uint64_t accepted = 0;
        for (sa::Letter a : word) accepted += net.accept[*sl::step_integer(*prepared, state, a)];
        sink += accepted;
    });
}

struct Row {
    std::string dfa, construction;
    std::size_t states = 0, letters = 0, layers = 0, total_dim = 0, closure_pairs = 0;
    double compile_s = 0, words_s = 0, closure_s = 0, compile_check_s = 0;
    double compile_cpu = 0, closure_cpu = 0;
    double table = 0, fp32 = 0, fp64 = 0, exact = 0, exact_integer = 0;
    bool certified = false;
};

Row measure(const std::string& spec, std::size_t tokens) {
    Row row;
    row.dfa = spec;
    const sa::Dfa dfa = sa::load_dfa(spec);
    row.states = dfa.num_states();
    row.letters = dfa.num_letters();
    auto t0 = Clock::now();
    std::clock_t c0 = std::clock();
    const sl::Network net = sl::compile_dfa(dfa);
    row.compile_s = seconds_since(t0);
    row.compile_cpu = cpu_since(c0);
    // What check_against_dfa runs, timed part by part.
    auto t1 = Clock::now();
    const sl::WordCheck words = sl::check_all_words(net, dfa, std::max<std::size_t>(1, sl::exhaustive_length(dfa.num_letters(), 20'000)),
                                                    sl::parse_precision("exact"));
    row.words_s = seconds_since(t1);
    t1 = Clock::now();
    c0 = std::clock();
    const sl::ClosureResult closure = sl::exact_closure(net, dfa);
    row.closure_s = seconds_since(t1);
    row.closure_cpu = cpu_since(c0);
    row.compile_check_s = seconds_since(t0);
    row.certified = words.ok && closure.certified;
    row.closure_pairs = closure.pairs;
    row.construction = net.construction;
    row.layers = net.layers.size();
    row.total_dim = sl::total_dimension(net);
    std::mt19937_64 rng(20261122);
    std::vector<sa::Letter> word(tokens);
    for (auto& a : word) a = sa::Letter(rng() % dfa.num_letters());
    // GMP rationals cost microseconds per coordinate: a shorter word, same letters.
    const std::vector<sa::Letter> short_word(word.begin(), word.begin() + long(std::min<std::size_t>(tokens, 2000)));
    row.table = table_rate(dfa, word);
    row.fp32 = network_rate<float>(net, word);
    row.fp64 = network_rate<double>(net, word);
    row.exact = network_rate<sl::Rational>(net, short_word);
    row.exact_integer = integer_rate(net, word);
    return row;
}

}  // namespace

int main(int argc, char** argv) {
    std::string output = "bench_lrnn.json";
    // The deepest MLRegTest cascade: 24 levels, total dimension 2,697, 134,322 cascade states.
    std::string mlregtest = std::string(STATETRACK_TEST_DATA) + "/mlregtest/att/04.04.SP.6.1.6.att";
    std::size_t tokens = 100'000;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--mlregtest") == 0 && i + 1 < argc) mlregtest = argv[++i];
        else if (std::strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) tokens = std::stoul(argv[++i]);
        else output = argv[i];
    }
    std::vector<Row> rows;
    for (const std::string spec : {"zoo:parity", "zoo:mod:5", "zoo:symreg:5", mlregtest.c_str()}) {
        fmt::print(stderr, "measuring {}\n", spec);
        rows.push_back(measure(spec, tokens));
    }
    fmt::print("{:<20} {:>9} {:>6} {:>4} {:>8} {:>9} {:>8} {:>9} {:>8} {:>10} {:>10} {:>6} {:>10} {:>6} {:>11} {:>10}\n", "DFA", "construct",
               "dim", "lay", "pairs", "compile s", "words s", "closure s", "total s", "table t/s", "fp32 t/s", "ratio", "fp64 t/s", "ratio",
               "exact t/s", "int t/s");
    nlohmann::json j;
    j["benchmark"] = "lrnn";
    j["tokens"] = tokens;
    for (const auto& r : rows) {
        const std::string name = r.dfa.substr(r.dfa.rfind('/') + 1);
        fmt::print("{:<20} {:>9} {:>6} {:>4} {:>8} {:>9.3f} {:>8.3f} {:>9.3f} {:>8.3f} {:>10.3g} {:>10.3g} {:>6.1f} {:>10.3g} {:>6.1f} {:>11.3g} {:>10.3g}\n",
                   name, r.construction, r.total_dim, r.layers, r.closure_pairs, r.compile_s, r.words_s, r.closure_s, r.compile_check_s, r.table,
                   r.fp32, r.table / r.fp32, r.fp64, r.table / r.fp64, r.exact, r.exact_integer);
        j["rows"].push_back({{"dfa", name}, {"states", r.states}, {"letters", r.letters}, {"construction", r.construction},
                             {"layers", r.layers}, {"total_dim", r.total_dim}, {"certified", r.certified},
                             {"closure_pairs", r.closure_pairs}, {"compile_seconds", r.compile_s}, {"words_check_seconds", r.words_s}, {"closure_seconds", r.closure_s},
                             {"compile_cpu_seconds", r.compile_cpu}, {"closure_cpu_seconds", r.closure_cpu},
                             {"compile_and_check_seconds", r.compile_check_s},
                             {"tokens_per_second", {{"dfa_table", r.table}, {"fp32", r.fp32}, {"fp64", r.fp64}, {"exact", r.exact},
                                                    {"exact_integer", r.exact_integer}}},
                             {"slowdown_vs_table", {{"fp32", r.table / r.fp32}, {"fp64", r.table / r.fp64}, {"exact", r.table / r.exact}}}});
    }
    statetrack::write_file_atomically(output, j.dump(2) + "\n");
    for (const auto& r : rows)
        fmt::print("{}: compile {:.3f} s CPU, closure {:.3f} s CPU\n", r.dfa.substr(r.dfa.rfind('/') + 1), r.compile_cpu, r.closure_cpu);
    fmt::print("wrote {} (checksum {})\n", output, sink % 10);
    return 0;
}
