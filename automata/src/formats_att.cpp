// AT&T text (OpenFst's textual format) for acceptors, as in the MLRegTest corpus.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "formats_internal.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/formats.hpp"

namespace statetrack::automata {

namespace {

// State indices beyond this are refused before anything is allocated (docs/formats.md).
constexpr std::uint64_t max_att_state = std::uint64_t(1) << 24;

std::vector<std::string_view> split_fields(std::string_view line) {
    std::vector<std::string_view> fields;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
        const std::size_t begin = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
        if (i > begin) fields.push_back(line.substr(begin, i - begin));
    }
    return fields;
}

// Symbols end up in JSON, which needs UTF-8: reject other bytes here, where the line is known.
// nlohmann's own check, so whatever passes here can be written by write_dfa_json.
bool valid_utf8(std::string_view text) {
    try {
        (void)nlohmann::json(std::string(text)).dump();
        return true;
    } catch (const nlohmann::json::type_error&) {
        return false;
    }
}

struct LineReader {
    const std::string& origin;
    std::size_t line = 0;

    std::string place() const { return fmt::format("line {}", line); }
    [[noreturn]] void fail(const std::string& message) const { throw InputError(origin, place(), message); }

    void symbol(std::string_view field) const {
        if (!valid_utf8(field)) fail("symbol is not valid UTF-8");
    }

    State state(std::string_view field) const {
        std::uint64_t value = 0;
        const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
        if (ec != std::errc() || end != field.data() + field.size())
            fail(fmt::format("expected a state number, got '{}'", field));
        if (value >= max_att_state)
            throw LimitError(origin, place(), fmt::format("state {} exceeds the limit of {} states", value, max_att_state));
        return State(value);
    }

    void weight(std::string_view field) const {
        double value = 0;
        const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
        if ((ec != std::errc() && ec != std::errc::result_out_of_range) || end != field.data() + field.size())
            if (field != "Infinity" && field != "inf")
                fail(fmt::format("expected a weight (a number), got '{}'", field));
    }
};

// Calls visit(fields) for every non-blank line, with r.line set to its 1-based number.
template <class Visit>
void for_each_line(const std::string& text, LineReader& r, Visit visit) {
    std::size_t begin = 0;
    while (begin <= text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        ++r.line;
        const auto fields = split_fields(std::string_view(text).substr(begin, end - begin));
        begin = end + 1;
        if (!fields.empty()) visit(fields);
    }
}

struct Arc {
    State target;
    std::size_t line;
};

}  // namespace

Dfa read_att(const std::string& text, const std::string& origin, LoadNotes* notes, const std::vector<std::string>* alphabet) {
    std::unordered_map<std::string, Letter> letter_of;
    std::vector<std::string> symbols;
    if (alphabet) {
        for (const auto& s : *alphabet)
            if (letter_of.emplace(s, Letter(symbols.size())).second) symbols.push_back(s);
    }
    // (source, letter) -> target with the line that set it, to report non-determinism precisely.
    std::map<std::pair<State, Letter>, Arc> arcs;
    std::vector<State> accepting_states;
    State max_state = 0;
    bool any_line = false;

    LineReader r{origin};
    for_each_line(text, r, [&](const std::vector<std::string_view>& fields) {
        any_line = true;
        if (fields.size() == 1 || fields.size() == 2) {
            const State q = r.state(fields[0]);
            if (fields.size() == 2) r.weight(fields[1]);
            accepting_states.push_back(q);
            max_state = std::max(max_state, q);
            return;
        }
        if (fields.size() != 4 && fields.size() != 5)
            r.fail(fmt::format("expected 'src dst in out [weight]' or 'state [weight]', got {} fields", fields.size()));
        const State source = r.state(fields[0]);
        const State target = r.state(fields[1]);
        if (fields.size() == 5) r.weight(fields[4]);
        r.symbol(fields[2]);
        const std::string symbol(fields[2]);
        if (fields[2] != fields[3])
            r.fail(fmt::format("input symbol '{}' differs from output symbol '{}' (only acceptors are supported)",
                               fields[2], fields[3]));
        if (symbol == "<eps>" || symbol == "<EPS>")
            r.fail(fmt::format("epsilon arc '{}': the automaton must be deterministic", symbol));
        auto it = letter_of.find(symbol);
        if (it == letter_of.end()) {
            if (alphabet) r.fail(fmt::format("symbol '{}' is not in the given alphabet", symbol));
            it = letter_of.emplace(symbol, Letter(symbols.size())).first;
            symbols.push_back(symbol);
        }
        const auto [arc, fresh] = arcs.emplace(std::pair{source, it->second}, Arc{target, r.line});
        if (!fresh && arc->second.target != target)
            r.fail(fmt::format("not deterministic: state {} on '{}' goes to {} here and to {} on line {}", source, symbol,
                               target, arc->second.target, arc->second.line));
        max_state = std::max({max_state, source, target});
    });
    if (!any_line) throw InputError(origin, "", "the file is empty (no arcs and no accepting states)");
    if (symbols.empty()) throw InputError(origin, "", "no arcs and no alphabet: the alphabet is empty");

    const std::size_t n = std::size_t(max_state) + 1;
    detail::check_table_size(n, symbols.size(), origin, "");
    Dfa dfa;
    dfa.alphabet = std::move(symbols);
    dfa.start = 0;
    dfa.accepting.assign(n, false);
    for (State q : accepting_states) dfa.accepting[q] = true;
    dfa.delta.assign(n * dfa.num_letters(), no_state);
    for (const auto& [key, arc] : arcs) dfa.next(key.first, key.second) = arc.target;
    detail::complete_with_sink(dfa, notes);
    validate(dfa, origin);
    return dfa;
}

std::string write_att(const Dfa& dfa) {
    for (std::size_t a = 0; a < dfa.num_letters(); ++a)
        if (dfa.alphabet[a].empty() || dfa.alphabet[a].find_first_of(" \t\r\n") != std::string::npos)
            throw InputError(dfa.name.empty() ? std::string("<dfa>") : dfa.name, fmt::format("/alphabet/{}", a),
                             fmt::format("symbol '{}' cannot be written in AT&T text (empty or contains whitespace)",
                                         dfa.alphabet[a]));
    // AT&T makes the source of the first line the start state; renumber so the start is 0.
    std::vector<State> number(dfa.num_states());
    for (std::size_t q = 0; q < dfa.num_states(); ++q) number[q] = State(q);
    std::swap(number[0], number[dfa.start]);
    std::vector<State> state_of(dfa.num_states());
    for (std::size_t q = 0; q < dfa.num_states(); ++q) state_of[number[q]] = State(q);

    std::string out;
    for (std::size_t i = 0; i < dfa.num_states(); ++i) {
        const State q = state_of[i];
        for (std::size_t a = 0; a < dfa.num_letters(); ++a)
            out += fmt::format("{}\t{}\t{}\t{}\n", i, number[dfa.next(q, Letter(a))], dfa.alphabet[a], dfa.alphabet[a]);
    }
    for (std::size_t i = 0; i < dfa.num_states(); ++i)
        if (dfa.accepting[state_of[i]]) out += fmt::format("{}\n", i);
    return out;
}

std::vector<std::string> read_att_symbols(const std::string& text, const std::string& origin) {
    std::vector<std::string> symbols;
    std::unordered_set<std::string> seen;
    LineReader r{origin};
    for_each_line(text, r, [&](const std::vector<std::string_view>& fields) {
        if (fields.size() != 2) r.fail(fmt::format("expected 'symbol number', got {} fields", fields.size()));
        std::uint64_t key = 0;
        const auto [ptr, ec] = std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), key);
        if (ec != std::errc() || ptr != fields[1].data() + fields[1].size())
            r.fail(fmt::format("expected a symbol number, got '{}'", fields[1]));
        if (key == 0) return;  // epsilon
        r.symbol(fields[0]);
        std::string symbol(fields[0]);
        if (!seen.insert(symbol).second) r.fail(fmt::format("duplicate symbol '{}'", symbol));
        symbols.push_back(std::move(symbol));
    });
    if (symbols.empty()) throw InputError(origin, "", "the symbol table lists no symbols");
    return symbols;
}

}  // namespace statetrack::automata
