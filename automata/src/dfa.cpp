#include "statetrack/automata/dfa.hpp"

#include <fmt/format.h>

#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "statetrack/automata/error.hpp"

namespace statetrack::automata {

Dfa make_dfa(std::size_t num_states, std::vector<std::string> alphabet, std::string name) {
    Dfa dfa;
    dfa.name = std::move(name);
    dfa.alphabet = std::move(alphabet);
    dfa.accepting.assign(num_states, false);
    dfa.delta.resize(num_states * dfa.alphabet.size());
    for (std::size_t q = 0; q < num_states; ++q)
        for (std::size_t a = 0; a < dfa.alphabet.size(); ++a) dfa.delta[q * dfa.alphabet.size() + a] = State(q);
    return dfa;
}

void validate(const Dfa& dfa, const std::string& origin) {
    if (dfa.alphabet.empty()) throw InputError(origin, "/alphabet", "the alphabet is empty");
    std::unordered_set<std::string> seen;
    for (std::size_t a = 0; a < dfa.alphabet.size(); ++a) {
        if (dfa.alphabet[a].empty()) throw InputError(origin, fmt::format("/alphabet/{}", a), "empty symbol");
        if (!seen.insert(dfa.alphabet[a]).second)
            throw InputError(origin, fmt::format("/alphabet/{}", a), fmt::format("duplicate symbol '{}'", dfa.alphabet[a]));
    }
    const std::size_t n = dfa.num_states();
    if (n == 0) throw InputError(origin, "/states", "the automaton has no states");
    if (!dfa.state_names.empty() && dfa.state_names.size() != n)
        throw InputError(origin, "/states", fmt::format("{} state names for {} states", dfa.state_names.size(), n));
    if (dfa.start >= n) throw InputError(origin, "/start", fmt::format("start state {} out of range 0..{}", dfa.start, n - 1));
    if (dfa.delta.size() != n * dfa.num_letters())
        throw InputError(origin, "/transitions", fmt::format("table has {} entries, expected {} states x {} letters",
                                                             dfa.delta.size(), n, dfa.num_letters()));
    for (std::size_t i = 0; i < dfa.delta.size(); ++i)
        if (dfa.delta[i] >= n)
            throw InputError(origin, fmt::format("/transitions/{}/{}", i / dfa.num_letters(), i % dfa.num_letters()),
                             fmt::format("target {} out of range 0..{}", dfa.delta[i], n - 1));
}

State run(const Dfa& dfa, std::span<const Letter> word, State from) {
    State q = from;
    for (Letter a : word) q = dfa.next(q, a);
    return q;
}

Letter letter_index(const Dfa& dfa, const std::string& symbol) {
    for (std::size_t a = 0; a < dfa.alphabet.size(); ++a)
        if (dfa.alphabet[a] == symbol) return Letter(a);
    throw InputError("word", "", fmt::format("unknown symbol '{}'", symbol));
}

std::vector<Letter> parse_word(const Dfa& dfa, const std::string& text, const std::string& origin) {
    std::unordered_map<std::string, Letter> index;
    bool single_chars = true;
    for (std::size_t a = 0; a < dfa.alphabet.size(); ++a) {
        index.emplace(dfa.alphabet[a], Letter(a));
        single_chars = single_chars && dfa.alphabet[a].size() == 1;
    }
    std::vector<std::string> tokens;
    const bool has_space = text.find_first_of(" \t\n,") != std::string::npos;
    if (has_space) {
        std::string t = text;
        for (char& c : t)
            if (c == ',') c = ' ';
        std::istringstream in(t);
        for (std::string s; in >> s;) tokens.push_back(s);
    } else if (!text.empty()) {
        if (index.count(text) || !single_chars) tokens.push_back(text);
        else
            for (char c : text) tokens.emplace_back(1, c);
    }
    std::vector<Letter> word;
    word.reserve(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        auto it = index.find(tokens[i]);
        if (it == index.end())
            throw InputError(origin, fmt::format("position {}", i + 1),
                             fmt::format("unknown symbol '{}' (the alphabet is {})", tokens[i], fmt::join(dfa.alphabet, " ")));
        word.push_back(it->second);
    }
    return word;
}

std::string format_word(const Dfa& dfa, std::span<const Letter> word) {
    std::string out;
    for (std::size_t i = 0; i < word.size(); ++i) {
        if (i) out += ' ';
        out += dfa.alphabet[word[i]];
    }
    return out;
}

std::string state_label(const Dfa& dfa, State q) {
    if (q < dfa.state_names.size() && !dfa.state_names[q].empty()) return dfa.state_names[q];
    return std::to_string(q);
}

}  // namespace statetrack::automata
