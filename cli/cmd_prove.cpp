// statetrack prove NAME: one checker per statement of PAPER.md (proofs/theorems.hpp).
#include <fmt/format.h>

#include "command.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/lrnn/format.hpp"
#include "statetrack/proofs/theorems.hpp"

namespace statetrack::cli {

void add_prove(CLI::App& app) {
    struct Options {
        std::string name, model, precision = "fp32", mlregtest;
        bool json = false, quick = false;
        std::size_t stride = 0;
    };
    auto opt = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("prove", "Check a statement of PAPER.md: theorem1, theorem2, prop1, theorem3, theorem4, theorem6");
    cmd->add_option("name", opt->name, "theorem1|theorem2|prop1|theorem3|theorem4|theorem6")->required();
    cmd->add_option("--model", opt->model, "theorem1 only: decide for this statetrack.lrnn/1 model");
    cmd->add_option("--precision", opt->precision, "theorem1 --model: fp16|bf16|fp32|fp64|bits:P|mpfr:P|exact");
    cmd->add_option("--mlregtest", opt->mlregtest, "theorem4: folder of MLRegTest .att files (default: the source tree's copy)");
    cmd->add_option("--mlregtest-stride", opt->stride, "theorem4: every K-th corpus file (default: all; 49 with --quick)")
        ->check(CLI::PositiveNumber);
    cmd->add_flag("--quick", opt->quick, "sized-down run (tests); the default is the full check");
    cmd->add_flag("--json", opt->json, "print the result as JSON on stdout");
    cmd->callback([opt] {
        proofs::TheoremReport r;
        if (!opt->model.empty()) {
            if (opt->name != "theorem1") throw InputError("--model", opt->model, "--model applies to theorem1 only");
            r = proofs::prove_theorem1_model(lrnn::load_network(opt->model), lrnn::parse_precision(opt->precision));
        } else {
            proofs::ProveOptions o;
            o.quick = opt->quick;
            o.mlregtest_dir = opt->mlregtest;
            o.mlregtest_stride = opt->stride;
            o.progress = [](const std::string& m) { fmt::print(stderr, "prove: {}\n", m); };
            r = proofs::prove(opt->name, o);
        }
        if (opt->json) {
            print_json(proofs::to_json(r));
        } else {
            fmt::print("{}: {}\n", r.name, r.statement);
            for (const auto& l : r.lines) fmt::print("{}\n", l);
            fmt::print("{}: {}\n", r.name, r.holds ? "HOLDS" : "FAILS");
        }
        if (!r.holds) throw Exit{1};
    });
}

}  // namespace statetrack::cli
