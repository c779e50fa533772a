// statetrack run MODEL --word "a b a" --precision P: per-prefix outputs of a network.
#include <fmt/format.h>

#include "command.hpp"
#include "statetrack/automata/dfa.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/lrnn/evaluate.hpp"
#include "statetrack/lrnn/format.hpp"

namespace statetrack::cli {

void add_run(CLI::App& app) {
    struct Options {
        std::string model, word, precision = "fp64";
        bool trace = false, json = false;
    };
    auto opt = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("run", "Run a statetrack.lrnn/1 model on a word in a chosen precision");
    cmd->add_option("model", opt->model, "model file (statetrack.lrnn/1)")->required();
    cmd->add_option("--word", opt->word, "symbols separated by spaces (or a plain string of one-character symbols)")->required();
    cmd->add_option("--precision", opt->precision, "fp32|fp64|fp16|bf16|exact|mpfr:P|bits:P|interval:P");
    cmd->add_flag("--trace", opt->trace, "also print the hidden states after every token");
    cmd->add_flag("--json", opt->json, "print JSON on stdout");
    cmd->callback([opt] {
        using namespace statetrack::lrnn;
        const Precision precision = parse_precision(opt->precision);
        const Network net = load_network(opt->model);
        const automata::Dfa symbols = automata::make_dfa(1, net.alphabet);
        const auto word = automata::parse_word(symbols, opt->word, "--word");
        const RunOutput out = run_network(net, word, precision, opt->trace);
        if (opt->json) {
            nlohmann::json j;
            nlohmann::json accept = nlohmann::json::array();
            for (const auto& a : out.accept) accept.push_back(a ? nlohmann::json(*a) : nlohmann::json(nullptr));
            j["accept"] = accept;
            j["states"] = out.states;
            j["precision"] = precision.name();
            if (opt->trace) {
                j["hidden"] = out.trace;
                j["outputs"] = out.outputs;
            }
            print_json(j);
            return;
        }
        fmt::print("{} on {} tokens in {}\n", opt->model, word.size(), precision.name());
        for (std::size_t t = 0; t < word.size(); ++t) {
            const std::string verdict = !out.accept[t] ? "undecided" : *out.accept[t] ? "accept" : "reject";
            fmt::print("  {:>5} {:<10} {:<9} state {}\n", t + 1, net.alphabet[word[t]], verdict, out.states[t]);
            if (opt->trace)
                for (std::size_t i = 0; i < out.trace[t].size(); ++i)
                    fmt::print("        layer {} output {} h = [{}]\n", i, out.outputs[t][i], fmt::join(out.trace[t][i], ", "));
        }
    });
}

}  // namespace statetrack::cli
