#include "statetrack/automata/zoo.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <functional>
#include <map>
#include <numeric>

#include "statetrack/automata/error.hpp"

// Every builder returns a minimal complete DFA with meaningful state names; docs/zoo.md gives the
// definitions, alphabets, sizes and monoids, and tests/automata/test_zoo.cpp checks them.
namespace statetrack::automata {

namespace {

using Args = std::vector<std::string>;

struct Spec {
    std::string origin;  // "zoo:" + the whole spec, for error messages
    std::string name;
    Args args;
};

[[noreturn]] void fail(const Spec& spec, const std::string& place, const std::string& message) {
    throw InputError(spec.origin, place, message);
}

void expect_args(const Spec& spec, std::size_t least, std::size_t most, const std::string& usage) {
    if (spec.args.size() < least || spec.args.size() > most)
        fail(spec, "arguments", fmt::format("'{}' takes {} argument{}: usage zoo:{}", spec.name,
                                            least == most ? std::to_string(least) : fmt::format("{} to {}", least, most),
                                            most == 1 ? "" : "s", usage));
}

std::size_t int_arg(const Spec& spec, std::size_t i, std::size_t lo, std::size_t hi) {
    const std::string& text = spec.args[i];
    std::size_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    const std::string place = fmt::format("argument {}", i + 1);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        fail(spec, place, fmt::format("'{}' is not a non-negative integer", text));
    if (value < lo || value > hi) fail(spec, place, fmt::format("{} is out of range {}..{}", value, lo, hi));
    return value;
}

std::vector<std::string> numbered(std::size_t count, const std::string& prefix = {}) {
    std::vector<std::string> names(count);
    for (std::size_t i = 0; i < count; ++i) names[i] = prefix + std::to_string(i);
    return names;
}

// A DFA on states 0..n-1 from a function target(q, a); start 0 unless moved later.
Dfa table_dfa(std::string name, std::vector<std::string> alphabet, std::vector<std::string> state_names,
              const std::function<State(State, Letter)>& target, const std::function<bool(State)>& accept) {
    Dfa dfa = make_dfa(state_names.size(), std::move(alphabet), std::move(name));
    dfa.state_names = std::move(state_names);
    for (State q = 0; q < dfa.num_states(); ++q) {
        dfa.accepting[q] = accept(q);
        for (Letter a = 0; a < dfa.num_letters(); ++a) dfa.next(q, a) = target(q, a);
    }
    return dfa;
}

// Counting modulo k: letter a adds step[a]; accept a count of 0. Start 0.
Dfa counter_dfa(std::string name, std::vector<std::string> alphabet, const std::vector<std::size_t>& step, std::size_t k) {
    return table_dfa(std::move(name), std::move(alphabet), numbered(k),
                     [&](State q, Letter a) { return State((q + step[a]) % k); }, [](State q) { return q == 0; });
}

// ---- groups -----------------------------------------------------------------------------------

// A permutation in one-line notation: p[i] is the image of point i.
using Perm = std::vector<std::uint8_t>;

std::string perm_name(const Perm& p) {
    std::string s;
    for (auto v : p) s += char('0' + v);
    return s;
}

bool is_even(const Perm& p) {
    std::size_t inversions = 0;
    for (std::size_t i = 0; i < p.size(); ++i)
        for (std::size_t j = i + 1; j < p.size(); ++j) inversions += p[i] > p[j];
    return inversions % 2 == 0;
}

// The word problem of a permutation group: states and letters are its elements (lexicographic
// order, so the identity is state 0 and the start); reading h in state g goes to "g then h"
// (i -> h(g(i))); accept the identity.
Dfa regular_representation(std::string name, std::size_t n, bool even_only) {
    std::vector<Perm> elements;
    Perm p(n);
    std::iota(p.begin(), p.end(), 0);
    do {
        if (!even_only || is_even(p)) elements.push_back(p);
    } while (std::next_permutation(p.begin(), p.end()));
    std::map<std::string, State> index;  // keyed by the one-line name
    std::vector<std::string> names;
    for (const Perm& e : elements) {
        index.emplace(perm_name(e), State(index.size()));
        names.push_back(perm_name(e));
    }
    return table_dfa(
        std::move(name), names, names,
        [&](State g, Letter h) {
            Perm gh(n);
            for (std::size_t i = 0; i < n; ++i) gh[i] = elements[h][elements[g][i]];
            return index.at(perm_name(gh));
        },
        [](State q) { return q == 0; });
}

// symreg:N (N = smallest..5) or altreg:N (even_only).
Dfa word_problem(const Spec& spec, std::size_t smallest, bool even_only) {
    expect_args(spec, 1, 1, spec.name + ":N");
    const std::size_t n = int_arg(spec, 0, smallest, 5);
    return regular_representation(fmt::format("{}:{}", spec.name, n), n, even_only);
}

// A group acting on points 0..n-1 by the given generators; start and accept point 0.
Dfa permutation_action(std::string name, std::vector<std::string> letters, const std::vector<Perm>& generators) {
    const std::size_t n = generators.front().size();
    return table_dfa(std::move(name), std::move(letters), numbered(n),
                     [&](State q, Letter a) { return State(generators[a][q]); }, [](State q) { return q == 0; });
}

Dfa sym(const Spec& spec) {
    expect_args(spec, 1, 1, "sym:N");
    const std::size_t n = int_arg(spec, 0, 2, 64);
    Perm transposition(n), cycle(n);
    for (std::size_t i = 0; i < n; ++i) {
        transposition[i] = std::uint8_t(i);
        cycle[i] = std::uint8_t((i + 1) % n);
    }
    std::swap(transposition[0], transposition[1]);
    return permutation_action(fmt::format("sym:{}", n), {"t", "c"}, {transposition, cycle});
}

Dfa dihedral(const Spec& spec) {
    expect_args(spec, 1, 1, "dihedral:N");
    const std::size_t n = int_arg(spec, 0, 3, 256);
    Perm rotation(n), reflection(n);
    for (std::size_t i = 0; i < n; ++i) {
        rotation[i] = std::uint8_t((i + 1) % n);
        reflection[i] = std::uint8_t((n - i) % n);
    }
    // Points up to 256 need indices up to 255: std::uint8_t is enough.
    return permutation_action(fmt::format("dihedral:{}", n), {"r", "s"}, {rotation, reflection});
}

// Q8 = {+-1, +-i, +-j, +-k}: element 2u + s is (-1)^s times unit u (1, i, j, k).
Dfa quaternion(const Spec& spec) {
    expect_args(spec, 0, 0, "quaternion");
    // unit_product[u][v] = (sign, unit) of u*v for units 1, i, j, k.
    static constexpr std::array<std::array<std::pair<int, int>, 4>, 4> unit_product{{
        {{{0, 0}, {0, 1}, {0, 2}, {0, 3}}},  // 1*1=1, 1*i=i, 1*j=j, 1*k=k
        {{{0, 1}, {1, 0}, {0, 3}, {1, 2}}},  // i*1=i, i*i=-1, i*j=k, i*k=-j
        {{{0, 2}, {1, 3}, {1, 0}, {0, 1}}},  // j*1=j, j*i=-k, j*j=-1, j*k=i
        {{{0, 3}, {0, 2}, {1, 1}, {1, 0}}},  // k*1=k, k*i=j, k*j=-i, k*k=-1
    }};
    const std::vector<std::string> names = {"1", "-1", "i", "-i", "j", "-j", "k", "-k"};
    return table_dfa(
        "quaternion", names, names,
        [](State g, Letter h) {
            const auto [sign, unit] = unit_product[g / 2][h / 2];
            return State(2 * unit + ((int(g % 2) + int(h % 2) + sign) % 2));
        },
        [](State q) { return q == 0; });
}

// ---- counters -----------------------------------------------------------------------------------

Dfa parity(const Spec& spec) {
    expect_args(spec, 0, 0, "parity");
    Dfa dfa = counter_dfa("parity", {"0", "1"}, {0, 1}, 2);
    dfa.state_names = {"even", "odd"};
    return dfa;
}

Dfa mod(const Spec& spec) {
    expect_args(spec, 1, 1, "mod:K");
    const std::size_t k = int_arg(spec, 0, 2, 1000);
    return counter_dfa(fmt::format("mod:{}", k), {"0", "1"}, {0, 1}, k);
}

Dfa modsum(const Spec& spec) {
    expect_args(spec, 1, 1, "modsum:M");
    const std::size_t m = int_arg(spec, 0, 2, 64);
    std::vector<std::size_t> step(m);
    std::iota(step.begin(), step.end(), 0);
    return counter_dfa(fmt::format("modsum:{}", m), numbered(m), step, m);
}

Dfa cyclenav(const Spec& spec) {
    expect_args(spec, 1, 1, "cyclenav:K");
    const std::size_t k = int_arg(spec, 0, 2, 1000);
    return counter_dfa(fmt::format("cyclenav:{}", k), {"-1", "0", "+1"}, {k - 1, 0, 1}, k);
}

// ---- aperiodic and mixed classics --------------------------------------------------------------

Dfa flipflop(const Spec& spec) {
    expect_args(spec, 0, 0, "flipflop");
    // States: the memory bit. w0/w1 write it, i and r leave it (r is where a reader looks).
    return table_dfa(
        "flipflop", {"w0", "w1", "i", "r"}, {"mem0", "mem1"},
        [](State q, Letter a) { return a == 0 ? State(0) : a == 1 ? State(1) : q; }, [](State q) { return q == 1; });
}

Dfa first(const Spec& spec) {
    expect_args(spec, 0, 0, "first");
    return table_dfa(
        "first", {"a", "b"}, {"start", "first_a", "first_b"},
        [](State q, Letter a) { return q == 0 ? State(1 + a) : q; }, [](State q) { return q == 1; });
}

Dfa last(const Spec& spec) {
    expect_args(spec, 0, 0, "last");
    return table_dfa(
        "last", {"a", "b"}, {"last_not_a", "last_a"}, [](State, Letter a) { return State(a == 0 ? 1 : 0); },
        [](State q) { return q == 1; });
}

Dfa evenpairs(const Spec& spec) {
    expect_args(spec, 0, 0, "evenpairs");
    // State 1 + 2*first + last for a non-empty prefix; accept when first == last (or empty).
    return table_dfa(
        "evenpairs", {"a", "b"}, {"empty", "first_a_last_a", "first_a_last_b", "first_b_last_a", "first_b_last_b"},
        [](State q, Letter a) { return State(q == 0 ? 1 + 3 * a : 1 + 2 * ((q - 1) / 2) + a); },
        [](State q) { return q == 0 || q == 1 || q == 4; });
}

Dfa dyck(const Spec& spec) {
    expect_args(spec, 2, 2, "dyck:K:DEPTH");
    const std::size_t k = int_arg(spec, 0, 1, 4);
    const std::size_t depth = int_arg(spec, 1, 1, 16);
    std::size_t states = 1, layer = 1;
    for (std::size_t d = 1; d <= depth; ++d) {
        layer *= k;
        states += layer;
        if (states > 100000) fail(spec, "arguments", fmt::format("dyck:{}:{} has more than 100000 states", k, depth));
    }
    static constexpr char open[] = "([{<", close[] = ")]}>";
    std::vector<std::string> alphabet;
    for (std::size_t b = 0; b < k; ++b) {
        alphabet.emplace_back(1, open[b]);
        alphabet.emplace_back(1, close[b]);
    }
    // States: every stack of open brackets (a string of open[]) up to the depth, then the sink.
    std::vector<std::string> stacks = {""};
    std::map<std::string, State> index = {{"", 0}};
    for (std::size_t i = 0; i < stacks.size(); ++i) {
        if (stacks[i].size() == depth) continue;
        for (std::size_t b = 0; b < k; ++b) {
            index.emplace(stacks[i] + open[b], State(stacks.size()));
            stacks.push_back(stacks[i] + open[b]);
        }
    }
    const State sink = State(stacks.size());
    std::vector<std::string> names = stacks;
    names[0] = "empty";
    names.push_back("sink");
    return table_dfa(
        fmt::format("dyck:{}:{}", k, depth), alphabet, names,
        [&](State q, Letter a) {
            if (q == sink) return sink;
            const std::string& s = stacks[q];
            const std::size_t b = a / 2;
            if (a % 2 == 0) return s.size() == depth ? sink : index.at(s + open[b]);
            if (s.empty() || s.back() != open[b]) return sink;
            return index.at(s.substr(0, s.size() - 1));
        },
        [](State q) { return q == 0; });
}

Dfa tomita(const Spec& spec) {
    expect_args(spec, 1, 1, "tomita:N");
    const std::size_t n = int_arg(spec, 0, 1, 7);
    struct Table {
        std::vector<std::string> states;
        std::vector<std::array<State, 2>> next;  // on 0, on 1
        std::vector<State> accepting;
    };
    // Minimal complete DFAs over {0, 1}, start state 0; docs/zoo.md gives each definition.
    static const std::array<Table, 7> tables{{
        {{"ones", "dead"}, {{1, 0}, {1, 1}}, {0}},                                         // 1*
        {{"expect1", "expect0", "dead"}, {{2, 1}, {0, 2}, {2, 2}}, {0}},                   // (10)*
        {{"clean", "odd_ones", "odd_ones_odd_zeros", "odd_ones_even_zeros", "dead"},       // no 1^odd 0^odd
         {{0, 1}, {2, 0}, {3, 4}, {2, 1}, {4, 4}},
         {0, 1, 3}},
        {{"zeros0", "zeros1", "zeros2", "dead"}, {{1, 0}, {2, 0}, {3, 0}, {3, 3}}, {0, 1, 2}},  // no 000
        {{"even_even", "odd0_even1", "even0_odd1", "odd_odd"}, {{1, 2}, {0, 3}, {3, 0}, {2, 1}}, {0}},
        {{"diff0", "diff1", "diff2"}, {{1, 2}, {2, 0}, {0, 1}}, {0}},  // (#0 - #1) mod 3
        {{"zeros", "ones", "zeros2", "ones2", "dead"},                // 0*1*0*1*
         {{0, 1}, {2, 1}, {2, 3}, {4, 3}, {4, 4}},
         {0, 1, 2, 3}},
    }};
    const Table& t = tables[n - 1];
    return table_dfa(
        fmt::format("tomita:{}", n), {"0", "1"}, t.states, [&](State q, Letter a) { return t.next[q][a]; },
        [&](State q) { return std::find(t.accepting.begin(), t.accepting.end(), q) != t.accepting.end(); });
}

Dfa contains(const Spec& spec) {
    expect_args(spec, 1, 2, "contains:WORD[:LETTERS]");
    const std::string& word = spec.args[0];
    const std::string extra = spec.args.size() == 2 ? spec.args[1] : "ab";
    if (word.empty() || word.size() > 1000) fail(spec, "argument 1", "the word must have 1 to 1000 letters");
    if (extra.empty()) fail(spec, "argument 2", "the letters must not be empty");
    std::string letters;  // one character per letter: first the extra letters, then new ones from the word
    for (char c : extra + word)
        if (letters.find(c) == std::string::npos) letters += c;
    for (char c : letters)
        if (c == ':' || c == ' ' || static_cast<unsigned char>(c) < 33 || static_cast<unsigned char>(c) > 126)
            fail(spec, "arguments", fmt::format("letter '{}' is not a printable character", c));
    std::vector<std::string> alphabet;
    for (char c : letters) alphabet.emplace_back(1, c);
    // KMP: state i = the longest prefix of the word that is a suffix of the input (i < |word|);
    // state |word| = found (absorbing). failure[i] = the longest proper border of word[0..i).
    const std::size_t m = word.size();
    std::vector<std::size_t> failure(m + 1, 0);
    for (std::size_t i = 2; i <= m; ++i) {
        std::size_t b = failure[i - 1];
        while (b > 0 && word[b] != word[i - 1]) b = failure[b];
        failure[i] = word[b] == word[i - 1] ? b + 1 : 0;
    }
    std::vector<std::string> names(m + 1);
    for (std::size_t i = 0; i < m; ++i) names[i] = i == 0 ? "none" : "seen_" + word.substr(0, i);
    names[m] = "found";
    return table_dfa(
        fmt::format("contains:{}", word), alphabet, names,
        [&](State q, Letter a) {
            if (q == m) return State(m);
            std::size_t i = q;
            while (i > 0 && word[i] != letters[a]) i = failure[i];
            return State(word[i] == letters[a] ? i + 1 : 0);
        },
        [&](State q) { return q == m; });
}

Dfa gridworld(const Spec& spec) {
    expect_args(spec, 1, 2, "gridworld:N[:DIMS]");
    const std::size_t dims = spec.args.size() == 2 ? int_arg(spec, 1, 1, 2) : 2;
    const std::size_t n = int_arg(spec, 0, 2, dims == 1 ? 10000 : 100);
    const std::string name = fmt::format("gridworld:{}:{}", n, dims);
    auto clamp_step = [n](std::size_t x, int d) {
        return d < 0 ? (x == 0 ? 0 : x - 1) : std::min(x + std::size_t(d), n - 1);
    };
    if (dims == 1)
        return table_dfa(
            name, {"L", "R"}, numbered(n), [&](State q, Letter a) { return State(clamp_step(q, a == 0 ? -1 : 1)); },
            [&](State q) { return q == n - 1; });
    // 2-D: state x + n*y; start (0,0), goal (n-1,n-1); U/D change y, L/R change x.
    std::vector<std::string> names(n * n);
    for (std::size_t y = 0; y < n; ++y)
        for (std::size_t x = 0; x < n; ++x) names[x + n * y] = fmt::format("{},{}", x, y);
    return table_dfa(
        name, {"U", "D", "L", "R"}, names,
        [&](State q, Letter a) {
            std::size_t x = q % n, y = q / n;
            if (a == 0) y = clamp_step(y, 1);
            if (a == 1) y = clamp_step(y, -1);
            if (a == 2) x = clamp_step(x, -1);
            if (a == 3) x = clamp_step(x, 1);
            return State(x + n * y);
        },
        [&](State q) { return q == n * n - 1; });
}

// Deletang et al. (2023), "Modular Arithmetic" without brackets: digit (op digit)*, the usual
// precedence (* before + and -; a - b*c = a + (-b)*c), value mod m. The value is s + p with s the
// sum of finished terms and p the signed product of the current term. States: value (s, p) after
// a digit; pending (s, p) after an operator, waiting for a digit d to make the value (s, p*d)
// ("+" makes pending (s+p, 1), "-" pending (s+p, -1), "*" pending (s, p)); the start is pending
// (0, 1); a malformed word goes to the error sink. Accept a value state with s + p = 0.
// All 2m^2 + 1 states are distinguishable (docs/zoo.md).
Dfa modarith(const Spec& spec) {
    expect_args(spec, 1, 1, "modarith:M");
    const std::size_t m = int_arg(spec, 0, 2, 32);
    std::vector<std::string> alphabet = numbered(m);
    alphabet.insert(alphabet.end(), {"+", "-", "*"});
    const std::size_t pairs = m * m;
    const State start = State(pairs + m * 1 + 0), error = State(2 * pairs);  // start: pending s=0, p=1
    std::vector<std::string> names(2 * pairs + 1);
    for (std::size_t s = 0; s < m; ++s)
        for (std::size_t p = 0; p < m; ++p) {
            names[s + m * p] = fmt::format("v{}:s{}:p{}", (s + p) % m, s, p);
            names[pairs + s + m * p] = fmt::format("pending:s{}:p{}", s, p);
        }
    names[error] = "error";
    Dfa dfa = table_dfa(
        fmt::format("modarith:{}", m), alphabet, names,
        [&](State q, Letter a) {
            if (q == error) return error;
            const bool pending = q >= pairs;
            const std::size_t s = (q % pairs) % m, p = (q % pairs) / m;
            if (a < m) return pending ? State(s + m * (p * a % m)) : error;
            if (pending) return error;
            if (a == m) return State(pairs + (s + p) % m + m * 1);            // +
            if (a == m + 1) return State(pairs + (s + p) % m + m * (m - 1));  // -
            return State(pairs + s + m * p);                                  // *
        },
        [&](State q) { return q < pairs && (q % m + q / m) % m == 0; });
    // Number the start first, as every zoo DFA does: swap states 0 and `start`.
    std::vector<State> perm(dfa.num_states());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[0], perm[start]);
    Dfa renumbered = dfa;
    for (State q = 0; q < dfa.num_states(); ++q) {
        renumbered.accepting[perm[q]] = dfa.accepting[q];
        renumbered.state_names[perm[q]] = dfa.state_names[q];
        for (Letter a = 0; a < dfa.num_letters(); ++a) renumbered.next(perm[q], a) = perm[dfa.next(q, a)];
    }
    renumbered.start = 0;
    return renumbered;
}

struct Builder {
    ZooEntry entry;
    Dfa (*build)(const Spec&);
};

const std::vector<Builder>& builders() {
    static const std::vector<Builder> list = {
        {{"parity", "parity", "parity", "even number of 1s over {0,1} (Z2)"}, parity},
        {{"mod", "mod:K", "mod:3", "number of 1s = 0 mod K over {0,1}, K = 2..1000 (Z_K)"}, mod},
        {{"modsum", "modsum:M", "modsum:5", "sum of the digits 0..M-1 = 0 mod M, M = 2..64 (Z_M)"}, modsum},
        {{"cyclenav", "cyclenav:K", "cyclenav:5", "walk on a K-cycle with -1/0/+1 moves, back at 0; K = 2..1000 (Z_K)"}, cyclenav},
        {{"sym", "sym:N", "sym:5", "S_N on N points, letters t = (0 1) and c = (0 1 ... N-1), return to 0; N = 2..64"}, sym},
        {{"symreg", "symreg:N", "symreg:5", "S_N word problem: N! states and letters (all elements), accept the identity; N = 2..5"},
         [](const Spec& s) { return word_problem(s, 2, false); }},
        {{"altreg", "altreg:N", "altreg:5", "A_N word problem: N!/2 states and letters (all elements), accept the identity; N = 3..5"},
         [](const Spec& s) { return word_problem(s, 3, true); }},
        {{"dihedral", "dihedral:N", "dihedral:4", "D_N (order 2N) on the N vertices, letters r (rotate) and s (reflect); N = 3..256"}, dihedral},
        {{"quaternion", "quaternion", "quaternion", "Q8 word problem: 8 states and letters +-1 +-i +-j +-k, accept 1"}, quaternion},
        {{"flipflop", "flipflop", "flipflop", "flip-flop memory: letters w0 w1 i r, accept when the memory (initially 0) holds 1"}, flipflop},
        {{"first", "first", "first", "the first letter is a, over {a,b}"}, first},
        {{"last", "last", "last", "the last letter is a, over {a,b}"}, last},
        {{"evenpairs", "evenpairs", "evenpairs", "even number of ab and ba factors over {a,b} (first letter = last letter)"}, evenpairs},
        {{"dyck", "dyck:K:DEPTH", "dyck:2:3", "balanced brackets of K = 1..4 types nested at most DEPTH = 1..16 deep, with sink"}, dyck},
        {{"tomita", "tomita:N", "tomita:3", "the Tomita languages 1..7 over {0,1}"}, tomita},
        {{"contains", "contains:WORD[:LETTERS]", "contains:abb", "words containing WORD as a factor; letters: LETTERS (default ab) plus WORD's"}, contains},
        {{"gridworld", "gridworld:N[:DIMS]", "gridworld:4", "agent on an N-grid (DIMS 1 or 2, default 2) with clamped moves, accept at the far corner"}, gridworld},
        {{"modarith", "modarith:M", "modarith:5", "Deletang et al. modular arithmetic without brackets mod M = 2..32: digit (op digit)*, value 0"}, modarith},
    };
    return list;
}

}  // namespace

const std::vector<ZooEntry>& zoo_entries() {
    static const std::vector<ZooEntry> entries = [] {
        std::vector<ZooEntry> out;
        for (const Builder& b : builders()) out.push_back(b.entry);
        return out;
    }();
    return entries;
}

Dfa zoo(const std::string& spec_text) {
    Spec spec;
    spec.origin = "zoo:" + spec_text;
    std::size_t begin = 0;
    for (;;) {
        const std::size_t end = spec_text.find(':', begin);
        const std::string part = spec_text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
        if (begin == 0) spec.name = part;
        else spec.args.push_back(part);
        if (end == std::string::npos) break;
        begin = end + 1;
    }
    for (const Builder& b : builders()) {
        if (b.entry.name != spec.name) continue;
        Dfa dfa = b.build(spec);
        validate(dfa, spec.origin);
        return dfa;
    }
    std::string known;
    for (const Builder& b : builders()) known += (known.empty() ? "" : ", ") + b.entry.name;
    throw InputError(spec.origin, "name", fmt::format("unknown zoo language '{}' (known: {})", spec.name, known));
}

}  // namespace statetrack::automata
