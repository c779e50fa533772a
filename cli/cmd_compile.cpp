// statetrack compile DFA -o MODEL: DFA -> LRNN, checked against the DFA before it is written.
#include <fmt/format.h>

#include "command.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/lrnn/analysis.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/format.hpp"

namespace statetrack::cli {

void add_compile(CLI::App& app) {
    struct Options {
        std::string dfa, output, construction = "auto", reset = "projections", wiring = "shift";
        bool json = false, allow_wrong = false;
    };
    auto opt = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("compile", "Compile a DFA into a linear RNN of GH factors; checks it before writing");
    cmd->add_option("dfa", opt->dfa, "DFA: file.json, file.att or zoo:NAME[:ARGS]")->required();
    cmd->add_option("-o,--output", opt->output, "where to write the statetrack.lrnn/1 model")->required();
    cmd->add_option("--construction", opt->construction, "auto|onehot|parity|rotation|theorem6|cascade");
    cmd->add_option("--reset", opt->reset, "cascade resets: projections (n factors, beta = 1) or diagonal (one zero diagonal)");
    cmd->add_option("--wiring", opt->wiring, "shift (layer i+1 reads layer i at t-1) or literal (the paper's post-update wiring)");
    cmd->add_flag("--allow-wrong", opt->allow_wrong, "write the model even when the check finds a counterexample (exit code still 1)");
    cmd->add_flag("--json", opt->json, "print a JSON summary on stdout");
    cmd->callback([opt] {
        using namespace statetrack::lrnn;
        CompileOptions options;
        options.construction = parse_construction(opt->construction);
        if (opt->reset != "projections" && opt->reset != "diagonal") throw InputError("--reset", opt->reset, "expected projections or diagonal");
        options.reset = opt->reset == "projections" ? ResetEncoding::projections : ResetEncoding::diagonal;
        if (opt->wiring != "shift" && opt->wiring != "literal") throw InputError("--wiring", opt->wiring, "expected shift or literal");
        options.wiring = opt->wiring == "shift" ? Wiring::shift : Wiring::literal;
        const automata::Dfa dfa = automata::load_dfa(opt->dfa);
        const Network net = compile_dfa(dfa, options);
        const NetworkSummary summary = summarize(net);
        const CompileCheck check = check_against_dfa(net, dfa);

        nlohmann::json j;
        j["construction"] = net.construction;
        j["wiring"] = to_string(net.wiring);
        j["total_dim"] = summary.total_dim;
        nlohmann::json layers = nlohmann::json::array();
        for (const auto& l : summary.layers)
            layers.push_back({{"dim", l.dim}, {"inputs", l.inputs}, {"transitions", l.transitions}, {"max_factors", l.max_factors}, {"mean_factors", l.mean_factors}});
        j["layers"] = layers;
        j["betas"] = summary.betas;
        j["eigenvalue_range"] = {summary.min_eigenvalue, summary.max_eigenvalue};
        j["exact"] = summary.exact;
        j["check"] = {{"ok", check.ok},
                      {"words", check.words.words},
                      {"exhaustive_length", check.words.max_length},
                      {"closure", check.closure.applicable ? nlohmann::json{{"complete", check.closure.complete}, {"certified", check.closure.certified}, {"pairs", check.closure.pairs}} : nlohmann::json(nullptr)},
                      {"random_words", check.random ? nlohmann::json(check.random->words) : nlohmann::json(nullptr)}};
        j["counterexample"] = check.counterexample ? nlohmann::json(automata::format_word(dfa, *check.counterexample)) : nlohmann::json(nullptr);
        const bool write = check.ok || opt->allow_wrong;
        j["written"] = write;
        if (write) write_file_atomically(opt->output, write_network_json(net));
        if (opt->json) {
            print_json(j);
        } else {
            fmt::print("{}: construction {}, wiring {}, {} layer(s), total dimension {}\n", opt->dfa, net.construction,
                       to_string(net.wiring), net.layers.size(), summary.total_dim);
            for (std::size_t i = 0; i < summary.layers.size(); ++i) {
                const auto& l = summary.layers[i];
                fmt::print("  layer {}: dim {}, {} input letters, {} distinct transitions, factors per letter max {} mean {:.2f}\n", i,
                           l.dim, l.inputs, l.transitions, l.max_factors, l.mean_factors);
            }
            fmt::print("  betas {{{}}}, eigenvalues of the factors in [{}, {}], entries {}\n", fmt::join(summary.betas, ", "),
                       summary.min_eigenvalue, summary.max_eigenvalue, summary.exact ? "exact" : "irrational (approximated)");
            fmt::print("  check: all {} words up to length {} ({})", check.words.words, check.words.max_length, check.words.precision);
            if (check.closure.applicable) fmt::print("; exact closure: {}\n", check.closure.message);
            else if (check.random) fmt::print("; {} random words up to length {} in {}\n", check.random->words, check.random->max_length, check.random->precision);
            else fmt::print("\n");
            if (check.counterexample)
                fmt::print("  COUNTEREXAMPLE: the network disagrees with the DFA on \"{}\"\n", automata::format_word(dfa, *check.counterexample));
            fmt::print("  {}\n", write ? fmt::format("wrote {}", opt->output) : std::string("not written (the check failed; --allow-wrong writes it anyway)"));
        }
        if (!check.ok) throw Exit{1};
    });
}

}  // namespace statetrack::cli
