// Seeded random DFAs. The engine is std::mt19937_64 (its output sequence is fixed by the C++
// standard) and the mapping to ranges is ours, so a seed gives the same DFA with every compiler and
// standard library.
#include <fmt/format.h>

#include <random>
#include <utility>

#include "statetrack/automata/algorithms.hpp"
#include "statetrack/automata/error.hpp"

namespace statetrack::automata {

namespace {

struct Random {
    std::mt19937_64 engine;

    // Uniform in [0, n), n > 0: rejects the few low draws that would make `r % n` biased.
    std::uint64_t below(std::uint64_t n) {
        const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
        for (;;) {
            const std::uint64_t r = engine();
            if (r >= threshold) return r % n;
        }
    }
    // Uniform in [0, 1) with 53 random bits.
    double unit() { return double(engine() >> 11) * 0x1.0p-53; }
};

enum class LetterKind { permutation, reset, arbitrary };

// The letter kinds of a mixed DFA: uniform among the three, then, with two letters or more, one
// letter made a reset if none is and one non-reset letter made a permutation if none is, so that
// every mixed DFA really mixes group-like and reset-like letters.
std::vector<LetterKind> mixed_letter_kinds(Random& random, std::size_t k) {
    std::vector<LetterKind> kinds(k);
    for (auto& kind : kinds) kind = LetterKind(random.below(3));
    if (k < 2) return kinds;
    auto count = [&](LetterKind want) {
        std::size_t c = 0;
        for (auto kind : kinds) c += kind == want;
        return c;
    };
    if (count(LetterKind::reset) == 0) kinds[random.below(k)] = LetterKind::reset;
    if (count(LetterKind::permutation) == 0) {
        // Candidates: the non-reset letters, or when all are resets, all but the first.
        std::vector<std::size_t> candidates;
        for (std::size_t a = 0; a < k; ++a)
            if (kinds[a] != LetterKind::reset) candidates.push_back(a);
        if (candidates.empty())
            for (std::size_t a = 1; a < k; ++a) candidates.push_back(a);
        kinds[candidates[random.below(candidates.size())]] = LetterKind::permutation;
    }
    return kinds;
}

}  // namespace

const char* to_string(RandomKind kind) {
    switch (kind) {
        case RandomKind::uniform: return "uniform";
        case RandomKind::permutation: return "permutation";
        case RandomKind::mixed: return "mixed";
    }
    return "?";
}

RandomKind parse_random_kind(const std::string& text) {
    for (RandomKind kind : {RandomKind::uniform, RandomKind::permutation, RandomKind::mixed})
        if (text == to_string(kind)) return kind;
    throw InputError("random", "kind", fmt::format("unknown kind '{}' (expected uniform, permutation or mixed)", text));
}

Dfa random_dfa(const RandomDfaOptions& options) {
    const std::size_t n = options.states, k = options.letters;
    if (n == 0) throw InputError("random", "states", "a DFA needs at least one state");
    if (k == 0) throw InputError("random", "letters", "a DFA needs at least one letter");
    if (n > max_random_dfa_states)
        throw LimitError("random", "states", fmt::format("{} states exceed the limit of {}", n, max_random_dfa_states));
    if (k > max_random_dfa_letters)
        throw LimitError("random", "letters", fmt::format("{} letters exceed the limit of {}", k, max_random_dfa_letters));
    if (!(options.accepting_probability >= 0.0 && options.accepting_probability <= 1.0))
        throw InputError("random", "accepting_probability",
                         fmt::format("{} is not a probability in [0, 1]", options.accepting_probability));

    std::vector<std::string> alphabet;
    alphabet.reserve(k);
    for (std::size_t a = 0; a < k; ++a) alphabet.push_back(std::to_string(a));
    Dfa dfa = make_dfa(n, std::move(alphabet),
                       fmt::format("random:{}:{}:{}:{}", to_string(options.kind), n, k, options.seed));

    // Draw order (part of the reproducibility contract): letter kinds, accepting flags, then each
    // letter's map in turn.
    Random random{std::mt19937_64(options.seed)};
    std::vector<LetterKind> kinds(k, LetterKind::arbitrary);
    if (options.kind == RandomKind::permutation) kinds.assign(k, LetterKind::permutation);
    if (options.kind == RandomKind::mixed) kinds = mixed_letter_kinds(random, k);
    for (std::size_t q = 0; q < n; ++q) dfa.accepting[q] = random.unit() < options.accepting_probability;

    std::vector<State> image(n);
    for (Letter a = 0; a < k; ++a) {
        switch (kinds[a]) {
            case LetterKind::arbitrary:
                for (std::size_t q = 0; q < n; ++q) image[q] = State(random.below(n));
                break;
            case LetterKind::reset: image.assign(n, State(random.below(n))); break;
            case LetterKind::permutation:  // Fisher-Yates
                for (std::size_t q = 0; q < n; ++q) image[q] = State(q);
                for (std::size_t i = n; i > 1; --i) std::swap(image[i - 1], image[random.below(i)]);
                break;
        }
        for (std::size_t q = 0; q < n; ++q) dfa.next(State(q), a) = image[q];
    }
    return dfa;
}

}  // namespace statetrack::automata
