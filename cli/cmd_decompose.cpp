// `statetrack decompose DFA [--method holonomy|banned] [--verify] [--json] [-o FILE]`: the
// Krohn-Rhodes cascade of a DFA (docs/cascades.md), optionally checked for every word.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <memory>

#include "command.hpp"
#include "statetrack/automata/decompose.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"

namespace statetrack::cli {

namespace {

struct DecomposeCliOptions {
    std::string dfa;
    std::string method = "holonomy";
    std::string output;
    std::size_t orbit_limit = automata::default_orbit_limit;
    std::size_t state_limit = automata::default_cascade_state_limit;
    bool verify = false;
    bool json = false;
};

void run_decompose(const DecomposeCliOptions& o) {
    using namespace automata;
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    // Progress on stderr, only once the work has taken more than a second.
    auto progress = [&](const std::string& message) {
        if (Clock::now() - started > std::chrono::seconds(1)) fmt::print(stderr, "decompose: {}\n", message);
    };
    LoadNotes notes;
    const Dfa dfa = load_dfa(o.dfa, &notes);
    for (const auto& message : notes.messages) fmt::print(stderr, "{}: {}\n", o.dfa, message);

    DecomposeOptions options;
    options.method = o.method == "banned" ? DecomposeMethod::banned : DecomposeMethod::holonomy;
    options.orbit_limit = o.orbit_limit;
    options.state_limit = o.state_limit;
    options.progress = progress;
    const Decomposition d = decompose(dfa, options);
    const Cascade& c = d.cascade;

    std::optional<CascadeCheck> check;
    if (o.verify) {
        progress("verifying for all words");
        check = verify_cascade(dfa, c);
    }
    if (!o.output.empty()) write_file_atomically(o.output, write_cascade_json(c));

    if (o.json) {
        nlohmann::json levels = nlohmann::json::array();
        for (const auto& level : c.levels) {
            std::vector<std::size_t> orders;
            std::vector<std::string> names;
            for (const auto& g : level.groups) {
                orders.push_back(g.order);
                names.push_back(g.name);
            }
            levels.push_back({{"points", level.points}, {"groups", orders}, {"group_names", names}});
        }
        nlohmann::json out = {{"dfa", o.dfa},
                              {"states", dfa.num_states()},
                              {"method", c.method},
                              {"levels", levels},
                              {"one_hot_size", one_hot_size(c)},
                              {"cascade_states", c.decode.size()}};
        if (!d.fallback_reason.empty()) out["fallback"] = d.fallback_reason;
        if (c.method == "holonomy") out["orbit_sets"] = d.orbit_sets;
        if (check) {
            out["verified"] = check->ok;
            out["pairs"] = check->pairs;
            if (!check->ok) {
                out["message"] = check->message;
                out["counterexample"] = format_word(dfa, *check->counterexample);
            }
        }
        if (!o.output.empty()) out["output"] = o.output;
        print_json(out);
    } else {
        fmt::print("{}: {} states, method {}{}\n", o.dfa, dfa.num_states(), c.method,
                   d.fallback_reason.empty() ? "" : fmt::format(" (fallback: {})", d.fallback_reason));
        for (std::size_t i = 0; i < c.levels.size(); ++i) {
            std::vector<std::string> groups;
            for (const auto& g : c.levels[i].groups) groups.push_back(g.name);
            fmt::print("  level {}: {} points{}\n", i + 1, c.levels[i].points,
                       groups.empty() ? ", resets only" : fmt::format(", groups {}", fmt::join(groups, " ")));
        }
        fmt::print("{} levels, one-hot size {}, {} reachable cascade states\n", c.levels.size(), one_hot_size(c),
                   c.decode.size());
        if (check) {
            if (check->ok)
                fmt::print("verified for all words: {} reachable (state, cascade state) pairs decode consistently\n",
                           check->pairs);
            else
                fmt::print("verification FAILED: {} (word: \"{}\")\n", check->message,
                           format_word(dfa, *check->counterexample));
        }
        if (!o.output.empty()) fmt::print("cascade written to {}\n", o.output);
    }
    if (check && !check->ok) throw Exit{1};
}

}  // namespace

void add_decompose(CLI::App& app) {
    auto o = std::make_shared<DecomposeCliOptions>();
    CLI::App* cmd = app.add_subcommand("decompose", "Krohn-Rhodes (holonomy) cascade of a DFA: levels, points, groups");
    cmd->add_option("dfa", o->dfa, "DFA: FILE.json, FILE.att or zoo:NAME[:ARGS]")->required();
    cmd->add_option("--method", o->method, "holonomy (default; group automata give one level) or banned")
        ->check(CLI::IsMember({"holonomy", "banned"}));
    cmd->add_flag("--verify", o->verify, "Check the cascade against the DFA for every word (exit 1 when it fails)");
    cmd->add_flag("--json", o->json, "Print the summary as JSON");
    cmd->add_option("-o,--output", o->output, "Write the cascade as statetrack.cascade/1 JSON (docs/cascades.md)");
    cmd->add_option("--orbit-limit", o->orbit_limit, "Image sets beyond which holonomy falls back to banned")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--state-limit", o->state_limit, "Reachable cascade states beyond which the input is refused")
        ->check(CLI::PositiveNumber);
    cmd->callback([o] { run_decompose(*o); });
}

}  // namespace statetrack::cli
