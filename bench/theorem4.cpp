// bench_theorem4: where `prove theorem4` spends its time on the MLRegTest corpus: the holonomy
// decomposition, the cascade -> LRNN compiler, and the all-length certificate (proofs'
// integer closure, and lrnn's rational closure for comparison on a sample).
// Usage: bench_theorem4 [STRIDE [OUT.json [projections|diagonal]]]   (STRIDE 1: all 1,470 DFAs; default 7;
// resets as n projections, the paper's form, or one zero diagonal, the same matrix)
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "statetrack/automata/decompose.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/proofs/integer_closure.hpp"

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
    const std::size_t stride = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
    const std::string out = argc > 2 ? argv[2] : "bench_theorem4.json";
    const bool diagonal = argc > 3 && std::string(argv[3]) == "diagonal";
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(STATETRACK_TEST_DATA "/mlregtest/att"))
        if (e.path().extension() == ".att") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    double t_load = 0, t_decompose = 0, t_compile = 0, t_integer = 0, t_rational = 0;
    std::size_t n = 0, rational_sampled = 0, certified = 0, pairs = 0;
    double worst = 0;
    std::string worst_name;
    std::vector<std::string> out_of_memory;
    for (std::size_t i = 0; i < files.size(); i += stride) {
        auto t0 = std::chrono::steady_clock::now();
        const auto dfa = statetrack::automata::load_dfa(files[i].string());
        t_load += seconds_since(t0);
        t0 = std::chrono::steady_clock::now();
        const auto decomposition = statetrack::automata::decompose(dfa);
        t_decompose += seconds_since(t0);
        t0 = std::chrono::steady_clock::now();
        try {
        statetrack::lrnn::CompileOptions co;
        co.construction = statetrack::lrnn::Construction::cascade;
        co.reset = diagonal ? statetrack::lrnn::ResetEncoding::diagonal : statetrack::lrnn::ResetEncoding::projections;
        const auto net = statetrack::lrnn::compile_dfa(dfa, co);  // decomposes again inside
        const double compile = seconds_since(t0);
        t_compile += compile;
        t0 = std::chrono::steady_clock::now();
        const auto c = statetrack::proofs::integer_closure(net, dfa);
        const double closure = seconds_since(t0);
        t_integer += closure;
        certified += c.certified;
        pairs += c.pairs;
        if (compile + closure > worst) worst = compile + closure, worst_name = files[i].filename().string();
        if (n % 10 == 0) {  // the rational closure is slow: a sample
            t0 = std::chrono::steady_clock::now();
            (void)statetrack::lrnn::exact_closure(net, dfa);
            t_rational += seconds_since(t0);
            ++rational_sampled;
        }
        if (compile + closure > 1) fmt::print(stderr, "{}: {} states, compile {:.2f} s, closure {:.2f} s\n", files[i].filename().string(), dfa.num_states(), compile, closure);
        } catch (const std::bad_alloc&) {  // run under ulimit -v to find the cascades too large to compile
            fmt::print(stderr, "{}: {} states, out of memory\n", files[i].filename().string(), dfa.num_states());
            out_of_memory.push_back(files[i].filename().string());
        }
        ++n;
    }
    fmt::print("{:<34} {:>10}\n", "phase (MLRegTest, every " + std::to_string(stride) + (diagonal ? ", diagonal resets)" : ", projection resets)"), "seconds");
    fmt::print("{:<34} {:>10.3f}\n", "load .att", t_load);
    fmt::print("{:<34} {:>10.3f}\n", "decompose (holonomy)", t_decompose);
    fmt::print("{:<34} {:>10.3f}\n", "compile (decompose + layers)", t_compile);
    fmt::print("{:<34} {:>10.3f}\n", "integer closure (proofs)", t_integer);
    fmt::print("{:<34} {:>10.3f}  ({} DFAs sampled)\n", "rational closure (lrnn)", t_rational, rational_sampled);
    fmt::print("out of memory: {}\n", fmt::join(out_of_memory, " "));
    fmt::print("DFAs {}, certified {}, pairs {}, slowest {} ({:.3f} s)\n", n, certified, pairs, worst_name, worst);
    const nlohmann::json j = {{"stride", stride}, {"resets", diagonal ? "diagonal" : "projections"},      {"dfas", n},           {"certified", certified},       {"pairs", pairs},
                              {"load_s", t_load},      {"decompose_s", t_decompose}, {"compile_s", t_compile},
                              {"integer_closure_s", t_integer}, {"rational_closure_s", t_rational},
                              {"rational_sampled", rational_sampled}, {"slowest", worst_name}, {"out_of_memory", out_of_memory}, {"slowest_s", worst}};
    std::ofstream(out) << j.dump(2) << "\n";
    return certified == n ? 0 : 1;
}
