// Output-only formats: Graphviz DOT and a human-readable transition table.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "statetrack/automata/formats.hpp"

namespace statetrack::automata {

namespace {
std::string dot_string(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out + "\"";
}
}  // namespace

std::string write_dot(const Dfa& dfa) {
    std::string out = fmt::format("digraph {} {{\n  rankdir=LR;\n  node [shape=circle];\n",
                                  dot_string(dfa.name.empty() ? "dfa" : dfa.name));
    out += "  __start [shape=point, label=\"\"];\n";
    for (std::size_t q = 0; q < dfa.num_states(); ++q)
        out += fmt::format("  {} [label={}{}];\n", q, dot_string(state_label(dfa, State(q))),
                           dfa.accepting[q] ? ", shape=doublecircle" : "");
    out += fmt::format("  __start -> {};\n", dfa.start);
    for (std::size_t q = 0; q < dfa.num_states(); ++q) {
        // One edge per target, labelled with every symbol leading there (in alphabet order).
        std::map<State, std::vector<std::string>> by_target;
        for (std::size_t a = 0; a < dfa.num_letters(); ++a) by_target[dfa.next(State(q), Letter(a))].push_back(dfa.alphabet[a]);
        for (const auto& [target, symbols] : by_target)
            out += fmt::format("  {} -> {} [label={}];\n", q, target, dot_string(fmt::format("{}", fmt::join(symbols, ", "))));
    }
    out += "}\n";
    return out;
}

std::string write_table(const Dfa& dfa) {
    std::vector<std::string> labels;
    std::size_t width = 1;
    for (std::size_t q = 0; q < dfa.num_states(); ++q) {
        labels.push_back(state_label(dfa, State(q)));
        width = std::max(width, labels.back().size());
    }
    for (const auto& symbol : dfa.alphabet) width = std::max(width, symbol.size());
    std::string out;
    const auto end_line = [&](std::string line) {
        line.erase(line.find_last_not_of(' ') + 1);
        out += line + '\n';
    };
    std::string header = fmt::format("{:5}{:<{}}", "", "", width);
    for (const auto& symbol : dfa.alphabet) header += fmt::format("  {:<{}}", symbol, width);
    end_line(header);
    for (std::size_t q = 0; q < dfa.num_states(); ++q) {
        std::string row = fmt::format("{:2} {:1} {:<{}}", q == dfa.start ? "->" : "", dfa.accepting[q] ? "*" : "", labels[q], width);
        for (std::size_t a = 0; a < dfa.num_letters(); ++a) row += fmt::format("  {:<{}}", labels[dfa.next(State(q), Letter(a))], width);
        end_line(row);
    }
    return out;
}

}  // namespace statetrack::automata
