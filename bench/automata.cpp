// bench_automata: Hopcroft minimization on random DFAs of 10^3..10^6 states, and the MLRegTest
// corpus loaded, minimized and its transition monoids computed. Prints a table, writes JSON.
//
//   bench_automata [--max-states N] [--letters K] [--skip-corpus] [--out FILE]
//
// Targets (issue 2): a 10^5-state 4-letter random DFA minimized in < 1 s; the whole corpus loaded,
// minimized and with monoids in < 5 s (2-core CI machine).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/monoid.hpp"

using namespace statetrack;
using namespace statetrack::automata;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
// Process CPU time: on a shared machine it shows the cost without the waiting for a core.
double cpu_seconds_since(std::clock_t start) { return double(std::clock() - start) / CLOCKS_PER_SEC; }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Times Hopcroft on random DFAs of each kind and size; repeats small sizes and reports medians.
nlohmann::json bench_random(std::size_t max_states, std::size_t letters) {
    nlohmann::json rows = nlohmann::json::array();
    fmt::print("Hopcroft on random DFAs ({} letters, accepting probability 0.5, median of repeats)\n", letters);
    fmt::print("{:>12} {:>8} {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}\n", "kind", "states", "reps",
               "reachable", "minimal", "generate", "trim", "hopcroft", "minimize", "minimize cpu");
    for (RandomKind kind : {RandomKind::uniform, RandomKind::mixed, RandomKind::permutation})
        for (std::size_t n = 1000; n <= max_states; n *= 10) {
            const int reps = n <= 1000 ? 21 : n <= 10000 ? 11 : n <= 100000 ? 5 : 3;
            std::vector<double> t_gen, t_trim, t_classes, t_min, cpu_min;
            std::size_t reachable = 0, minimal = 0;
            for (int r = 0; r < reps; ++r) {
                RandomDfaOptions o;
                o.states = n;
                o.letters = letters;
                o.kind = kind;
                o.seed = 1000 + std::uint64_t(r);
                auto t0 = Clock::now();
                const Dfa d = random_dfa(o);
                t_gen.push_back(seconds_since(t0));
                t0 = Clock::now();
                const Dfa t = trim(d);
                t_trim.push_back(seconds_since(t0));
                t0 = Clock::now();
                const StateClasses classes = language_classes(t);
                t_classes.push_back(seconds_since(t0));
                t0 = Clock::now();
                const std::clock_t c0 = std::clock();
                const Dfa m = minimize(d);
                t_min.push_back(seconds_since(t0));
                cpu_min.push_back(cpu_seconds_since(c0));
                if (classes.num_classes != m.num_states()) {
                    fmt::print(stderr, "inconsistent: {} classes but {} minimal states\n", classes.num_classes, m.num_states());
                    std::exit(1);
                }
                reachable = t.num_states();
                minimal = m.num_states();
            }
            nlohmann::json row = {{"kind", to_string(kind)},
                                  {"states", n},
                                  {"letters", letters},
                                  {"repeats", reps},
                                  {"reachable_states", reachable},
                                  {"minimal_states", minimal},
                                  {"generate_s", median(t_gen)},
                                  {"trim_s", median(t_trim)},
                                  {"hopcroft_s", median(t_classes)},
                                  {"minimize_s", median(t_min)},
                                  {"minimize_cpu_s", median(cpu_min)}};
            fmt::print("{:>12} {:>8} {:>4} {:>10} {:>10} {:>9.4f}s {:>9.4f}s {:>9.4f}s {:>9.4f}s {:>11.4f}s\n",
                       to_string(kind), n, reps, reachable, minimal, median(t_gen), median(t_trim), median(t_classes),
                       median(t_min), median(cpu_min));
            std::fflush(stdout);
            rows.push_back(row);
        }
    return rows;
}

// Loads every .att file of the corpus, minimizes it and computes the transition monoid of the result.
nlohmann::json bench_corpus(const std::string& dir) {
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        if (entry.path().extension() == ".att") files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    double t_load = 0, t_min = 0, t_monoid = 0;
    std::size_t states_in = 0, states_min = 0, elements = 0, largest = 0, incomplete = 0;
    const auto start = Clock::now();
    const std::clock_t cpu_start = std::clock();
    auto last_progress = start;
    for (std::size_t i = 0; i < files.size(); ++i) {
        auto t0 = Clock::now();
        const Dfa d = load_dfa(files[i]);
        t_load += seconds_since(t0);
        t0 = Clock::now();
        const Dfa m = minimize(d);
        t_min += seconds_since(t0);
        t0 = Clock::now();
        const TransitionMonoid monoid = transition_monoid(m);
        t_monoid += seconds_since(t0);
        states_in += d.num_states();
        states_min += m.num_states();
        elements += monoid.elements.size();
        largest = std::max(largest, monoid.elements.size());
        incomplete += !monoid.complete;
        if (seconds_since(last_progress) > 1.0) {
            fmt::print(stderr, "corpus: {}/{} files\n", i + 1, files.size());
            last_progress = Clock::now();
        }
    }
    const double total = seconds_since(start), total_cpu = cpu_seconds_since(cpu_start);
    fmt::print("\nMLRegTest corpus ({}): {} files, {} states loaded, {} after minimization\n", dir, files.size(),
               states_in, states_min);
    fmt::print("{:>10} {:>10} {:>10} {:>10} {:>10}   monoid elements: {} in all, largest {}, over the limit {}\n", "load",
               "minimize", "monoid", "total", "total cpu", elements, largest, incomplete);
    fmt::print("{:>9.3f}s {:>9.3f}s {:>9.3f}s {:>9.3f}s {:>9.3f}s\n", t_load, t_min, t_monoid, total, total_cpu);
    return {{"directory", dir},        {"files", files.size()},     {"states_loaded", states_in},
            {"states_minimal", states_min}, {"monoid_elements", elements}, {"largest_monoid", largest},
            {"monoids_over_limit", incomplete}, {"load_s", t_load},     {"minimize_s", t_min},
            {"monoid_s", t_monoid},    {"total_s", total}, {"total_cpu_s", total_cpu}};
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t max_states = 1'000'000, letters = 4;
    bool corpus = true;
    std::string out = "bench_automata.json";
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                fmt::print(stderr, "error: {} needs a value\n", arg);
                std::exit(2);
            }
            return argv[++i];
        };
        try {
            if (arg == "--max-states") max_states = std::stoul(value());
            else if (arg == "--letters") letters = std::stoul(value());
            else if (arg == "--skip-corpus") corpus = false;
            else if (arg == "--out") out = value();
            else {
                fmt::print(stderr, "usage: bench_automata [--max-states N] [--letters K] [--skip-corpus] [--out FILE]\n");
                return 2;
            }
        } catch (const std::logic_error&) {
            fmt::print(stderr, "error: {} needs a number\n", arg);
            return 2;
        }
    }
    try {
        nlohmann::json result = {{"benchmark", "automata"}, {"random", bench_random(max_states, letters)}};
        if (corpus) result["corpus"] = bench_corpus(std::string(STATETRACK_TEST_DATA) + "/mlregtest/att");
        write_file_atomically(out, result.dump(2) + "\n");
        fmt::print("\nwrote {}\n", out);
    } catch (const InputError& e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 2;
    }
    return 0;
}
