// `statetrack info DFA`: size, alphabet, minimality, transition monoid and what the loader did.
#include <fmt/format.h>

#include <memory>

#include "command.hpp"
#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/automata/monoid.hpp"

namespace statetrack::cli {

namespace {

struct InfoOptions {
    std::string dfa;
    bool json = false;
    std::size_t monoid_limit = automata::default_monoid_limit;
};

void run_info(const InfoOptions& o) {
    using namespace automata;
    LoadNotes notes;
    const Dfa dfa = load_dfa(o.dfa, &notes);
    const bool minimal = is_minimal(dfa);
    const std::size_t minimal_states = minimal ? dfa.num_states() : minimize(dfa).num_states();
    // The limit bounds the time: random 9-state DFAs have monoids of ~10^8 elements.
    const MonoidSummary monoid = summarize_monoid(dfa, o.monoid_limit);
    std::vector<std::size_t> accepting;
    for (std::size_t q = 0; q < dfa.num_states(); ++q)
        if (dfa.accepting[q]) accepting.push_back(q);
    const char* classification = monoid.classification ? to_string(*monoid.classification) : nullptr;

    if (o.json) {
        nlohmann::json out = {
            {"source", o.dfa},
            {"name", dfa.name},
            {"states", dfa.num_states()},
            {"alphabet", dfa.alphabet},
            {"start", dfa.start},
            {"accepting", accepting},
            {"minimal", minimal},
            {"minimal_states", minimal_states},
            {"monoid_size", monoid.size ? nlohmann::json(*monoid.size) : nlohmann::json()},
            {"monoid_limit", o.monoid_limit},
            {"monoid_elements_seen", monoid.elements_seen},
            {"class", classification ? nlohmann::json(classification) : nlohmann::json()},
            {"group_orders", monoid.group_orders},
            {"monoid_message", monoid.message},
            {"loader", {{"added_sink", notes.added_sink}, {"missing_arcs", notes.missing_arcs}, {"messages", notes.messages}}},
        };
        print_json(out);
        return;
    }
    fmt::print("dfa:        {}{}\n", o.dfa, dfa.name.empty() || dfa.name == o.dfa ? "" : fmt::format(" ({})", dfa.name));
    fmt::print("states:     {}\n", dfa.num_states());
    fmt::print("alphabet:   {} letter{}: {}\n", dfa.num_letters(), dfa.num_letters() == 1 ? "" : "s", fmt::join(dfa.alphabet, " "));
    fmt::print("start:      {}\n", state_label(dfa, dfa.start));
    fmt::print("accepting:  {} of {} states\n", accepting.size(), dfa.num_states());
    if (minimal) fmt::print("minimal:    yes\n");
    else fmt::print("minimal:    no (the minimal DFA has {} states)\n", minimal_states);
    if (monoid.size) fmt::print("monoid:     {} elements (transition monoid)\n", *monoid.size);
    else fmt::print("monoid:     over the limit of {} elements (raise --monoid-limit)\n", o.monoid_limit);
    fmt::print("class:      {}\n", classification ? classification : "undecided (monoid over the limit)");
    if (!monoid.group_orders.empty()) fmt::print("groups:     orders {}\n", fmt::join(monoid.group_orders, ", "));
    if (!monoid.size && !monoid.message.empty()) fmt::print("note:       {}\n", monoid.message);
    for (const auto& message : notes.messages) fmt::print("loader:     {}\n", message);
}

}  // namespace

void add_info(CLI::App& app) {
    auto o = std::make_shared<InfoOptions>();
    CLI::App* cmd = app.add_subcommand("info", "Describe a DFA: size, alphabet, minimality, transition monoid, class");
    cmd->add_option("dfa", o->dfa, "DFA: FILE.json, FILE.att or zoo:NAME[:ARGS]")->required();
    cmd->add_flag("--json", o->json, "Print JSON on stdout");
    cmd->add_option("--monoid-limit", o->monoid_limit, "Stop enumerating the transition monoid after this many elements")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    cmd->callback([o] { run_info(*o); });
}

}  // namespace statetrack::cli
