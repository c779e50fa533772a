// The main job: the zoo compiled and verified, every theorem checked, Markdown + JSON.
#include "statetrack/proofs/report.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/compile.hpp"

namespace statetrack::proofs {

namespace {

constexpr std::size_t report_mlregtest_stride = 49;

struct Case {
    std::string spec;
    lrnn::Construction construction;
};

std::string precision_cell(const nlohmann::json& p) {
    if (p["all_lengths"].get<bool>()) return "all";
    if (!p["first_failure"].is_null()) return fmt::format("fails@{}", p["first_failure"]["length"].get<std::size_t>());
    return "ok, open";
}

}  // namespace

Report run_report(const ReportOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    auto say = [&](const std::string& m) {
        if (options.progress) options.progress(fmt::format("[{:5.1f}s] {}", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), m));
    };
    const std::vector<Case> cases = {
        {"parity", lrnn::Construction::automatic},  {"mod:3", lrnn::Construction::automatic},   {"mod:3", lrnn::Construction::rotation},
        {"modsum:5", lrnn::Construction::theorem6}, {"sym:5", lrnn::Construction::automatic},   {"altreg:4", lrnn::Construction::automatic},
        {"dihedral:4", lrnn::Construction::automatic}, {"quaternion", lrnn::Construction::automatic}, {"flipflop", lrnn::Construction::automatic},
        {"first", lrnn::Construction::automatic},   {"last", lrnn::Construction::automatic},    {"evenpairs", lrnn::Construction::automatic},
        {"tomita:3", lrnn::Construction::automatic}, {"tomita:5", lrnn::Construction::automatic}, {"dyck:2:3", lrnn::Construction::automatic},
        {"contains:abb", lrnn::Construction::automatic}, {"gridworld:3", lrnn::Construction::automatic}, {"modarith:3", lrnn::Construction::automatic}};
    Report report;
    bool passed = true;
    nlohmann::json languages = nlohmann::json::array();
    std::string md = "# statetrack report\n\nEvery zoo language below is compiled to an LRNN and verified (docs/theorems.md says what each column proves); "
                     "then every statement of PAPER.md is checked.\n\n## Languages\n\n"
                     "| language | construction | layers | exact | fp16 | bf16 | fp32 | fp64 |\n|---|---|---|---|---|---|---|---|\n";
    std::string table = fmt::format("{:<14} {:<9} {:>6} {:<22} {:<10} {:<10} {:<10} {:<10}\n", "language", "constr.", "layers", "exact", "fp16", "bf16", "fp32", "fp64");
    for (const auto& c : cases) {
        say(fmt::format("compile and verify zoo:{} ({})", c.spec, lrnn::to_string(c.construction)));
        const automata::Dfa dfa = automata::zoo(c.spec);
        lrnn::CompileOptions co;
        co.construction = c.construction;
        const lrnn::Network net = lrnn::compile_dfa(dfa, co);
        VerifyOptions vo;
        vo.precision_max_pairs = 20'000;
        vo.repeated_max_steps = 1 << 14;
        vo.random_words = 4;
        vo.random_max_length = 1024;
        const VerifyResult v = verify(net, dfa, vo);
        const bool ok = v.passed() && v.exact.certified;
        passed = passed && ok;
        nlohmann::json j = to_json(v, dfa);
        j["language"] = c.spec;
        j["construction"] = net.construction;
        j["layers"] = net.layers.size();
        j["ok"] = ok;
        const std::string exact = v.exact.certified ? fmt::format("all{} ({} pairs)", v.exact.ideal ? ", ideal" : "", v.exact.pairs)
                                  : v.counterexample ? std::string("COUNTEREXAMPLE")
                                                     : fmt::format("< 2^{:.0f}", v.exact.log2_certified_length);
        std::vector<std::string> cells;
        for (const char* p : {"fp16", "bf16", "fp32", "fp64"}) cells.push_back(precision_cell(j["precisions"][p]));
        md += fmt::format("| {} | {} | {} | {} | {} |\n", c.spec, net.construction, net.layers.size(), exact, fmt::join(cells, " | "));
        table += fmt::format("{:<14} {:<9} {:>6} {:<22} {:<10} {:<10} {:<10} {:<10}{}\n", c.spec, net.construction, net.layers.size(), exact, cells[0],
                             cells[1], cells[2], cells[3], ok ? "" : "  FAIL");
        languages.push_back(std::move(j));
    }
    md += "\n\"all\": correct for every input length (exact: integer or rational closure; per precision: the closure over representable states "
          "closed). \"all, ideal\": irrational entries; the ideal model (exact cosines and sines) is correct for every length by the exact angle "
          "closure, and the stored decimals for every word shorter than 2^k (the interval orbit; see report.json). "
          "\"fails@n\": the shortest failing word found has length n. \"ok, open\": no failure found, no all-length proof.\n\n## Theorems\n\n";
    nlohmann::json theorems = nlohmann::json::array();
    table += "\n";
    ProveOptions po;
    po.quick = options.quick;
    po.mlregtest_dir = options.mlregtest_dir;
    // The 2-minute budget: theorem4 takes every 49th MLRegTest file here (30 of 1,470);
    // `statetrack prove theorem4` checks them all.
    if (!options.quick) po.mlregtest_stride = report_mlregtest_stride;
    po.progress = options.progress;
    for (const auto& name : theorem_names()) {
        say("prove " + name);
        const TheoremReport r = prove(name, po);
        passed = passed && r.holds;
        theorems.push_back(to_json(r));
        md += fmt::format("### {} ({})\n\n{}\n\n```\n{}\n```\n\n", name, r.holds ? "holds" : "FAILS", r.statement, fmt::join(r.lines, "\n"));
        table += fmt::format("{:<10} {:<6} {:6.1f}s  {}\n", name, r.holds ? "holds" : "FAILS", r.seconds, r.statement);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    md += fmt::format("Result: **{}** ({:.1f} s).\n", passed ? "every check passed" : "a check FAILED", seconds);
    table += fmt::format("\nreport: {} in {:.1f} s\n", passed ? "every check passed" : "a check FAILED", seconds);
    report.passed = passed;
    report.json = {{"format", "statetrack.report/1"}, {"passed", passed}, {"quick", options.quick}, {"seconds", seconds}, {"languages", languages}, {"theorems", theorems}};
    report.markdown = std::move(md);
    report.table = std::move(table);
    return report;
}

}  // namespace statetrack::proofs
