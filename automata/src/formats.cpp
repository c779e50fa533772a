// load_dfa and what the readers share (sink completion, size limit).
#include "statetrack/automata/formats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <unordered_set>

#include "formats_internal.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/zoo.hpp"

namespace statetrack::automata {

namespace detail {

void complete_with_sink(Dfa& dfa, LoadNotes* notes) {
    const std::size_t missing = std::size_t(std::count(dfa.delta.begin(), dfa.delta.end(), no_state));
    if (missing == 0) return;
    const State sink = State(dfa.num_states());
    for (State& target : dfa.delta)
        if (target == no_state) target = sink;
    dfa.accepting.push_back(false);
    for (std::size_t a = 0; a < dfa.num_letters(); ++a) dfa.delta.push_back(sink);
    if (!dfa.state_names.empty()) {
        // A name no other state has, so the written file stays unambiguous.
        std::unordered_set<std::string> taken(dfa.state_names.begin(), dfa.state_names.end());
        std::string name = "sink";
        for (int i = 2; taken.count(name); ++i) name = fmt::format("sink{}", i);
        dfa.state_names.push_back(name);
    }
    if (notes) {
        notes->added_sink = true;
        notes->missing_arcs += missing;
        notes->messages.push_back(fmt::format("added a rejecting sink state {} for {} missing arc{}", sink, missing,
                                              missing == 1 ? "" : "s"));
    }
}

void check_table_size(std::size_t states, std::size_t letters, const std::string& origin, const std::string& place) {
    if (letters != 0 && states > max_table_entries / letters)
        throw LimitError(origin, place,
                         fmt::format("{} states x {} letters exceeds the limit of {} table entries (docs/formats.md)",
                                     states, letters, max_table_entries));
}

}  // namespace detail

std::string att_alphabet_file_for(const std::string& att_path) {
    namespace fs = std::filesystem;
    const fs::path path(att_path);
    const std::string file = path.filename().string();
    // MLRegTest names: NN.MM.CLASS.k.j.i.att with NN the alphabet size (04, 16, 64).
    if (file.size() < 3 || !std::isdigit(static_cast<unsigned char>(file[0])) ||
        !std::isdigit(static_cast<unsigned char>(file[1])) || file[2] != '.')
        return {};
    const int size = (file[0] - '0') * 10 + (file[1] - '0');
    const fs::path candidate = path.parent_path() / fmt::format("alph{}.txt", size);
    std::error_code ec;
    return fs::is_regular_file(candidate, ec) ? candidate.string() : std::string();
}

namespace {
bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

Dfa load_dfa(const std::string& spec, LoadNotes* notes) {
    Dfa dfa;
    if (spec.rfind("zoo:", 0) == 0) {
        dfa = zoo(spec.substr(4));
    } else if (ends_with(spec, ".json")) {
        dfa = read_dfa_json(read_text_file(spec), spec, notes);
    } else if (ends_with(spec, ".att")) {
        const std::string text = read_text_file(spec);
        const std::string alphabet_file = att_alphabet_file_for(spec);
        if (alphabet_file.empty()) {
            dfa = read_att(text, spec, notes);
        } else {
            const std::vector<std::string> symbols = read_att_symbols(read_text_file(alphabet_file), alphabet_file);
            dfa = read_att(text, spec, notes, &symbols);
            if (notes)
                notes->messages.push_back(fmt::format("symbols named by {}",
                                                      std::filesystem::path(alphabet_file).filename().string()));
        }
    } else {
        throw InputError(spec, "", "unknown DFA format: expected a .json or .att file, or zoo:NAME[:ARGS]");
    }
    if (dfa.name.empty() && spec.rfind("zoo:", 0) != 0) dfa.name = std::filesystem::path(spec).stem().string();
    validate(dfa, spec);
    return dfa;
}

}  // namespace statetrack::automata
