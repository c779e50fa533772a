// statetrack verify MODEL --against DFA: the exact all-length certificate and, per precision, the
// closure over representable states or the first failing length (proofs/verify.hpp). With -o the
// JSON certificate also goes to a file, written atomically: a run killed at any moment leaves the
// old complete file or the new one.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "command.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/lrnn/format.hpp"
#include "statetrack/proofs/verify.hpp"

namespace statetrack::cli {

void add_verify(CLI::App& app) {
    struct Options {
        std::string model, dfa, precisions = "fp16,bf16,fp32,fp64", output;
        bool json = false;
    };
    auto opt = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("verify", "Check a model against a DFA: exact all-length certificate, then per precision");
    cmd->add_option("model", opt->model, "statetrack.lrnn/1 model file")->required();
    cmd->add_option("--against", opt->dfa, "DFA: file.json, file.att or zoo:NAME[:ARGS]")->required();
    cmd->add_option("--precisions", opt->precisions, "comma-separated: fp16,bf16,fp32,fp64,bits:P,mpfr:P");
    cmd->add_flag("--json", opt->json, "print the result as JSON on stdout");
    cmd->add_option("-o,--output", opt->output, "also write the JSON certificate to FILE (atomically)");
    cmd->callback([opt] {
        const auto precisions = proofs::parse_precision_list(opt->precisions);
        // A missing output folder is bad input now, not after a long verification.
        const std::filesystem::path out_dir = std::filesystem::path(opt->output).parent_path();
        if (!opt->output.empty() && !out_dir.empty() && !std::filesystem::is_directory(out_dir))
            throw InputError(opt->output, "", "the output folder does not exist");
        const lrnn::Network net = lrnn::load_network(opt->model);
        const automata::Dfa dfa = automata::load_dfa(opt->dfa);
        proofs::VerifyOptions options;
        options.precisions = precisions;
        options.progress = [](const std::string& m) { fmt::print(stderr, "verify: {}\n", m); };
        const proofs::VerifyResult r = proofs::verify(net, dfa, options);
        const nlohmann::json certificate = proofs::to_json(r, dfa);
        if (!opt->output.empty()) write_file_atomically(opt->output, certificate.dump(2) + "\n");
        if (opt->json) {
            print_json(certificate);
        } else {
            fmt::print("{} against {}\n", opt->model, opt->dfa);
            fmt::print("  exact ({}, {} pairs): {}\n", r.exact.method, r.exact.pairs, r.exact.proves);
            for (const auto& p : r.precisions) {
                std::string what;
                if (p.all_lengths) what = fmt::format("correct for every length (closure of {} representable states)", p.states);
                else if (p.first_failure)
                    what = fmt::format("first failing length {}{} (found by {}): \"{}\"", p.first_failure->size(), p.failure_is_shortest ? " (shortest)" : " (not proven shortest)",
                                       p.failure_found_by, automata::format_word(dfa, *p.first_failure));
                else what = fmt::format("no failure found (all words up to length {}, repeated letters, random words); not closed", p.exhaustive_length);
                fmt::print("  {:>8}: {}; certified length from the margin {}\n", p.name, what,
                           std::isfinite(p.certified_length) ? fmt::format("{:.4g}", p.certified_length) : std::string("inf"));
            }
            if (r.counterexample) fmt::print("  COUNTEREXAMPLE: the model and the DFA disagree on \"{}\"\n", automata::format_word(dfa, *r.counterexample));
            if (!opt->output.empty()) fmt::print("  wrote {}\n", opt->output);
        }
        if (!r.passed()) throw Exit{1};
    });
}

}  // namespace statetrack::cli
