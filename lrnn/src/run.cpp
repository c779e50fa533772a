// run_network: the Precision -> scalar type dispatch.
#include <fmt/format.h>

#include "statetrack/automata/error.hpp"
#include "statetrack/lrnn/scalars.hpp"

namespace statetrack::lrnn {

namespace {

template <class T>
RunOutput run_as(const Network& network, std::span<const automata::Letter> word, bool trace) {
    const PreparedNetwork<T> prepared = prepare<T>(network);
    NetworkState<T> state = initial_state(prepared);
    RunOutput out;
    out.accept.reserve(word.size());
    out.states.reserve(word.size());
    for (automata::Letter token : word) {
        const std::uint32_t symbol = step(prepared, state, token);
        if (state.certain) out.accept.emplace_back(bool(network.accept[symbol]));
        else out.accept.emplace_back(std::nullopt);
        out.states.push_back(state.certain ? network.states[symbol] : no_dfa_state);
        if (trace) {
            std::vector<std::vector<std::string>> layers;
            for (const auto& h : state.hidden) {
                std::vector<std::string> coords;
                for (const auto& x : h) coords.push_back(to_text(x));
                layers.push_back(std::move(coords));
            }
            out.trace.push_back(std::move(layers));
            out.outputs.push_back(state.outputs);
        }
    }
    return out;
}

}  // namespace

RunOutput run_network(const Network& network, std::span<const automata::Letter> word, const Precision& precision, bool trace) {
    for (std::size_t i = 0; i < word.size(); ++i)
        if (word[i] >= network.alphabet.size())
            throw InputError("word", fmt::format("position {}", i + 1), fmt::format("token index {} outside the alphabet", word[i]));
    using K = Precision::Kind;
    switch (precision.kind) {
        case K::fp16: return run_as<Half>(network, word, trace);
        case K::bf16: return run_as<BFloat16>(network, word, trace);
        case K::fp32: return run_as<float>(network, word, trace);
        case K::fp64: return run_as<double>(network, word, trace);
        case K::exact: return run_as<Rational>(network, word, trace);
        case K::bits:
        case K::mpfr: {
            ScopedPrecision scope(precision.bits);
            return run_as<MpfrFloat>(network, word, trace);
        }
        case K::interval: {
            ScopedPrecision scope(precision.bits);
            return run_as<MpfiFloat>(network, word, trace);
        }
    }
    throw InputError("--precision", precision.name(), "unsupported precision");
}

}  // namespace statetrack::lrnn
