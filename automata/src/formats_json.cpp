// statetrack.dfa/1: the JSON DFA format of DESIGN.md.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "formats_internal.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/formats.hpp"

namespace statetrack::automata {

namespace {

using nlohmann::json;
constexpr const char* format_id = "statetrack.dfa/1";

const char* type_name(const json& value) {
    if (value.is_number_unsigned()) return "a non-negative integer";
    if (value.is_number_integer()) return "a negative integer";
    if (value.is_number_float()) return "a fractional number";
    return value.type_name();  // "null", "boolean", "string", "array", "object"
}

// Line and column (1-based) of a byte offset, for parse errors.
std::pair<std::size_t, std::size_t> line_and_column(const std::string& text, std::size_t byte) {
    byte = std::min(byte, text.size());
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < byte; ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return {line, column};
}

// nlohmann's message without its "[json.exception...] parse error at line L, column C: " prefix.
std::string parse_error_reason(const json::parse_error& e) {
    std::string what = e.what();
    const auto column = what.find("column ");
    const auto colon = what.find(": ", column == std::string::npos ? 0 : column);
    return colon == std::string::npos ? what : what.substr(colon + 2);
}

struct Reader {
    const std::string& origin;

    [[noreturn]] void fail(const std::string& place, const std::string& message) const {
        throw InputError(origin, place, message);
    }

    const json& field(const json& object, const char* key) const {
        const auto it = object.find(key);
        if (it == object.end()) fail(fmt::format("/{}", key), "missing field");
        return *it;
    }

    std::size_t index(const json& value, const std::string& place, std::size_t bound, const char* what) const {
        if (!value.is_number_unsigned())
            fail(place, fmt::format("expected a {} (a non-negative integer), got {}", what, type_name(value)));
        const auto i = value.get<std::uint64_t>();
        if (i >= bound) fail(place, fmt::format("{} {} out of range 0..{}", what, i, bound - 1));
        return std::size_t(i);
    }

    const json& array(const json& value, const std::string& place) const {
        if (!value.is_array()) fail(place, fmt::format("expected an array, got {}", type_name(value)));
        return value;
    }
};

}  // namespace

Dfa read_dfa_json(const std::string& text, const std::string& origin, LoadNotes* notes) {
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::parse_error& e) {
        const auto [line, column] = line_and_column(text, e.byte == 0 ? 0 : e.byte - 1);
        throw InputError(origin, fmt::format("line {}, column {}", line, column),
                         fmt::format("malformed JSON: {}", parse_error_reason(e)));
    } catch (const json::exception& e) {
        // json::parse also throws out_of_range.406 for a number beyond double range (1e999); found by fuzzing.
        throw InputError(origin, "", fmt::format("malformed JSON: {}", e.what()));
    }
    const Reader r{origin};
    if (!doc.is_object()) r.fail("/", fmt::format("expected a JSON object, got {}", type_name(doc)));

    const json& format = r.field(doc, "format");
    if (!format.is_string() || format.get<std::string>() != format_id)
        r.fail("/format", fmt::format("expected \"{}\", got {}", format_id, format.dump()));
    for (const auto& item : doc.items()) {
        const std::string& key = item.key();  // not a structured binding: clang < 16 cannot capture those
        static const char* known[] = {"format", "name", "alphabet", "states", "start", "accepting", "transitions"};
        if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return key == k; }) == std::end(known) &&
            notes)
            notes->messages.push_back(fmt::format("ignored unknown field /{}", key));
    }

    Dfa dfa;
    if (const auto it = doc.find("name"); it != doc.end()) {
        if (!it->is_string()) r.fail("/name", fmt::format("expected a string, got {}", type_name(*it)));
        dfa.name = it->get<std::string>();
    }

    const json& alphabet = r.array(r.field(doc, "alphabet"), "/alphabet");
    if (alphabet.empty()) r.fail("/alphabet", "the alphabet is empty");
    std::unordered_map<std::string, std::size_t> symbol_at;
    for (std::size_t a = 0; a < alphabet.size(); ++a) {
        const std::string place = fmt::format("/alphabet/{}", a);
        if (!alphabet[a].is_string()) r.fail(place, fmt::format("expected a symbol (a string), got {}", type_name(alphabet[a])));
        std::string symbol = alphabet[a].get<std::string>();
        if (symbol.empty()) r.fail(place, "empty symbol");
        if (const auto [it, fresh] = symbol_at.emplace(symbol, a); !fresh)
            r.fail(place, fmt::format("duplicate symbol \"{}\" (also /alphabet/{})", symbol, it->second));
        dfa.alphabet.push_back(std::move(symbol));
    }
    const std::size_t k = dfa.alphabet.size();

    const json& states = r.field(doc, "states");
    std::size_t n = 0;
    if (states.is_number_unsigned()) {
        n = std::size_t(states.get<std::uint64_t>());
        if (n == 0) r.fail("/states", "the automaton has no states");
    } else if (states.is_array()) {
        n = states.size();
        if (n == 0) r.fail("/states", "the automaton has no states");
        std::unordered_map<std::string, std::size_t> name_at;
        for (std::size_t q = 0; q < n; ++q) {
            const std::string place = fmt::format("/states/{}", q);
            if (!states[q].is_string()) r.fail(place, fmt::format("expected a state name (a string), got {}", type_name(states[q])));
            std::string name = states[q].get<std::string>();
            if (!name.empty())
                if (const auto [it, fresh] = name_at.emplace(name, q); !fresh)
                    r.fail(place, fmt::format("duplicate state name \"{}\" (also /states/{})", name, it->second));
            dfa.state_names.push_back(std::move(name));
        }
    } else {
        r.fail("/states", fmt::format("expected a state count or a list of state names, got {}", type_name(states)));
    }
    detail::check_table_size(n, k, origin, "/states");

    dfa.start = State(r.index(r.field(doc, "start"), "/start", n, "start state"));

    dfa.accepting.assign(n, false);
    const json& accepting = r.array(r.field(doc, "accepting"), "/accepting");
    for (std::size_t i = 0; i < accepting.size(); ++i)
        dfa.accepting[r.index(accepting[i], fmt::format("/accepting/{}", i), n, "state")] = true;

    const json& rows = r.array(r.field(doc, "transitions"), "/transitions");
    if (rows.size() != n)
        r.fail("/transitions", fmt::format("{} rows for {} states (one row per state is needed)", rows.size(), n));
    dfa.delta.assign(n * k, no_state);
    for (std::size_t q = 0; q < n; ++q) {
        const std::string row_place = fmt::format("/transitions/{}", q);
        const json& row = r.array(rows[q], row_place);
        if (row.size() != k)
            r.fail(row_place, fmt::format("{} targets for {} letters (one per letter, null for a missing arc)", row.size(), k));
        for (std::size_t a = 0; a < k; ++a)
            if (!row[a].is_null())
                dfa.delta[q * k + a] = State(r.index(row[a], fmt::format("{}/{}", row_place, a), n, "target"));
    }
    detail::complete_with_sink(dfa, notes);
    validate(dfa, origin);
    return dfa;
}

std::string write_dfa_json(const Dfa& dfa) {
    // Written by hand (not json::dump) to keep one transition row per line, which diffs well.
    const auto quoted = [](const std::string& s) { return json(s).dump(); };
    std::string out = fmt::format("{{\n  \"format\": \"{}\",\n", format_id);
    if (!dfa.name.empty()) out += fmt::format("  \"name\": {},\n", quoted(dfa.name));
    std::vector<std::string> symbols;
    for (const auto& s : dfa.alphabet) symbols.push_back(quoted(s));
    out += fmt::format("  \"alphabet\": [{}],\n", fmt::join(symbols, ", "));
    if (dfa.state_names.empty()) {
        out += fmt::format("  \"states\": {},\n", dfa.num_states());
    } else {
        std::vector<std::string> names;
        for (const auto& s : dfa.state_names) names.push_back(quoted(s));
        out += fmt::format("  \"states\": [{}],\n", fmt::join(names, ", "));
    }
    out += fmt::format("  \"start\": {},\n", dfa.start);
    std::vector<std::size_t> accepting;
    for (std::size_t q = 0; q < dfa.num_states(); ++q)
        if (dfa.accepting[q]) accepting.push_back(q);
    out += fmt::format("  \"accepting\": [{}],\n", fmt::join(accepting, ", "));
    out += "  \"transitions\": [";
    const std::size_t k = dfa.num_letters();
    for (std::size_t q = 0; q < dfa.num_states(); ++q) {
        out += q ? ",\n    [" : "\n    [";
        for (std::size_t a = 0; a < k; ++a) out += fmt::format("{}{}", a ? ", " : "", dfa.delta[q * k + a]);
        out += "]";
    }
    out += "\n  ]\n}\n";
    return out;
}

}  // namespace statetrack::automata
