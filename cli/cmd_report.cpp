// statetrack report [-o DIR]: the main job (proofs/report.hpp); writes DIR/report.md and DIR/report.json.
#include <fmt/format.h>

#include <filesystem>

#include "command.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/proofs/report.hpp"

namespace statetrack::cli {

void add_report(CLI::App& app) {
    struct Options {
        std::string output, mlregtest;
        bool json = false, quick = false;
    };
    auto opt = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("report", "The main job: compile and verify the zoo, check every theorem; Markdown + JSON");
    cmd->add_option("-o,--output", opt->output, "folder for report.md and report.json (created if missing)");
    cmd->add_option("--mlregtest", opt->mlregtest, "folder of MLRegTest .att files for theorem4");
    cmd->add_flag("--quick", opt->quick, "sized-down theorem checks (tests)");
    cmd->add_flag("--json", opt->json, "print the report JSON on stdout instead of the table");
    cmd->callback([opt] {
        if (!opt->output.empty()) {
            std::error_code ec;
            std::filesystem::create_directories(opt->output, ec);
            if (ec || !std::filesystem::is_directory(opt->output)) throw InputError(opt->output, "-o", "cannot create the output folder");
        }
        proofs::ReportOptions o;
        o.quick = opt->quick;
        o.mlregtest_dir = opt->mlregtest;
        o.progress = [](const std::string& m) { fmt::print(stderr, "report: {}\n", m); };
        const proofs::Report r = proofs::run_report(o);
        if (!opt->output.empty()) {
            write_file_atomically(opt->output + "/report.md", r.markdown);
            write_file_atomically(opt->output + "/report.json", r.json.dump(2) + "\n");
        }
        if (opt->json) print_json(r.json);
        else fmt::print("{}", r.table);
        if (!r.passed) throw Exit{1};
    });
}

}  // namespace statetrack::cli
