// `statetrack convert DFA --to json|att|dot [-o FILE]`.
#include <fmt/format.h>

#include <memory>

#include "command.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"

namespace statetrack::cli {

namespace {

struct ConvertOptions {
    std::string dfa;
    std::string to;
    std::string output;
};

void run_convert(const ConvertOptions& o) {
    using namespace automata;
    // Check the format before loading, so a bad --to never costs a (possibly slow) load.
    std::string (*writer)(const Dfa&) = nullptr;
    if (o.to == "json") writer = write_dfa_json;
    else if (o.to == "att") writer = write_att;
    else if (o.to == "dot") writer = write_dot;
    else throw InputError("command line", "--to", fmt::format("unknown format '{}' (expected json, att or dot)", o.to));
    LoadNotes notes;
    const Dfa dfa = load_dfa(o.dfa, &notes);
    const std::string text = writer(dfa);
    for (const auto& message : notes.messages) fmt::print(stderr, "{}: {}\n", o.dfa, message);
    if (o.output.empty() || o.output == "-") {
        fmt::print("{}", text);
    } else {
        write_file_atomically(o.output, text);
        fmt::print(stderr, "wrote {} ({} states, {} letters, {})\n", o.output, dfa.num_states(), dfa.num_letters(), o.to);
    }
}

}  // namespace

void add_convert(CLI::App& app) {
    auto o = std::make_shared<ConvertOptions>();
    CLI::App* cmd = app.add_subcommand("convert", "Write a DFA as statetrack.dfa/1 JSON, AT&T text or Graphviz DOT");
    cmd->add_option("dfa", o->dfa, "DFA: FILE.json, FILE.att or zoo:NAME[:ARGS]")->required();
    cmd->add_option("--to", o->to, "Output format: json, att or dot")->required();
    cmd->add_option("-o,--output", o->output, "Output file (written atomically); stdout when absent");
    cmd->callback([o] { run_convert(*o); });
}

}  // namespace statetrack::cli
