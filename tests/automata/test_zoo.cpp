// The zoo: every language against an independent definition written here, minimality by brute
// force, and the known sizes and classes of the transition monoids.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <regex>
#include <set>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/monoid.hpp"
#include "statetrack/automata/zoo.hpp"

namespace statetrack::automata {
namespace {

using Word = std::vector<Letter>;

// Every word of length 0..max_length, in length-lexicographic order.
std::vector<Word> all_words(std::size_t letters, std::size_t max_length) {
    std::vector<Word> words = {{}};
    for (std::size_t begin = 0, len = 0; len < max_length; ++len) {
        const std::size_t end = words.size();
        for (std::size_t i = begin; i < end; ++i)
            for (Letter a = 0; a < letters; ++a) {
                Word w = words[i];
                w.push_back(a);
                words.push_back(std::move(w));
            }
        begin = end;
    }
    return words;
}

std::string spell(const Dfa& dfa, const Word& w) {  // symbols concatenated (one-character alphabets)
    std::string s;
    for (Letter a : w) s += dfa.alphabet[a];
    return s;
}

// Checks the DFA against `member` on every word up to max_length; returns the first disagreement.
std::string disagreement(const Dfa& dfa, std::size_t max_length, const std::function<bool(const std::string&)>& member) {
    for (const Word& w : all_words(dfa.num_letters(), max_length)) {
        const std::string s = spell(dfa, w);
        if (accepts(dfa, w) != member(s)) return "'" + s + "'";
    }
    return {};
}

// Brute-force minimality: every state reachable, and every pair separated by the table-filling
// (Moore) fixpoint. Independent of the library's minimizer.
bool brute_force_minimal(const Dfa& dfa) {
    const std::size_t n = dfa.num_states(), k = dfa.num_letters();
    std::vector<bool> seen(n, false);
    std::vector<State> stack = {dfa.start};
    seen[dfa.start] = true;
    while (!stack.empty()) {
        const State q = stack.back();
        stack.pop_back();
        for (Letter a = 0; a < k; ++a)
            if (!seen[dfa.next(q, a)]) {
                seen[dfa.next(q, a)] = true;
                stack.push_back(dfa.next(q, a));
            }
    }
    if (std::find(seen.begin(), seen.end(), false) != seen.end()) return false;
    std::vector<char> distinct(n * n, 0);
    for (std::size_t p = 0; p < n; ++p)
        for (std::size_t q = 0; q < n; ++q) distinct[p * n + q] = dfa.accepting[p] != dfa.accepting[q];
    for (bool changed = true; changed;) {
        changed = false;
        for (std::size_t p = 0; p < n; ++p)
            for (std::size_t q = p + 1; q < n; ++q) {
                if (distinct[p * n + q]) continue;
                for (Letter a = 0; a < k; ++a)
                    if (distinct[dfa.next(State(p), a) * n + dfa.next(State(q), a)]) {
                        distinct[p * n + q] = distinct[q * n + p] = 1;
                        changed = true;
                        break;
                    }
            }
    }
    for (std::size_t p = 0; p < n; ++p)
        for (std::size_t q = p + 1; q < n; ++q)
            if (!distinct[p * n + q]) return false;
    return true;
}

TEST(Zoo, EveryExampleIsValidMinimalAndNamed) {
    for (const ZooEntry& e : zoo_entries()) {
        SCOPED_TRACE(e.example);
        EXPECT_FALSE(e.usage.empty());
        EXPECT_FALSE(e.description.empty());
        const Dfa dfa = zoo(e.example);
        EXPECT_NO_THROW(validate(dfa));
        EXPECT_EQ(dfa.start, 0u);
        ASSERT_EQ(dfa.state_names.size(), dfa.num_states());
        std::set<std::string> names(dfa.state_names.begin(), dfa.state_names.end());
        EXPECT_EQ(names.size(), dfa.num_states()) << "state names must be distinct";
        EXPECT_EQ(names.count(""), 0u);
        EXPECT_TRUE(brute_force_minimal(dfa));
    }
}

TEST(Zoo, MinimalityCheckFindsRedundantStates) {
    // parity with a copy of "odd": not minimal; and with an unreachable state: not minimal.
    Dfa dfa = zoo("parity");
    ASSERT_TRUE(brute_force_minimal(dfa));
    Dfa copy = make_dfa(3, dfa.alphabet);
    copy.accepting = {true, false, false};
    copy.delta = {0, 1, 2, 0, 1, 0};  // odd --0--> odd' --0--> odd: states 1 and 2 are equivalent
    EXPECT_FALSE(brute_force_minimal(copy));
    Dfa unreachable = make_dfa(3, dfa.alphabet);
    unreachable.accepting = {true, false, true};
    unreachable.delta = {0, 1, 1, 0, 2, 2};
    EXPECT_FALSE(brute_force_minimal(unreachable));
}

TEST(Zoo, MoreArgumentsAreMinimal) {
    for (const char* spec : {"mod:2", "mod:7", "modsum:2", "modsum:6", "cyclenav:2", "cyclenav:6", "sym:2", "sym:6",
                             "symreg:3", "altreg:4", "dihedral:3", "dihedral:8", "dyck:1:1", "dyck:1:4", "dyck:3:2",
                             "tomita:1", "tomita:2", "tomita:3", "tomita:4", "tomita:5", "tomita:6", "tomita:7",
                             "contains:a", "contains:aaa", "contains:abab", "contains:abcab", "contains:0110:01",
                             "gridworld:2", "gridworld:5", "gridworld:7:1", "modarith:2", "modarith:3", "modarith:4"}) {
        SCOPED_TRACE(spec);
        EXPECT_TRUE(brute_force_minimal(zoo(spec)));
    }
}

std::size_t factorial(std::size_t n) { return n <= 1 ? 1 : n * factorial(n - 1); }

TEST(Zoo, Sizes) {
    EXPECT_EQ(zoo("parity").num_states(), 2u);
    for (std::size_t k : {2, 3, 5, 11}) {
        EXPECT_EQ(zoo("mod:" + std::to_string(k)).num_states(), k);
        EXPECT_EQ(zoo("modsum:" + std::to_string(k)).num_states(), k);
        EXPECT_EQ(zoo("modsum:" + std::to_string(k)).num_letters(), k);
        EXPECT_EQ(zoo("cyclenav:" + std::to_string(k)).num_states(), k);
    }
    for (std::size_t n = 2; n <= 5; ++n) {
        const Dfa reg = zoo("symreg:" + std::to_string(n));
        EXPECT_EQ(reg.num_states(), factorial(n));
        EXPECT_EQ(reg.num_letters(), factorial(n));
        EXPECT_EQ(zoo("sym:" + std::to_string(n)).num_states(), n);
    }
    EXPECT_EQ(zoo("altreg:4").num_states(), 12u);
    EXPECT_EQ(zoo("altreg:5").num_states(), 60u);
    EXPECT_EQ(zoo("altreg:5").num_letters(), 60u);
    EXPECT_EQ(zoo("dihedral:7").num_states(), 7u);
    EXPECT_EQ(zoo("quaternion").num_states(), 8u);
    EXPECT_EQ(zoo("flipflop").num_states(), 2u);
    EXPECT_EQ(zoo("first").num_states(), 3u);
    EXPECT_EQ(zoo("last").num_states(), 2u);
    EXPECT_EQ(zoo("evenpairs").num_states(), 5u);
    EXPECT_EQ(zoo("dyck:1:3").num_states(), 1u + 1 + 1 + 1 + 1);  // depths 0..3 and the sink
    EXPECT_EQ(zoo("dyck:2:3").num_states(), 1u + 2 + 4 + 8 + 1);
    const std::vector<std::size_t> tomita_sizes = {2, 3, 5, 4, 4, 3, 5};
    for (std::size_t i = 1; i <= 7; ++i) EXPECT_EQ(zoo("tomita:" + std::to_string(i)).num_states(), tomita_sizes[i - 1]);
    EXPECT_EQ(zoo("contains:abb").num_states(), 4u);
    EXPECT_EQ(zoo("contains:abc").num_letters(), 3u);
    EXPECT_EQ(zoo("gridworld:4").num_states(), 16u);
    EXPECT_EQ(zoo("gridworld:9:1").num_states(), 9u);
    EXPECT_EQ(zoo("modarith:5").num_states(), 2u * 25 + 1);
    EXPECT_EQ(zoo("modarith:5").num_letters(), 5u + 3);
}

void expect_group(const std::string& spec, std::size_t order) {
    SCOPED_TRACE(spec);
    const auto s = summarize_monoid(zoo(spec));
    ASSERT_TRUE(s.size.has_value()) << s.message;
    EXPECT_EQ(*s.size, order);
    EXPECT_EQ(s.classification, MonoidClass::group);
    EXPECT_EQ(s.group_orders, std::vector<std::size_t>{order});
}

TEST(Zoo, GroupMonoids) {
    expect_group("parity", 2);
    for (std::size_t k : {2, 3, 4, 7}) {
        expect_group("mod:" + std::to_string(k), k);
        expect_group("modsum:" + std::to_string(k), k);
        expect_group("cyclenav:" + std::to_string(k), k);
    }
    for (std::size_t n = 2; n <= 5; ++n) {
        expect_group("sym:" + std::to_string(n), factorial(n));
        expect_group("symreg:" + std::to_string(n), factorial(n));
    }
    expect_group("sym:6", 720);
    expect_group("altreg:3", 3);
    expect_group("altreg:4", 12);
    expect_group("altreg:5", 60);
    for (std::size_t n = 3; n <= 9; ++n) expect_group("dihedral:" + std::to_string(n), 2 * n);
    expect_group("quaternion", 8);
    expect_group("tomita:5", 4);  // Z2 x Z2
    expect_group("tomita:6", 3);  // Z3
}

TEST(Zoo, AperiodicMonoids) {
    // Star-free languages (reasons in docs/zoo.md): their monoids contain no non-trivial group.
    for (const char* spec : {"first", "last", "evenpairs", "flipflop", "contains:abb", "contains:abab", "tomita:1",
                             "tomita:2", "tomita:4", "tomita:7", "dyck:1:3", "dyck:2:2", "gridworld:3", "gridworld:6:1"}) {
        SCOPED_TRACE(spec);
        const auto s = summarize_monoid(zoo(spec));
        ASSERT_TRUE(s.size.has_value());
        EXPECT_EQ(s.classification, MonoidClass::aperiodic) << "witness length " << s.witness.size();
        EXPECT_TRUE(s.group_orders.empty());
    }
    // Known sizes: first and last {1, a, b}; flip-flop {1, w0, w1}; evenpairs 1 + (first, last).
    EXPECT_EQ(summarize_monoid(zoo("first")).size, std::optional<std::size_t>(3));
    EXPECT_EQ(summarize_monoid(zoo("last")).size, std::optional<std::size_t>(3));
    EXPECT_EQ(summarize_monoid(zoo("flipflop")).size, std::optional<std::size_t>(3));
    EXPECT_EQ(summarize_monoid(zoo("evenpairs")).size, std::optional<std::size_t>(5));
    // (10)* and dyck:1:1 (which is ("(" ")")*) both have the syntactic monoid B2 with an
    // identity adjoined: 6 elements.
    EXPECT_EQ(summarize_monoid(zoo("tomita:2")).size, std::optional<std::size_t>(6));
    EXPECT_EQ(summarize_monoid(zoo("dyck:1:1")).size, std::optional<std::size_t>(6));
}

TEST(Zoo, MixedMonoids) {
    // tomita:3: "0" swaps "odd ones, odd zeros" and "odd ones, even zeros" but the dead state is a
    // sink, so the monoid has Z2 and is not a group.
    const auto t3 = summarize_monoid(zoo("tomita:3"));
    EXPECT_EQ(t3.classification, MonoidClass::mixed);
    EXPECT_EQ(t3.witness, (Word{0}));
    EXPECT_EQ(t3.witness_period, 2u);
    EXPECT_EQ(t3.group_orders, std::vector<std::size_t>{2});
    // modarith:5: "+1" cycles the value states with p = 1 through all 5 residues; "+" from a
    // pending state errs. So Z5 inside, not a group.
    const auto ma = summarize_monoid(zoo("modarith:5"));
    EXPECT_EQ(ma.classification, MonoidClass::mixed);
    EXPECT_NE(std::find(ma.group_orders.begin(), ma.group_orders.end(), 5u), ma.group_orders.end());
}

TEST(Zoo, TomitaAgainstRegularExpressions) {
    auto full = [](const char* re) {
        return [r = std::regex(re)](const std::string& s) { return std::regex_match(s, r); };
    };
    auto count = [](const std::string& s, char c) { return long(std::count(s.begin(), s.end(), c)); };
    const std::regex odd_ones_odd_zeros("(^|0)(11)*1(00)*0(1|$)");
    const std::vector<std::function<bool(const std::string&)>> tomita = {
        full("1*"),
        full("(10)*"),
        [&](const std::string& s) { return !std::regex_search(s, odd_ones_odd_zeros); },
        [](const std::string& s) { return s.find("000") == std::string::npos; },
        [&](const std::string& s) { return count(s, '0') % 2 == 0 && count(s, '1') % 2 == 0; },
        [&](const std::string& s) { return (count(s, '0') - count(s, '1')) % 3 == 0; },
        full("0*1*0*1*"),
    };
    for (std::size_t i = 1; i <= 7; ++i)
        EXPECT_EQ(disagreement(zoo("tomita:" + std::to_string(i)), 10, tomita[i - 1]), "") << "tomita:" << i;
    // The check finds a disagreement when there is one: tomita:3 is not tomita:4's language.
    EXPECT_NE(disagreement(zoo("tomita:3"), 10, tomita[3]), "");
}

TEST(Zoo, SmallLanguagesAgainstTheirDefinitions) {
    auto count = [](const std::string& s, char c) { return std::size_t(std::count(s.begin(), s.end(), c)); };
    EXPECT_EQ(disagreement(zoo("parity"), 10, [&](const std::string& s) { return count(s, '1') % 2 == 0; }), "");
    EXPECT_EQ(disagreement(zoo("mod:3"), 10, [&](const std::string& s) { return count(s, '1') % 3 == 0; }), "");
    EXPECT_EQ(disagreement(zoo("modsum:4"), 6, [](const std::string& s) {
                  std::size_t sum = 0;
                  for (char c : s) sum += std::size_t(c - '0');
                  return sum % 4 == 0;
              }),
              "");
    EXPECT_EQ(disagreement(zoo("first"), 8, [](const std::string& s) { return !s.empty() && s[0] == 'a'; }), "");
    EXPECT_EQ(disagreement(zoo("last"), 8, [](const std::string& s) { return !s.empty() && s.back() == 'a'; }), "");
    EXPECT_EQ(disagreement(zoo("evenpairs"), 10, [](const std::string& s) {
                  std::size_t pairs = 0;
                  for (std::size_t i = 0; i + 1 < s.size(); ++i) pairs += s[i] != s[i + 1];
                  return pairs % 2 == 0;
              }),
              "");
    for (const std::string word : {"abb", "aab", "abab", "a", "bbb"}) {
        EXPECT_EQ(disagreement(zoo("contains:" + word), 9,
                               [&](const std::string& s) { return s.find(word) != std::string::npos; }),
                  "")
            << word;
    }
    EXPECT_EQ(disagreement(zoo("contains:cab"), 6, [](const std::string& s) { return s.find("cab") != std::string::npos; }), "");
    EXPECT_EQ(disagreement(zoo("contains:11:01"), 8, [](const std::string& s) { return s.find("11") != std::string::npos; }), "");
    EXPECT_EQ(zoo("contains:11:01").alphabet, (std::vector<std::string>{"0", "1"}));
}

TEST(Zoo, WalksAgainstSimulation) {
    std::mt19937_64 rng(11);
    const Dfa cycle = zoo("cyclenav:5");  // letters -1, 0, +1
    const Dfa grid = zoo("gridworld:4");  // U D L R on a 4x4 grid
    const Dfa line = zoo("gridworld:6:1");
    const Dfa flip = zoo("flipflop");  // w0 w1 i r
    for (int trial = 0; trial < 300; ++trial) {
        Word w(rng() % 30);
        long position = 0;
        for (auto& a : w) {
            a = Letter(rng() % 3);
            position += long(a) - 1;
        }
        EXPECT_EQ(cycle.state_names[run(cycle, w)], std::to_string(((position % 5) + 5) % 5));
        EXPECT_EQ(accepts(cycle, w), ((position % 5) + 5) % 5 == 0);

        long x = 0, y = 0, z = 0;
        int memory = 0;
        for (auto& a : w) {
            a = Letter(rng() % 4);
            if (a == 0) y = std::min(y + 1, 3L);
            if (a == 1) y = std::max(y - 1, 0L);
            if (a == 2) x = std::max(x - 1, 0L);
            if (a == 3) x = std::min(x + 1, 3L);
        }
        EXPECT_EQ(grid.state_names[run(grid, w)], std::to_string(x) + "," + std::to_string(y));
        EXPECT_EQ(accepts(grid, w), x == 3 && y == 3);
        for (auto& a : w) {
            a = Letter(rng() % 2);
            z = a == 0 ? std::max(z - 1, 0L) : std::min(z + 1, 5L);
        }
        EXPECT_EQ(accepts(line, w), z == 5);
        for (auto& a : w) {
            a = Letter(rng() % 4);
            if (a < 2) memory = int(a);
        }
        EXPECT_EQ(accepts(flip, w), memory == 1);
    }
}

TEST(Zoo, DyckAgainstAStack) {
    for (const auto& [k, depth] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 3}, {2, 2}, {3, 3}}) {
        const Dfa dfa = zoo("dyck:" + std::to_string(k) + ":" + std::to_string(depth));
        const std::size_t max_length = k == 3 ? 6 : 9;
        EXPECT_EQ(disagreement(dfa, max_length,
                               [&, depth = depth](const std::string& s) {
                                   std::string stack;
                                   const std::string open = "([{<", close = ")]}>";
                                   for (char c : s) {
                                       if (open.find(c) != std::string::npos) {
                                           stack += c;
                                           if (stack.size() > depth) return false;
                                       } else if (stack.empty() || open.find(stack.back()) != close.find(c)) {
                                           return false;
                                       } else {
                                           stack.pop_back();
                                       }
                                   }
                                   return stack.empty();
                               }),
                  "");
    }
}

using Permutation = std::vector<int>;
Permutation parse_permutation(const std::string& name) {
    Permutation p;
    for (char c : name) p.push_back(c - '0');
    return p;
}

TEST(Zoo, WordProblemsAgainstPermutationProducts) {
    std::mt19937_64 rng(5);
    for (const char* spec : {"symreg:3", "symreg:4", "symreg:5", "altreg:4", "altreg:5"}) {
        SCOPED_TRACE(spec);
        const Dfa dfa = zoo(spec);
        const std::size_t n = dfa.alphabet[0].size();
        for (int trial = 0; trial < 200; ++trial) {
            Word w(rng() % 12);
            Permutation product(n);
            std::iota(product.begin(), product.end(), 0);
            for (auto& a : w) {
                a = Letter(rng() % dfa.num_letters());
                const Permutation h = parse_permutation(dfa.alphabet[a]);
                for (auto& v : product) v = h[std::size_t(v)];  // first the product so far, then h
            }
            std::string name;
            for (int v : product) name += char('0' + v);
            EXPECT_EQ(dfa.state_names[run(dfa, w)], name);
            EXPECT_EQ(accepts(dfa, w), std::is_sorted(product.begin(), product.end()));
        }
    }
    // The letters of altreg are exactly the even permutations.
    for (const std::string& letter : zoo("altreg:5").alphabet) {
        const Permutation p = parse_permutation(letter);
        int inversions = 0;
        for (std::size_t i = 0; i < p.size(); ++i)
            for (std::size_t j = i + 1; j < p.size(); ++j) inversions += p[i] > p[j];
        EXPECT_EQ(inversions % 2, 0) << letter;
    }
}

TEST(Zoo, QuaternionMultiplication) {
    // i^2 = j^2 = k^2 = ijk = -1, by the letters' names.
    const Dfa q = zoo("quaternion");
    auto state_after = [&](std::initializer_list<const char*> letters) {
        Word w;
        for (const char* l : letters) w.push_back(letter_index(q, l));
        return q.state_names[run(q, w)];
    };
    EXPECT_EQ(state_after({"i", "i"}), "-1");
    EXPECT_EQ(state_after({"j", "j"}), "-1");
    EXPECT_EQ(state_after({"k", "k"}), "-1");
    EXPECT_EQ(state_after({"i", "j", "k"}), "-1");
    EXPECT_EQ(state_after({"i", "j"}), "k");
    EXPECT_EQ(state_after({"j", "i"}), "-k");
    EXPECT_EQ(state_after({"-j", "k"}), "-i");
    EXPECT_EQ(state_after({"i", "i", "i", "i"}), "1");
}

// Deletang et al.: digits and + - * with the usual precedence, value mod m; nullopt if malformed.
std::optional<long> evaluate(const std::vector<std::string>& tokens, long m) {
    if (tokens.size() % 2 == 0) return std::nullopt;
    for (std::size_t i = 0; i < tokens.size(); ++i)
        if ((std::isdigit(static_cast<unsigned char>(tokens[i][0])) != 0) != (i % 2 == 0)) return std::nullopt;
    long sum = 0, term = std::stol(tokens[0]);
    for (std::size_t i = 1; i < tokens.size(); i += 2) {
        const long d = std::stol(tokens[i + 1]);
        if (tokens[i] == "*") {
            term = term * d % m;
        } else {
            sum = (sum + term) % m;
            term = tokens[i] == "+" ? d : (m - d) % m;
        }
    }
    return (sum + term) % m;
}

TEST(Zoo, ModularArithmeticAgainstAnEvaluator) {
    std::mt19937_64 rng(3);
    for (long m : {2L, 3L, 5L, 7L}) {
        const Dfa dfa = zoo("modarith:" + std::to_string(m));
        for (int trial = 0; trial < 400; ++trial) {
            std::vector<std::string> tokens;
            const std::size_t length = 1 + rng() % 21;
            const bool well_formed = trial % 4 != 0;
            for (std::size_t i = 0; i < length; ++i) {
                const bool digit = well_formed ? i % 2 == 0 : rng() % 2 == 0;
                tokens.push_back(digit ? std::to_string(rng() % std::uint64_t(m)) : std::string(1, "+-*"[rng() % 3]));
            }
            Word w;
            for (const auto& t : tokens) w.push_back(letter_index(dfa, t));
            const auto value = evaluate(tokens, m);
            const std::string& state = dfa.state_names[run(dfa, w)];
            EXPECT_EQ(accepts(dfa, w), value == 0L) << format_word(dfa, w);
            if (value) EXPECT_EQ(state.substr(0, state.find(':')), std::string(1, 'v').append(std::to_string(*value)));
            else EXPECT_TRUE(state == "error" || state.rfind("pending", 0) == 0) << format_word(dfa, w);
        }
    }
    // Precedence, as in Deletang et al.'s examples (mod 5): 1+2*3 = 2, 1-1-1 = 4, 0*1+4*3-2 = 0.
    const Dfa five = zoo("modarith:5");
    auto value_name = [&](const std::string& text) { return five.state_names[run(five, parse_word(five, text))]; };
    EXPECT_EQ(value_name("1 + 2 * 3").substr(0, 2), "v2");
    EXPECT_EQ(value_name("1 - 1 - 1").substr(0, 2), "v4");
    EXPECT_TRUE(accepts(five, parse_word(five, "0 * 1 + 4 * 3 - 2")));
    EXPECT_FALSE(accepts(five, parse_word(five, "")));
    EXPECT_FALSE(accepts(five, parse_word(five, "0 +")));
    EXPECT_FALSE(accepts(five, parse_word(five, "0 0")));
}

TEST(Zoo, BadSpecsAreInputErrors) {
    for (const char* spec : {"", "nosuch", "parity:1", "mod", "mod:1", "mod:1001", "mod:x", "mod:3:4", "mod:-3",
                             "mod:", "mod:3x", "modsum:65", "cyclenav:1", "sym:1", "sym:65", "symreg:6", "symreg:1",
                             "altreg:2", "altreg:6", "dihedral:2", "dihedral:257", "quaternion:2", "dyck:0:2", "dyck:5:2",
                             "dyck:2:0", "dyck:2", "dyck:4:16", "tomita:0", "tomita:8", "contains", "contains:",
                             "contains:ab:", "contains:a b", "gridworld:1", "gridworld:101", "gridworld:5:3",
                             "modarith:1", "modarith:33", "first:a", "evenpairs:2"}) {
        SCOPED_TRACE(spec);
        try {
            zoo(spec);
            ADD_FAILURE() << "no error for zoo:" << spec;
        } catch (const InputError& e) {
            EXPECT_EQ(e.file(), std::string("zoo:") + spec);
            EXPECT_FALSE(e.message().empty());
        }
    }
}

TEST(Zoo, EntriesAreUniqueAndDocumented) {
    std::set<std::string> names;
    for (const ZooEntry& e : zoo_entries()) {
        EXPECT_TRUE(names.insert(e.name).second) << e.name;
        EXPECT_EQ(e.usage.rfind(e.name, 0), 0u) << e.usage;
    }
    for (const char* required : {"parity", "mod", "modsum", "cyclenav", "sym", "symreg", "altreg", "dihedral", "quaternion",
                                 "flipflop", "first", "last", "evenpairs", "dyck", "tomita", "contains", "gridworld", "modarith"})
        EXPECT_EQ(names.count(required), 1u) << required;
}

}  // namespace
}  // namespace statetrack::automata
