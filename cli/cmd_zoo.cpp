// `statetrack zoo list` and `statetrack zoo show NAME`: the built-in benchmark languages.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "command.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/zoo.hpp"

namespace statetrack::cli {

namespace {

struct ZooOptions {
    std::string name;
    bool json = false;
};

void run_list(const ZooOptions& o) {
    const auto& entries = automata::zoo_entries();
    if (o.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& e : entries)
            out.push_back({{"name", e.name}, {"usage", e.usage}, {"example", e.example}, {"description", e.description}});
        print_json(out);
        return;
    }
    std::size_t width = 5;
    for (const auto& e : entries) width = std::max(width, e.usage.size());
    fmt::print("{:<{}}  {}\n", "usage", width, "description");
    for (const auto& e : entries) fmt::print("{:<{}}  {}\n", e.usage, width, e.description);
    fmt::print("\nUse a language as a DFA argument with the prefix zoo:, e.g. zoo:{}\n",
               entries.empty() ? "parity" : entries.front().example);
}

void run_show(const ZooOptions& o) {
    using namespace automata;
    const std::string spec = o.name.rfind("zoo:", 0) == 0 ? o.name.substr(4) : o.name;
    const Dfa dfa = zoo(spec);
    if (o.json) {
        print_json(nlohmann::json::parse(write_dfa_json(dfa)));
        return;
    }
    const std::string base = spec.substr(0, spec.find(':'));
    const auto& entries = zoo_entries();
    const auto entry = std::find_if(entries.begin(), entries.end(), [&](const ZooEntry& e) { return e.name == base; });
    fmt::print("zoo:{}{}\n", spec, entry == entries.end() ? "" : fmt::format(": {}", entry->description));
    fmt::print("{} states, {} letters (-> start, * accepting)\n\n{}", dfa.num_states(), dfa.num_letters(), write_table(dfa));
}

}  // namespace

void add_zoo(CLI::App& app) {
    auto o = std::make_shared<ZooOptions>();
    CLI::App* cmd = app.add_subcommand("zoo", "The built-in benchmark languages");
    cmd->require_subcommand(1);
    CLI::App* list = cmd->add_subcommand("list", "List the languages with their arguments");
    list->add_flag("--json", o->json, "Print JSON on stdout");
    list->callback([o] { run_list(*o); });
    CLI::App* show = cmd->add_subcommand("show", "Print one language's DFA (a transition table, or JSON)");
    show->add_option("name", o->name, "NAME[:ARGS], e.g. mod:3 (the zoo: prefix is optional)")->required();
    show->add_flag("--json", o->json, "Print the DFA as statetrack.dfa/1 JSON");
    show->callback([o] { run_show(*o); });
}

}  // namespace statetrack::cli
