// att_compact_states (fuzz_inputs.hpp says what it does). Compiled without the coverage
// instrumentation of the fuzz targets (tests/fuzz/CMakeLists.txt), with ASan and UBSan.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_inputs.hpp"

namespace statetrack::fuzz {

namespace {

// Calls visit(index, begin, length) for the fields of every line of AT&T text, split as the loader
// splits them (lines at '\n', fields at spaces, tabs and CRs), with the line's field count known
// first: visit_line(count) returns false to skip the line's fields. No allocation.
template <class VisitLine, class VisitField>
void att_for_each_field(const std::string& text, VisitLine visit_line, VisitField visit_field) {
    const auto blank = [&](std::size_t i) { return text[i] == ' ' || text[i] == '\t' || text[i] == '\r'; };
    for (std::size_t begin = 0; begin <= text.size();) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        std::size_t count = 0;
        for (std::size_t i = begin; i < end;) {
            while (i < end && blank(i)) ++i;
            if (i < end) ++count;
            while (i < end && !blank(i)) ++i;
        }
        if (visit_line(count)) {
            std::size_t index = 0;
            for (std::size_t i = begin; i < end;) {
                while (i < end && blank(i)) ++i;
                const std::size_t first = i;
                while (i < end && !blank(i)) ++i;
                if (i > first) visit_field(index++, first, i - first);
            }
        }
        begin = end + 1;
    }
}

}  // namespace

std::string att_compact_states(const std::string& text) {
    constexpr std::uint64_t max_att_state = std::uint64_t(1) << 24;  // docs/limits.md
    const std::uint64_t budget = att_entries_base + att_entries_per_byte * text.size();
    // State fields: the first of `q [weight]`, the first two of `src dst in out [weight]`.
    std::size_t states_in_line = 0, symbol_lines = 0;
    const auto state_fields = [&](std::size_t count) {
        states_in_line = count == 1 || count == 2 ? 1 : count == 4 || count == 5 ? 2 : 0;
        symbol_lines += states_in_line == 2;
        return states_in_line != 0;
    };
    const auto state_value = [&](std::size_t first, std::size_t length, std::uint64_t& value) {
        const auto [end, ec] = std::from_chars(text.data() + first, text.data() + first + length, value);
        return ec == std::errc() && end == text.data() + first + length;  // else the loader refuses the line
    };
    // Pass 1, no allocation: the largest state number; the symbol lines bound the alphabet.
    std::uint64_t max_state = 0;
    bool beyond_limit = false;
    att_for_each_field(text, state_fields, [&](std::size_t index, std::size_t first, std::size_t length) {
        std::uint64_t value = 0;
        if (index < states_in_line && state_value(first, length, value)) {
            beyond_limit = beyond_limit || value >= max_att_state;
            max_state = std::max(max_state, value);
        }
    });
    const auto entries = [&](std::uint64_t letters) { return (max_state + 2) * std::max<std::uint64_t>(letters, 4); };
    if (beyond_limit || entries(symbol_lines) <= budget) return text;
    // Pass 2: the number of distinct symbols.
    std::vector<std::string_view> symbols;
    att_for_each_field(text, state_fields, [&](std::size_t index, std::size_t first, std::size_t length) {
        if (index == 2 && states_in_line == 2) symbols.push_back(std::string_view(text).substr(first, length));
    });
    std::sort(symbols.begin(), symbols.end());
    const std::uint64_t letters = std::uint64_t(std::unique(symbols.begin(), symbols.end()) - symbols.begin());
    // The loader's own size check: (largest state + 1) x symbols beyond the limit is refused unallocated.
    if (entries(letters) <= budget || (max_state + 1) * letters > automata::max_table_entries) return text;
    // Pass 3: every state number and where it stands, then the text with ranks in their place.
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    std::vector<std::uint64_t> values;
    att_for_each_field(text, state_fields, [&](std::size_t index, std::size_t first, std::size_t length) {
        std::uint64_t value = 0;
        if (index < states_in_line && state_value(first, length, value)) {
            spans.emplace_back(first, length);
            values.push_back(value);
        }
    });
    std::vector<std::uint64_t> ranks = values;
    ranks.push_back(0);  // state 0 starts, numbered or not
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::string compact;
    compact.reserve(text.size());
    std::size_t copied = 0;
    for (std::size_t i = 0; i < spans.size(); ++i) {
        compact.append(text, copied, spans[i].first - copied);
        compact += std::to_string(std::lower_bound(ranks.begin(), ranks.end(), values[i]) - ranks.begin());
        copied = spans[i].first + spans[i].second;
    }
    compact.append(text, copied, std::string::npos);
    return compact;
}

}  // namespace statetrack::fuzz
