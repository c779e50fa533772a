// Decomposes every MLRegTest DFA (tests/data/mlregtest/att) with the holonomy method and verifies
// each cascade for all words. Prints a summary table and writes JSON (default bench_decompose.json).
// Usage: bench_decompose [OUTPUT.json] [--limit N] [--only TEXT] [--threads T]
//   (N: only the first N files; TEXT: only files whose name contains it, for profiling one file;
//   T: files decomposed at once, default 2. The files are independent: each thread takes the next
//   largest file left. Phase times are CPU time of the thread that ran them, summed.)
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "statetrack/automata/decompose.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"

namespace sa = statetrack::automata;
using Clock = std::chrono::steady_clock;

namespace {
double cpu_seconds(clockid_t clock) {
    timespec t{};
    clock_gettime(clock, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
    std::string output = "bench_decompose.json";
    std::size_t limit = static_cast<std::size_t>(-1);
    std::string only;
    std::size_t threads = 2;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--limit") == 0 && i + 1 < argc) limit = std::stoul(argv[++i]);
        else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::max<std::size_t>(1, std::stoul(argv[++i]));
        else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
        else output = argv[i];
    }
    const std::filesystem::path dir = std::filesystem::path(STATETRACK_TEST_DATA) / "mlregtest" / "att";
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        if (entry.path().extension() == ".att" && entry.path().filename().string().find(only) != std::string::npos)
            files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    if (files.size() > limit) files.resize(limit);

    struct Row {
        std::string file;
        std::size_t states = 0, levels = 0, one_hot = 0, cascade_states = 0, orbit = 0;
        std::string method;
        std::vector<std::size_t> groups;
        bool verified = false;
        double load_s = 0, decompose_s = 0, verify_s = 0;  // CPU time of the thread
        double seconds = 0;                                // decompose + verify
        std::string failure;
    };
    std::vector<Row> rows(files.size());
    // Largest files first (size on disk ~ states x letters), so that no thread is left with a big
    // file at the end.
    std::vector<std::size_t> order(files.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::vector<std::uintmax_t> bytes(files.size());
    for (std::size_t i = 0; i < files.size(); ++i) bytes[i] = std::filesystem::file_size(files[i]);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return bytes[x] > bytes[y]; });
    std::atomic<std::size_t> next{0};
    auto work = [&] {
        for (std::size_t k; (k = next.fetch_add(1)) < order.size();) {
            const auto& path = files[order[k]];
            Row& row = rows[order[k]];
            row.file = path.filename().string();
            const double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
            const sa::Dfa dfa = sa::load_dfa(path.string());
            const double t1 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
            const auto d = sa::decompose(dfa);
            const double t2 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
            const auto check = sa::verify_cascade(dfa, d.cascade);
            const double t3 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
            row.load_s = t1 - t0;
            row.decompose_s = t2 - t1;
            row.verify_s = t3 - t2;
            row.seconds = t3 - t1;
            row.states = dfa.num_states();
            row.levels = d.cascade.levels.size();
            row.one_hot = sa::one_hot_size(d.cascade);
            row.cascade_states = d.cascade.decode.size();
            row.orbit = d.orbit_sets;
            row.method = d.cascade.method;
            for (const auto& level : d.cascade.levels)
                for (const auto& g : level.groups) row.groups.push_back(g.order);
            row.verified = check.ok;
            if (!check.ok) row.failure = check.message;
        }
    };
    const auto wall0 = Clock::now();
    const double cpu0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    {
        std::vector<std::jthread> pool;
        for (std::size_t t = 1; t < std::min(threads, files.size()); ++t) pool.emplace_back(work);
        work();
    }
    const double wall_s = std::chrono::duration<double>(Clock::now() - wall0).count();
    const double cpu_s = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    double load_s = 0, decompose_s = 0, verify_s = 0;
    for (const auto& r : rows) {
        load_s += r.load_s;
        decompose_s += r.decompose_s;
        verify_s += r.verify_s;
        if (!r.verified) fmt::print(stderr, "{}: verification FAILED: {}\n", r.file, r.failure);
    }

    std::size_t verified = 0, max_levels = 0, max_one_hot = 0, with_groups = 0, total_levels = 0, total_one_hot = 0;
    std::map<std::string, std::size_t> methods;
    const Row* slowest = rows.empty() ? nullptr : &rows[0];
    for (const auto& r : rows) {
        verified += r.verified;
        total_levels += r.levels;
        total_one_hot += r.one_hot;
        max_levels = std::max(max_levels, r.levels);
        max_one_hot = std::max(max_one_hot, r.one_hot);
        with_groups += !r.groups.empty();
        ++methods[r.method];
        if (r.seconds > slowest->seconds) slowest = &r;
    }
    const double n = double(std::max<std::size_t>(rows.size(), 1));
    fmt::print("{:<34} {:>10}\n", "MLRegTest DFAs", rows.size());
    fmt::print("{:<34} {:>10}\n", "verified for all words", verified);
    for (const auto& [m, c] : methods) fmt::print("{:<34} {:>10}\n", "method " + m, c);
    fmt::print("{:<34} {:>10.2f}\n", "levels, mean", double(total_levels) / n);
    fmt::print("{:<34} {:>10}\n", "levels, max", max_levels);
    fmt::print("{:<34} {:>10.1f}\n", "one-hot size, mean", double(total_one_hot) / n);
    fmt::print("{:<34} {:>10}\n", "one-hot size, max", max_one_hot);
    fmt::print("{:<34} {:>10}\n", "DFAs with non-trivial groups", with_groups);
    fmt::print("{:<34} {:>10.3f}\n", "load time (s)", load_s);
    fmt::print("{:<34} {:>10.3f}\n", "decompose time (s)", decompose_s);
    fmt::print("{:<34} {:>10.3f}\n", "verify time (s)", verify_s);
    fmt::print("{:<34} {:>10.3f}\n", "decompose + verify (s)", decompose_s + verify_s);
    fmt::print("{:<34} {:>10}\n", "threads", threads);
    fmt::print("{:<34} {:>10.3f}\n", "CPU time, all threads (s)", cpu_s);
    fmt::print("{:<34} {:>10.3f}\n", "wall time (s)", wall_s);
    if (slowest) fmt::print("{:<34} {:>10} ({:.3f} s)\n", "slowest", slowest->file, slowest->seconds);

    nlohmann::json per_file = nlohmann::json::array();
    for (const auto& r : rows)
        per_file.push_back({{"file", r.file}, {"states", r.states}, {"method", r.method}, {"levels", r.levels},
                            {"one_hot_size", r.one_hot}, {"cascade_states", r.cascade_states}, {"orbit_sets", r.orbit},
                            {"groups", r.groups}, {"verified", r.verified}, {"seconds", r.seconds}});
    const nlohmann::json doc = {{"benchmark", "decompose"},
                                {"files", rows.size()},
                                {"verified", verified},
                                {"levels_mean", double(total_levels) / n},
                                {"levels_max", max_levels},
                                {"one_hot_mean", double(total_one_hot) / n},
                                {"one_hot_max", max_one_hot},
                                {"load_seconds", load_s},
                                {"decompose_seconds", decompose_s},
                                {"verify_seconds", verify_s},
                                {"threads", threads},
                                {"cpu_seconds", cpu_s},
                                {"wall_seconds", wall_s},
                                {"per_file", per_file}};
    statetrack::write_file_atomically(output, doc.dump(1) + "\n");
    fmt::print("wrote {}\n", output);
    return verified == rows.size() ? 0 : 1;
}
