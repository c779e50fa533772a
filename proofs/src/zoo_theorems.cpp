// Theorems 3, 4 and 6: compile zoo and corpus DFAs, certify them through verify(); the dispatcher.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/proofs/integer_closure.hpp"
#include "statetrack/proofs/theorems.hpp"

namespace statetrack::proofs {

namespace {

double since(std::chrono::steady_clock::time_point t0) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }

VerifyOptions light_verify() {
    VerifyOptions vo;
    vo.precision_max_pairs = 20'000;
    vo.repeated_max_steps = 1 << 14;
    vo.random_words = 4;
    vo.random_max_length = 1024;
    return vo;
}

std::size_t moved_points(const automata::Dfa& dfa, automata::Letter a) {
    std::size_t moved = 0;
    for (automata::State q = 0; q < dfa.num_states(); ++q) moved += dfa.next(q, a) != q;
    return moved;
}

}  // namespace

automata::Dfa second_to_last_a() {
    // States remember the last two letters: 0 = (b|none, b|none) ... bit 1: previous letter a, bit 0: last letter a.
    automata::Dfa d = automata::make_dfa(4, {"a", "b"}, "second-to-last-a");
    for (automata::State q = 0; q < 4; ++q) {
        d.next(q, 0) = automata::State(((q & 1) << 1) | 1);
        d.next(q, 1) = automata::State((q & 1) << 1);
    }
    d.accepting = {false, false, true, true};
    d.state_names = {"xb_b", "xb_a", "a_b", "a_a"};
    return d;
}

TheoremReport prove_theorem3(const ProveOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    TheoremReport r;
    r.name = "theorem3";
    r.statement = "group automata: one layer of permutation matrices (reflections, beta = 2, B = 0), at most p - 1 reflections per letter moving p points";
    std::vector<std::string> specs = {"parity", "mod:3", "mod:5", "mod:7", "modsum:4", "cyclenav:5", "sym:3", "sym:4", "sym:5",
                                      "dihedral:4", "dihedral:5", "quaternion", "symreg:3", "altreg:4"};
    if (!options.quick) specs.insert(specs.end(), {"symreg:4", "altreg:5", "sym:6", "dihedral:8", "mod:12"});
    std::vector<automata::Dfa> dfas;
    for (const auto& s : specs) dfas.push_back(automata::zoo(s));
    for (std::uint64_t seed = 1; seed <= (options.quick ? 4u : 20u); ++seed) {
        automata::RandomDfaOptions o;
        o.states = 3 + seed % 6;
        o.letters = 2 + seed % 3;
        o.kind = automata::RandomKind::permutation;
        o.seed = options.seed + seed;
        automata::Dfa d = automata::trim(automata::random_dfa(o));
        d.name = fmt::format("random permutation automaton (seed {}, {} states)", o.seed, d.num_states());
        dfas.push_back(std::move(d));
    }
    bool holds = true;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& dfa : dfas) {
        if (options.progress) options.progress("theorem3: " + dfa.name);
        lrnn::CompileOptions co;
        co.construction = lrnn::Construction::onehot;
        const lrnn::Network net = lrnn::compile_dfa(dfa, co);
        bool shape = net.layers.size() == 1 && net.layers[0].dim == dfa.num_states();
        std::size_t worst_excess = 0;
        for (automata::Letter a = 0; a < dfa.num_letters(); ++a) {
            const auto& t = net.layers[0].transitions[net.layers[0].input_transition[a]];
            const std::size_t p = moved_points(dfa, a);
            if (t.factors.size() + 1 > std::max<std::size_t>(p, 1)) worst_excess = std::max(worst_excess, t.factors.size() + 1 - std::max<std::size_t>(p, 1));
            shape = shape && t.bias.empty() && t.diagonal.empty();
            for (const auto& f : t.factors) shape = shape && f.beta.exact == "2";
        }
        const VerifyResult v = verify(net, dfa, light_verify());
        bool all_precisions = true;
        for (const auto& p : v.precisions) all_precisions = all_precisions && p.all_lengths;
        const bool ok = shape && worst_excess == 0 && v.exact.certified && all_precisions;
        holds = holds && ok;
        r.lines.push_back(fmt::format("  {}: {} states, dim {}, reflections within p - 1: {}, exact: {} ({} pairs), fp16/bf16/fp32/fp64 closures: {}{}",
                                      dfa.name, dfa.num_states(), net.layers[0].dim, worst_excess == 0 ? "yes" : "NO",
                                      v.exact.certified ? "certified" : "NOT certified", v.exact.pairs, all_precisions ? "all lengths" : "NOT all",
                                      ok ? "" : "  <- FAILS"));
        rows.push_back({{"dfa", dfa.name}, {"states", dfa.num_states()}, {"dim", net.layers[0].dim}, {"one_layer_reflections", shape},
                        {"within_p_minus_1", worst_excess == 0}, {"exact_certified", v.exact.certified}, {"pairs", v.exact.pairs},
                        {"all_precisions_all_lengths", all_precisions}, {"ok", ok}});
    }
    r.holds = holds;
    r.details = {{"automata", rows}};
    r.seconds = since(t0);
    return r;
}

TheoremReport prove_theorem4(const ProveOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    TheoremReport r;
    r.name = "theorem4";
    r.statement = "every DFA compiles through its holonomy cascade (one layer per level, shift wiring) and is certified; the literal wiring fails";
    bool holds = true;
    // 1. The zoo.
    std::vector<std::string> specs = {"parity", "mod:3", "first", "last", "evenpairs", "flipflop", "tomita:1", "tomita:2", "tomita:3",
                                      "tomita:4", "tomita:5", "tomita:6", "tomita:7", "dyck:1:3", "dyck:2:2", "contains:abb",
                                      "gridworld:3", "modarith:3", "sym:3"};
    nlohmann::json zoo_rows = nlohmann::json::array();
    std::size_t zoo_ok = 0;
    for (const auto& spec : specs) {
        if (options.progress) options.progress("theorem4: zoo:" + spec);
        const automata::Dfa dfa = automata::zoo(spec);
        lrnn::CompileOptions co;
        co.construction = lrnn::Construction::cascade;
        const lrnn::Network net = lrnn::compile_dfa(dfa, co);
        const IntegerClosure c = integer_closure(net, dfa);
        zoo_ok += c.certified;
        zoo_rows.push_back({{"dfa", spec}, {"layers", net.layers.size()}, {"certified", c.certified}, {"pairs", c.pairs}});
    }
    holds = holds && zoo_ok == specs.size();
    r.lines.push_back(fmt::format("zoo: {}/{} DFAs compiled through their cascades (resets as n projections, beta = 1) and certified for every "
                                  "length (exact integer closure)", zoo_ok, specs.size()));
    // 2. MLRegTest.
    const std::string dir = options.mlregtest_dir.empty() ? std::string(STATETRACK_DEFAULT_MLREGTEST) : options.mlregtest_dir;
    if (!std::filesystem::is_directory(dir)) throw InputError(dir, "directory", "the MLRegTest corpus (AT&T files) was not found");
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".att") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const std::size_t stride = options.mlregtest_stride ? options.mlregtest_stride : options.quick ? 49 : 1;
    std::size_t checked = 0, certified = 0, max_layers = 0, total_layers = 0;
    std::vector<std::string> failures;
    for (std::size_t i = 0; i < files.size(); i += stride) {
        if (options.progress && checked % 100 == 0) options.progress(fmt::format("theorem4: MLRegTest {}/{}", i, files.size()));
        const automata::Dfa dfa = automata::load_dfa(files[i].string());
        lrnn::CompileOptions co;
        co.construction = lrnn::Construction::cascade;  // resets as n projections (sparse v: n numbers per reset)
        const lrnn::Network net = lrnn::compile_dfa(dfa, co);
        // The exact closure with one interned state per layer and a step memo (lrnn/check.hpp): the
        // same pairs as integer_closure, fast on the 10^5-pair SP.6.1.x cascades.
        const lrnn::ClosureResult c = lrnn::exact_closure(net, dfa);
        ++checked;
        certified += c.certified;
        max_layers = std::max(max_layers, net.layers.size());
        total_layers += net.layers.size();
        if (!c.certified && failures.size() < 5) failures.push_back(files[i].filename().string() + ": " + c.message);
    }
    holds = holds && certified == checked && checked > 0;
    r.lines.push_back(fmt::format("MLRegTest: {}/{} DFAs{} compiled through their cascades (resets as n projections, beta = 1) and certified for every length; layers mean {:.2f}, max {}", certified, checked,
                                  stride > 1 ? fmt::format(" (every {}th file)", stride) : std::string(), checked ? double(total_layers) / double(checked) : 0.0, max_layers));
    for (const auto& f : failures) r.lines.push_back("  FAILED: " + f);
    // 3. The wiring caveat.
    const automata::Dfa s2l = second_to_last_a();
    lrnn::CompileOptions literal;
    literal.construction = lrnn::Construction::cascade;
    literal.wiring = lrnn::Wiring::literal;
    const IntegerClosure lit = integer_closure(lrnn::compile_dfa(s2l, literal), s2l);
    lrnn::CompileOptions shift = literal;
    shift.wiring = lrnn::Wiring::shift;
    const lrnn::Network shifted = lrnn::compile_dfa(s2l, shift);
    const IntegerClosure sh = integer_closure(shifted, s2l);
    const bool caveat = lit.counterexample.has_value() && sh.certified;
    holds = holds && caveat;
    const std::string word = lit.counterexample ? automata::format_word(s2l, *lit.counterexample) : std::string();
    r.lines.push_back(fmt::format("wiring on \"the second-to-last letter is a\" ({} cascade layers): literal (post-update) wiring {}; shift wiring: {}",
                                  shifted.layers.size(),
                                  lit.counterexample ? fmt::format("FAILS, shortest counterexample \"{}\" (the DFA {} it)", word,
                                                                   automata::accepts(s2l, *lit.counterexample) ? "accepts" : "rejects")
                                                     : std::string("does not fail (unexpected)"),
                                  sh.certified ? fmt::format("certified for every length ({} pairs)", sh.pairs) : "NOT certified"));
    r.holds = holds;
    r.details = {{"zoo", zoo_rows}, {"mlregtest", {{"checked", checked}, {"certified", certified}, {"stride", stride}, {"resets", "projections"}, {"mean_layers", checked ? double(total_layers) / double(checked) : 0.0}, {"max_layers", max_layers}, {"failures", failures}}},
                 {"wiring", {{"dfa", "second-to-last letter is a"}, {"literal_counterexample", lit.counterexample ? nlohmann::json(word) : nlohmann::json(nullptr)},
                             {"literal_counterexample_length", lit.counterexample ? lit.counterexample->size() : 0}, {"shift_certified", sh.certified}, {"shift_pairs", sh.pairs}}}};
    r.seconds = since(t0);
    return r;
}

TheoremReport prove_theorem6(const ProveOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    TheoremReport r;
    r.name = "theorem6";
    r.statement = "addition mod m with two layers of single reflections (DeltaNet [-1, 1]), m = 2..12: the ideal model is correct for every "
                  "length (exact angle closure), as written (literal wiring) and with the shift; per precision what really holds";
    bool holds = true;
    nlohmann::json rows = nlohmann::json::array();
    for (int m = 2; m <= (options.quick ? 5 : 12); ++m) {
        const std::string spec = fmt::format("modsum:{}", m);
        if (options.progress) options.progress("theorem6: " + spec);
        const automata::Dfa dfa = automata::zoo(spec);
        lrnn::CompileOptions co;
        co.construction = lrnn::Construction::theorem6;
        const lrnn::Network net = lrnn::compile_dfa(dfa, co);
        bool one_reflection = net.layers.size() == 2;
        for (const auto& layer : net.layers)
            for (const auto& t : layer.transitions) one_reflection = one_reflection && t.factors.size() <= 1 && t.diagonal.empty();
        VerifyOptions vo = light_verify();
        vo.precision_max_pairs = options.quick ? 5'000 : 20'000;
        const VerifyResult v = verify(net, dfa, vo);
        // The paper's literal text: layer 2 reads t mod 2 after layer 1's update (no shift).
        co.wiring = lrnn::Wiring::literal;
        const IntegerClosure literal = integer_closure(lrnn::compile_dfa(dfa, co), dfa);
        const bool ok = one_reflection && v.passed() && v.exact.certified && v.exact.ideal && literal.certified;
        holds = holds && ok;
        std::vector<std::string> cells;
        nlohmann::json per = nlohmann::json::object();
        for (const auto& p : v.precisions) {
            cells.push_back(fmt::format("{} {}", p.name, p.all_lengths ? std::string("all lengths")
                                                         : p.first_failure ? fmt::format("fails at {}", p.first_failure->size())
                                                                           : fmt::format("ok to {}+", p.exhaustive_length)));
            per[p.name] = {{"all_lengths", p.all_lengths}, {"first_failure", p.first_failure ? nlohmann::json(p.first_failure->size()) : nlohmann::json(nullptr)},
                           {"shortest", p.failure_is_shortest}, {"certified_length", p.certified_length}};
        }
        r.lines.push_back(fmt::format("  {}: two layers, one reflection per letter: {}; ideal model: {} ({} pairs{}); literal wiring: {}; "
                                      "stored decimals: every length < 2^{:.0f}; {}{}",
                                      spec, one_reflection ? "yes" : "NO", v.exact.certified ? "every length" : "NO PROOF", v.exact.pairs,
                                      v.counterexample ? ", counterexample " + automata::format_word(dfa, *v.counterexample) : std::string(),
                                      literal.certified ? "every length" : "NO PROOF", v.exact.log2_certified_length, fmt::join(cells, ", "),
                                      ok ? "" : "  <- FAILS"));
        rows.push_back({{"m", m}, {"one_reflection_per_letter", one_reflection}, {"ideal_certified", v.exact.certified},
                        {"ideal_pairs", v.exact.pairs}, {"literal_wiring_certified", literal.certified}, {"exact", v.exact.proves},
                        {"stored_log2_certified_length", v.exact.log2_certified_length}, {"precisions", per}, {"ok", ok}});
    }
    r.holds = holds;
    r.details = {{"moduli", rows}};
    r.seconds = since(t0);
    return r;
}

const std::vector<std::string>& theorem_names() {
    static const std::vector<std::string> names = {"theorem1", "theorem2", "prop1", "theorem3", "theorem4", "theorem6"};
    return names;
}

TheoremReport prove(const std::string& name, const ProveOptions& options) {
    if (name == "theorem1") return prove_theorem1(options);
    if (name == "theorem2") return prove_theorem2(options);
    if (name == "prop1") return prove_prop1(options);
    if (name == "theorem3") return prove_theorem3(options);
    if (name == "theorem4") return prove_theorem4(options);
    if (name == "theorem6") return prove_theorem6(options);
    throw InputError("prove", name, "unknown statement (theorem1, theorem2, prop1, theorem3, theorem4, theorem6)");
}

nlohmann::json to_json(const TheoremReport& r) {
    nlohmann::json j = r.details.is_object() ? r.details : nlohmann::json::object();
    j["theorem"] = r.name;
    j["statement"] = r.statement;
    j["holds"] = r.holds;
    j["seconds"] = r.seconds;
    j["checked"] = r.lines;
    return j;
}

}  // namespace statetrack::proofs
