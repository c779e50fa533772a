// Decomposes every MLRegTest DFA (tests/data/mlregtest/att) with the holonomy method and verifies
// each cascade for all words. Prints a summary table and writes JSON (default bench_decompose.json).
// Usage: bench_decompose [OUTPUT.json] [--limit N] [--only TEXT]
//   (N: only the first N files; TEXT: only files whose name contains it, for profiling one file)
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "statetrack/automata/decompose.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"

namespace sa = statetrack::automata;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
    std::string output = "bench_decompose.json";
    std::size_t limit = static_cast<std::size_t>(-1);
    std::string only;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--limit") == 0 && i + 1 < argc) limit = std::stoul(argv[++i]);
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
        double seconds = 0;
    };
    std::vector<Row> rows;
    double load_s = 0, decompose_s = 0, verify_s = 0;
    for (const auto& path : files) {
        Row row;
        row.file = path.filename().string();
        auto t0 = Clock::now();
        const sa::Dfa dfa = sa::load_dfa(path.string());
        auto t1 = Clock::now();
        const auto d = sa::decompose(dfa);
        auto t2 = Clock::now();
        const auto check = sa::verify_cascade(dfa, d.cascade);
        auto t3 = Clock::now();
        load_s += std::chrono::duration<double>(t1 - t0).count();
        decompose_s += std::chrono::duration<double>(t2 - t1).count();
        verify_s += std::chrono::duration<double>(t3 - t2).count();
        row.states = dfa.num_states();
        row.levels = d.cascade.levels.size();
        row.one_hot = sa::one_hot_size(d.cascade);
        row.cascade_states = d.cascade.decode.size();
        row.orbit = d.orbit_sets;
        row.method = d.cascade.method;
        for (const auto& level : d.cascade.levels)
            for (const auto& g : level.groups) row.groups.push_back(g.order);
        row.verified = check.ok;
        row.seconds = std::chrono::duration<double>(t3 - t1).count();
        if (!check.ok) fmt::print(stderr, "{}: verification FAILED: {}\n", row.file, check.message);
        rows.push_back(std::move(row));
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
                                {"per_file", per_file}};
    statetrack::write_file_atomically(output, doc.dump(1) + "\n");
    fmt::print("wrote {}\n", output);
    return verified == rows.size() ? 0 : 1;
}
