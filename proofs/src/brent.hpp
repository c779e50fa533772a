#pragma once
// Private: the second phase of Brent's cycle detection, shared by periodicity.cpp (dense LRNN
// states) and verify.cpp (pairs of DFA state and network state).
#include <cstddef>
#include <utility>

namespace statetrack::proofs::detail {

// Given the period lambda of the sequence start, f(start), f(f(start)), ...: the pre-period mu
// (the first index with x_mu = x_{mu + lambda}) and the state x_mu, found by walking two copies
// lambda apart. advance(x) applies f in place (its result is ignored); same(a, b) compares states.
template <class State, class Advance, class Same>
std::pair<std::size_t, State> pre_period(const State& start, std::size_t lambda, Advance&& advance, Same&& same) {
    State x = start, y = start;
    for (std::size_t i = 0; i < lambda; ++i) advance(y);
    std::size_t mu = 0;
    while (!same(x, y)) {
        advance(x);
        advance(y);
        ++mu;
    }
    return {mu, std::move(x)};
}

}  // namespace statetrack::proofs::detail
