#include "statetrack/lrnn/check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <random>
#include <unordered_map>

#include "statetrack/automata/error.hpp"
#include "statetrack/lrnn/flat_map.hpp"
#include "statetrack/lrnn/integer_eval.hpp"
#include "statetrack/lrnn/scalars.hpp"
#include "statetrack/lrnn/state_set.hpp"

namespace statetrack::lrnn {

using automata::Dfa;
using automata::Letter;
using automata::State;

void check_same_alphabet(const Network& network, const Dfa& dfa) {
    if (network.alphabet != dfa.alphabet)
        throw InputError(network.name.empty() ? "<model>" : network.name, "/alphabet",
                         fmt::format("the model's alphabet ({}) differs from the DFA's ({})", fmt::join(network.alphabet, " "),
                                     fmt::join(dfa.alphabet, " ")));
}

bool is_rational(const Network& net) {
    auto all = [](const std::vector<Number>& v) {
        for (const auto& x : v)
            if (!x.is_exact()) return false;
        return true;
    };
    for (const auto& layer : net.layers) {
        if (!all(layer.h0)) return false;
        for (const auto& t : layer.transitions) {
            if (!all(t.diagonal) || !all(t.bias)) return false;
            for (const auto& f : t.factors) {
                if (!f.beta.is_exact()) return false;
                for (const auto& e : f.v.entries)
                    if (!e.value.is_exact()) return false;
            }
        }
        for (const auto& a : layer.readout.anchors)
            if (!all(a)) return false;
    }
    return true;
}

template <class T>
std::string state_key(State q, const NetworkState<T>& s) {
    std::string key = std::to_string(q);
    for (std::size_t i = 0; i < s.hidden.size(); ++i) {
        key += '|';
        key += std::to_string(s.outputs[i]);
        for (const auto& x : s.hidden[i]) {
            key += ',';
            key += to_text(x);
        }
    }
    return key;
}
template std::string state_key<float>(State, const NetworkState<float>&);
template std::string state_key<double>(State, const NetworkState<double>&);
template std::string state_key<Half>(State, const NetworkState<Half>&);
template std::string state_key<BFloat16>(State, const NetworkState<BFloat16>&);
template std::string state_key<Rational>(State, const NetworkState<Rational>&);
template std::string state_key<MpfrFloat>(State, const NetworkState<MpfrFloat>&);
template std::string state_key<MpfiFloat>(State, const NetworkState<MpfiFloat>&);

std::vector<Letter> closure_letters(const Network& net, const Dfa& dfa) {
    std::vector<Letter> letters;
    for (Letter a = 0; a < dfa.num_letters(); ++a) {
        bool repeats = false;
        for (Letter b : letters) {
            if (net.token_class.empty() || net.token_class[a] != net.token_class[b]) continue;
            bool same = true;
            for (State q = 0; q < dfa.num_states() && same; ++q) same = dfa.next(q, a) == dfa.next(q, b);
            if (same) {
                repeats = true;
                break;
            }
        }
        if (!repeats) letters.push_back(a);
    }
    return letters;
}

namespace {

bool agrees(const Network& net, const Dfa& dfa, State q, std::uint32_t symbol, bool certain, bool check_states) {
    if (!certain) return false;
    if (net.accept[symbol] != bool(dfa.accepting[q])) return false;
    return !check_states || net.states[symbol] == std::int64_t(q);
}

std::vector<Letter> rebuild(const std::vector<std::pair<std::size_t, Letter>>& parent, std::size_t node) {
    std::vector<Letter> word;
    while (node != 0) {
        word.push_back(parent[node].second);
        node = parent[node].first;
    }
    return {word.rbegin(), word.rend()};
}

// The two ways of stepping a network that the checks share: the scalar-generic one (any
// precision) and the integer fast path (exact, for integer networks; see integer_eval.hpp).
template <class T>
struct ScalarStepper {
    using Hidden = NetworkState<T>;
    PreparedNetwork<T> prepared;
    explicit ScalarStepper(const Network& net) : prepared(prepare<T>(net)) {}
    Hidden initial() const { return initial_state(prepared); }
    // The output symbol, and whether the readout was certain.
    std::pair<std::uint32_t, bool> step(Hidden& s, Letter a) const { return {lrnn::step(prepared, s, a), s.certain}; }
};

// Thrown when an integer network's state leaves the guard range: the caller redoes the work in
// rationals (no construction of the toolkit gets there; hand-written models might).
struct IntegerOverflow {};

struct IntegerStepper {
    using Hidden = std::vector<std::int32_t>;
    IntegerNetwork network;
    Hidden initial() const { return network.initial; }
    std::pair<std::uint32_t, bool> step(Hidden& s, Letter a) const {
        const auto symbol = step_integer(network, s, a);
        if (!symbol) throw IntegerOverflow{};
        return {*symbol, true};
    }
};

template <class Stepper>
WordCheck all_words_as(const Stepper& stepper, const Network& net, const Dfa& dfa, std::size_t max_length, bool check_states) {
    WordCheck result;
    result.max_length = max_length;
    // Depth-first over words; stack[d] is the state after the first d letters.
    std::vector<typename Stepper::Hidden> stack{stepper.initial()};
    std::vector<State> dfa_states{dfa.start};
    std::vector<Letter> word;
    std::vector<Letter> next_letter{0};
    while (!next_letter.empty()) {
        const std::size_t depth = next_letter.size() - 1;
        if (depth >= max_length || next_letter.back() >= dfa.num_letters()) {
            next_letter.pop_back();
            stack.pop_back();
            dfa_states.pop_back();
            if (!word.empty()) word.pop_back();
            continue;
        }
        const Letter a = next_letter.back()++;
        typename Stepper::Hidden s = stack.back();
        const auto [symbol, certain] = stepper.step(s, a);
        const State q = dfa.next(dfa_states.back(), a);
        word.push_back(a);
        ++result.words;
        if (!agrees(net, dfa, q, symbol, certain, check_states)) {
            result.ok = false;
            result.counterexample = word;
            return result;
        }
        stack.push_back(std::move(s));
        dfa_states.push_back(q);
        next_letter.push_back(0);
    }
    return result;
}

template <class Stepper>
WordCheck random_words_as(const Stepper& stepper, const Network& net, const Dfa& dfa, std::size_t count, std::size_t max_length,
                          std::uint64_t seed, bool check_states) {
    WordCheck result;
    std::mt19937_64 rng(seed);
    for (std::size_t w = 0; w < count; ++w) {
        const std::size_t length = 1 + rng() % max_length;
        result.max_length = std::max(result.max_length, length);
        typename Stepper::Hidden s = stepper.initial();
        State q = dfa.start;
        std::vector<Letter> word;
        for (std::size_t t = 0; t < length; ++t) {
            const Letter a = Letter(rng() % dfa.num_letters());
            word.push_back(a);
            const auto [symbol, certain] = stepper.step(s, a);
            q = dfa.next(q, a);
            if (!agrees(net, dfa, q, symbol, certain, check_states)) {
                result.ok = false;
                result.counterexample = word;
                return result;
            }
        }
        ++result.words;
    }
    return result;
}

// Runs `f` with the stepper for `precision`: exact goes through the integer fast path when the
// network is an integer network (falling back to rationals if a value outgrows it).
template <class F>
WordCheck dispatch(const Network& net, const Precision& precision, F&& f) {
    using K = Precision::Kind;
    WordCheck r;
    switch (precision.kind) {
        case K::fp16: r = f(ScalarStepper<Half>(net)); break;
        case K::bf16: r = f(ScalarStepper<BFloat16>(net)); break;
        case K::fp32: r = f(ScalarStepper<float>(net)); break;
        case K::fp64: r = f(ScalarStepper<double>(net)); break;
        case K::exact:
            if (auto integer = prepare_integer(net)) {
                try {
                    r = f(IntegerStepper{std::move(*integer)});
                    break;
                } catch (const IntegerOverflow&) {
                }
            }
            r = f(ScalarStepper<Rational>(net));
            break;
        case K::bits:
        case K::mpfr: {
            ScopedPrecision scope(precision.bits);
            r = f(ScalarStepper<MpfrFloat>(net));
            break;
        }
        case K::interval: {
            ScopedPrecision scope(precision.bits);
            r = f(ScalarStepper<MpfiFloat>(net));
            break;
        }
    }
    r.precision = precision.name();
    return r;
}

std::string certified_message(std::size_t pairs) {
    return fmt::format("all {} reachable (DFA state, network state) pairs agree: correct for every length", pairs);
}

// The closure of exact_closure over integer networks. Each layer's states (output symbol, hidden
// vector) are interned, and a pair is [DFA state, one state number per layer]. A layer's next state
// depends only on its state and its input letter, so each (state, input letter) is stepped once
// and remembered: a cascade's layers reach few states, while the pairs are their combinations.
// Same pairs, same breadth-first order, same shortest counterexample as stepping whole vectors.
// Throws IntegerOverflow.
ClosureResult integer_closure(const IntegerNetwork& p, const Network& net, const Dfa& dfa, const ClosureOptions& options) {
    const std::size_t layers = p.layers.size();
    const bool shift = net.wiring == Wiring::shift;
    std::vector<SparseStateSet<std::int32_t>> states;       // per layer: [output, hidden...]
    std::vector<std::vector<std::uint32_t>> output_of(layers);  // per layer, per state: its output symbol
    std::vector<FlatMap64> memo(layers);                    // per layer: (state << 32 | input letter) -> next state
    std::vector<std::vector<std::uint64_t>> recent(layers);  // per layer, per (state, token class): input letter << 32 | next state
    const std::size_t classes = p.classes;
    std::vector<std::int32_t> buffer;
    auto intern = [&](std::size_t l, const std::int32_t* layer_state) {
        const auto [id, inserted] = states[l].insert(layer_state);
        if (inserted) output_of[l].push_back(std::uint32_t(layer_state[0]));
        return id;
    };
    SparseStateSet<std::int32_t> nodes(1 + layers);
    std::vector<std::int32_t> current(1 + layers), next(1 + layers);
    current[0] = std::int32_t(dfa.start);
    for (std::size_t l = 0; l < layers; ++l) {
        states.emplace_back(1 + net.layers[l].dim);
        buffer.assign(1, p.initial[l]);
        buffer.insert(buffer.end(), p.initial.begin() + long(p.layers[l].offset), p.initial.begin() + long(p.layers[l].offset + net.layers[l].dim));
        current[1 + l] = std::int32_t(intern(l, buffer.data()));
    }
    nodes.insert(current.data());
    std::vector<std::pair<std::size_t, Letter>> parent{{0, 0}};
    const std::vector<Letter> letters = closure_letters(net, dfa);
    ClosureResult result;
    for (std::size_t i = 0; i < parent.size(); ++i) {
        nodes.get(std::uint32_t(i), current.data());
        for (Letter a : letters) {
            const State q = dfa.next(State(current[0]), a);
            next[0] = std::int32_t(q);
            // Direct-mapped first: slot (state, token class) remembers its last input letter and
            // result (in a cascade the input letter is a function of these two); else the map. The
            // slots are known before any layer steps: fetch them all at once (one cache miss each,
            // overlapped).
            const std::size_t token_class = net.token_class.empty() ? a : net.token_class[a];
            for (std::size_t l = 0; l < layers; ++l) {
                const std::size_t slot = std::size_t(std::uint32_t(current[1 + l])) * classes + token_class;
                if (recent[l].size() <= slot) recent[l].resize(std::max(2 * recent[l].size(), slot + 1), FlatMap64::no_key);
                __builtin_prefetch(recent[l].data() + slot);
                __builtin_prefetch(output_of[l].data() + std::uint32_t(current[1 + l]));
            }
            for (std::size_t l = 0; l < layers; ++l) {
                const std::uint32_t upstream = l == 0 ? 0 : output_of[l - 1][std::uint32_t((shift ? current : next)[l])];
                const std::size_t input = input_letter(net, p.classes, l, upstream, a);
                const auto id = std::uint32_t(current[1 + l]);
                const std::size_t slot = std::size_t(id) * classes + token_class;
                if (recent[l][slot] >> 32 == input) {
                    next[1 + l] = std::int32_t(std::uint32_t(recent[l][slot]));
                    continue;
                }
                // The map only backs slots that have seen two input letters (never, in a cascade).
                const bool conflict = recent[l][slot] != FlatMap64::no_key;
                const std::uint64_t key = std::uint64_t(id) << 32 | input;
                std::uint32_t result = 0;
                if (const std::uint32_t* known = conflict ? memo[l].find(key) : nullptr) {
                    result = *known;
                } else {
                    buffer.resize(states[l].width());
                    states[l].get(id, buffer.data());
                    const auto out = step_integer_layer(p, l, buffer.data() + 1, input);
                    if (!out) throw IntegerOverflow{};
                    buffer[0] = std::int32_t(*out);
                    result = intern(l, buffer.data());
                    if (conflict) {
                        memo[l].insert(key, result);
                        memo[l].insert(std::uint64_t(id) << 32 | (recent[l][slot] >> 32), std::uint32_t(recent[l][slot]));  // keep the evicted one
                    }
                }
                recent[l][slot] = std::uint64_t(input) << 32 | result;
                next[1 + l] = std::int32_t(result);
            }
            const std::uint32_t symbol = output_of[layers - 1][std::uint32_t(next[layers])];
            if (!agrees(net, dfa, q, symbol, true, options.check_states)) {
                // Breadth-first order makes this a shortest failing word.
                std::vector<Letter> word = rebuild(parent, i);
                word.push_back(a);
                result.counterexample = std::move(word);
                result.complete = true;
                result.pairs = parent.size();
                result.message = "a reachable pair reads out a different answer than the DFA";
                return result;
            }
            if (!nodes.insert(next.data()).second) continue;
            if (parent.size() >= options.max_pairs) {
                result.pairs = parent.size();
                result.message = fmt::format("stopped at the limit of {} pairs", options.max_pairs);
                return result;
            }
            parent.emplace_back(i, a);
        }
    }
    result.complete = result.certified = true;
    result.pairs = parent.size();
    return result;
}

}  // namespace

ClosureResult exact_closure(const Network& net, const Dfa& dfa, const ClosureOptions& options) {
    check_same_alphabet(net, dfa);
    ClosureResult result;
    if (!is_rational(net)) {
        result.applicable = false;
        result.message = "the network has irrational entries: no exact closure (use interval checks)";
        return result;
    }
    if (auto integer = prepare_integer(net)) {
        try {
            result = integer_closure(*integer, net, dfa, options);
            if (result.certified) result.message = certified_message(result.pairs);
            return result;
        } catch (const IntegerOverflow&) {
            result = ClosureResult{};
        }
    }
    const PreparedNetwork<Rational> prepared = prepare<Rational>(net);
    std::vector<std::pair<State, NetworkState<Rational>>> nodes;
    std::vector<std::pair<std::size_t, Letter>> parent;
    std::unordered_map<std::string, std::size_t> index;
    nodes.emplace_back(dfa.start, initial_state(prepared));
    parent.emplace_back(0, 0);
    index.emplace(state_key(dfa.start, nodes[0].second), 0);
    const std::vector<Letter> letters = closure_letters(net, dfa);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        for (Letter a : letters) {
            NetworkState<Rational> s = nodes[i].second;
            const std::uint32_t symbol = step(prepared, s, a);
            const State q = dfa.next(nodes[i].first, a);
            if (!agrees(net, dfa, q, symbol, true, options.check_states)) {
                // Breadth-first order makes this a shortest failing word.
                std::vector<Letter> word = rebuild(parent, i);
                word.push_back(a);
                result.counterexample = std::move(word);
                result.complete = true;
                result.pairs = nodes.size();
                result.message = "a reachable pair reads out a different answer than the DFA";
                return result;
            }
            auto [it, inserted] = index.emplace(state_key(q, s), nodes.size());
            if (!inserted) continue;
            if (nodes.size() >= options.max_pairs) {
                result.pairs = nodes.size();
                result.message = fmt::format("stopped at the limit of {} pairs", options.max_pairs);
                return result;
            }
            nodes.emplace_back(q, std::move(s));
            parent.emplace_back(i, a);
        }
    }
    result.complete = result.certified = true;
    result.pairs = nodes.size();
    result.message = certified_message(nodes.size());
    return result;
}

WordCheck check_all_words(const Network& net, const Dfa& dfa, std::size_t max_length, const Precision& precision, bool check_states) {
    check_same_alphabet(net, dfa);
    return dispatch(net, precision, [&](const auto& stepper) { return all_words_as(stepper, net, dfa, max_length, check_states); });
}

WordCheck check_random_words(const Network& net, const Dfa& dfa, std::size_t count, std::size_t max_length, std::uint64_t seed,
                             const Precision& precision, bool check_states) {
    check_same_alphabet(net, dfa);
    if (max_length == 0) throw InputError("--length", "0", "the maximal length must be positive");
    return dispatch(net, precision,
                    [&](const auto& stepper) { return random_words_as(stepper, net, dfa, count, max_length, seed, check_states); });
}

std::size_t exhaustive_length(std::size_t letters, std::size_t budget) {
    std::size_t length = 0, layer = 1, total = 0;
    while (true) {
        layer *= letters;
        if (total + layer > budget || length >= 64) return length;
        total += layer;
        ++length;
    }
}

CompileCheck check_against_dfa(const Network& net, const Dfa& dfa) {
    CompileCheck check;
    const bool rational = is_rational(net);
    const Precision precision = rational ? Precision{Precision::Kind::exact, 0} : Precision{Precision::Kind::interval, 256};
    const std::size_t length = std::max<std::size_t>(1, exhaustive_length(dfa.num_letters(), 20'000));
    check.words = check_all_words(net, dfa, length, precision);
    if (!check.words.ok) {
        check.counterexample = check.words.counterexample;
        return check;
    }
    check.closure = exact_closure(net, dfa);
    if (check.closure.applicable) {
        check.counterexample = check.closure.counterexample;
        check.ok = check.closure.certified;
        return check;
    }
    // Intervals widen geometrically under rotations (the wrapping effect), so long words run in
    // mpfr:256 instead: a numerical check, not a proof.
    check.random = check_random_words(net, dfa, 20, 2000, 20261122, Precision{Precision::Kind::mpfr, 256});
    check.counterexample = check.random->counterexample;
    check.ok = check.random->ok;
    return check;
}

}  // namespace statetrack::lrnn
