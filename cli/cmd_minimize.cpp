// `statetrack minimize DFA [-o OUT]`: the minimal complete DFA as statetrack.dfa/1 JSON.
#include <fmt/format.h>

#include <memory>

#include "command.hpp"
#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"

namespace statetrack::cli {

namespace {

struct MinimizeOptions {
    std::string dfa;
    std::string output;
    bool json = false;
};

void run_minimize(const MinimizeOptions& o) {
    using namespace automata;
    LoadNotes notes;
    const Dfa dfa = load_dfa(o.dfa, &notes);
    const Dfa minimal = minimize(dfa);
    const std::string text = write_dfa_json(minimal);
    const bool to_stdout = o.output.empty() || o.output == "-";
    if (!to_stdout) write_file_atomically(o.output, text);
    if (o.json) {
        // With the DFA itself on stdout, the JSON summary would corrupt it: it goes to stdout only with -o.
        const nlohmann::json summary = {{"source", o.dfa},
                                        {"states", dfa.num_states()},
                                        {"minimal_states", minimal.num_states()},
                                        {"output", to_stdout ? nlohmann::json() : nlohmann::json(o.output)},
                                        {"loader", notes.messages}};
        if (to_stdout) fmt::print(stderr, "{}\n", summary.dump());
        else print_json(summary);
    } else {
        for (const auto& message : notes.messages) fmt::print(stderr, "{}: {}\n", o.dfa, message);
        const std::string line = fmt::format("{}: {} states -> {} states (minimal){}", o.dfa, dfa.num_states(),
                                             minimal.num_states(), to_stdout ? "" : fmt::format(", written to {}", o.output));
        if (to_stdout) fmt::print(stderr, "{}\n", line);
        else fmt::print("{}\n", line);
    }
    if (to_stdout) fmt::print("{}", text);
}

}  // namespace

void add_minimize(CLI::App& app) {
    auto o = std::make_shared<MinimizeOptions>();
    CLI::App* cmd = app.add_subcommand("minimize", "Minimize a DFA (Hopcroft) and write it as statetrack.dfa/1 JSON");
    cmd->add_option("dfa", o->dfa, "DFA: FILE.json, FILE.att or zoo:NAME[:ARGS]")->required();
    cmd->add_option("-o,--output", o->output, "Output file (written atomically); stdout when absent");
    cmd->add_flag("--json", o->json, "Print the sizes as JSON");
    cmd->callback([o] { run_minimize(*o); });
}

}  // namespace statetrack::cli
