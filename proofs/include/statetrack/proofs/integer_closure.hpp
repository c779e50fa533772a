#pragma once
// The exact all-length closure over states encoded as small integers (docs/theorems.md, "verify").
// Two kinds of layers are exact in machine integers:
// - integer layers: every entry of h0, v, the diagonal, the bias and the anchors is an integer and
//   every GH coefficient beta / v.v is one too (the one-hot, parity and cascade constructions), so
//   every reachable hidden vector is an integer vector;
// - angle layers (the *ideal* model of a 2-D reflection layer): h0 and the anchors are unit vectors
//   at angles k pi / N and every factor is a reflection (beta = 2) whose v points at an angle
//   b pi / N, all recognised from the stored digits; the state is the angle k (mod 2N), a
//   reflection maps k to 2b + N - k, and the nearest anchor is the one at the smallest angular
//   distance. This proves the model whose irrational entries are exactly those cosines and sines.
// It is the same closure as lrnn::exact_closure (same pairs, same shortest counterexample) without
// rationals or text keys: fast enough for all 1,470 MLRegTest cascades.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"
#include "statetrack/lrnn/network.hpp"

namespace statetrack::proofs {

struct IntegerClosure {
    bool applicable = false;  // every layer is an integer or an angle layer
    bool ideal = false;       // some layer is an angle layer: the result is about the ideal model
    bool complete = false;    // explored every reachable pair within max_pairs
    bool certified = false;   // complete and every pair agrees with the DFA
    std::size_t pairs = 0;
    std::optional<std::vector<automata::Letter>> counterexample;  // shortest (breadth-first)
    std::string message;      // why not applicable, or what was found
    unsigned angle_denominator = 0;  // N of the angle layers (angles are k pi / N)
    double recognition_error = 0;    // largest |stored - ideal| over the recognised entries
};

// Every reachable pair's hidden state, for margins: per layer, the hidden vector (angle layers:
// (cos, sin) of the angle). Called once per pair after a complete closure, so that a 10^5-pair
// closure of a 4,000-dimensional cascade needs no per-pair copy.
using HiddenVisitor = std::function<void(const std::vector<std::vector<double>>&)>;
IntegerClosure integer_closure(const lrnn::Network& network, const automata::Dfa& dfa, std::size_t max_pairs = 2'000'000,
                               const HiddenVisitor& visit = {});

}  // namespace statetrack::proofs
