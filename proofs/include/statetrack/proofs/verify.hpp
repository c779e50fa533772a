#pragma once
// `statetrack verify`: does a network implement a DFA? An exact all-length certificate, then per
// finite precision a closure over the representable states and a search for the shortest failing
// word (docs/theorems.md, "verify", says exactly what each part proves).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"
#include "statetrack/lrnn/network.hpp"
#include "statetrack/lrnn/precision.hpp"

namespace statetrack::proofs {

using Word = std::vector<automata::Letter>;
using Progress = std::function<void(const std::string&)>;

struct VerifyOptions {
    std::vector<lrnn::Precision> precisions;      // empty: fp16, bf16, fp32, fp64
    std::size_t exact_max_pairs = 2'000'000;      // rational closure
    std::size_t orbit_max_nodes = 20'000;         // interval orbit (irrational networks)
    std::size_t precision_max_pairs = 100'000;    // per precision closure
    std::size_t repeated_max_steps = 1 << 16;     // per letter, cycle detection on a^k
    std::size_t random_words = 16, random_max_length = 2048;
    std::uint64_t seed = 20261122;
    Progress progress;                            // optional
};

// The all-length part. Integer networks (and 2-D reflection layers at rational angles, as their
// ideal model): integer_closure. Other rational networks: the exact closure of lrnn (check.hpp). Irrational ones:
// an interval orbit (256-bit MPFI): representatives c_i of the reachable states, a rigorous per-step
// drift bound delta (|A c_i + B - c_j| <= delta along every edge) and readout margin m, so that,
// with |A| <= 1, every word of length L < (m - e0) / delta is proved correct.
struct ExactCertificate {
    std::string method;       // "rational closure" | "interval orbit"
    bool certified = false;   // proved for every length
    bool complete = false;    // the closure / orbit finished within its budget
    std::size_t pairs = 0;
    std::optional<Word> counterexample;  // a word on which the model (exactly) disagrees with the DFA
    double margin = 0;        // smallest readout margin over the reachable states
    double drift = 0;         // interval orbit: per-step drift bound delta (0 for exact closures)
    double log2_certified_length = 0;  // interval orbit: every word of length < 2^this is proved
    std::string proves;       // what exactly was proved, in words
    // Angle layers (integer_closure.hpp): `certified` is about the ideal model (entries exactly
    // cos / sin of k pi / N, recognised within recognition_error of the stored digits); the stored
    // decimals get the interval orbit: log2_certified_length and stored_proves.
    bool ideal = false;
    double recognition_error = 0;
    std::string stored_proves;
};

// a^k for one letter a: cycle detection (Brent) on the bit pattern of (DFA state, network state).
struct RepeatedLetter {
    automata::Letter letter = 0;
    bool cycle_found = false;                 // then every k was checked
    std::size_t pre_period = 0, period = 0;   // when cycle_found
    std::optional<std::size_t> first_failure; // smallest failing k
    std::size_t steps = 0;
};

struct PrecisionVerdict {
    std::string name;
    double unit_roundoff = 0;
    bool all_lengths = false;      // the closure over representable states closed without disagreement
    bool closure_complete = false;
    std::size_t states = 0;        // pairs visited by the closure
    std::size_t exhaustive_length = 0;  // every word up to this length was checked
    std::optional<Word> first_failure;  // the shortest failing word found
    bool failure_is_shortest = false;   // found by the breadth-first closure (so no shorter one exists)
    std::string failure_found_by;       // "closure" | "repeated letter" | "random words"
    std::vector<RepeatedLetter> repeated;
    double step_error_bound = 0;        // first-order per-step rounding bound (2-norm)
    double certified_length = 0;        // floor(margin / step bound): every word this long is safe
};

struct VerifyResult {
    ExactCertificate exact;
    std::vector<PrecisionVerdict> precisions;
    std::optional<Word> counterexample;  // = exact.counterexample
    bool passed() const { return !counterexample.has_value(); }
};

// Throws InputError when the alphabets differ.
VerifyResult verify(const lrnn::Network& network, const automata::Dfa& dfa, const VerifyOptions& options = {});

// The JSON of `statetrack verify --json` (words as symbols joined by spaces).
nlohmann::json to_json(const VerifyResult& result, const automata::Dfa& dfa);

// "fp16,bf16,bits:12" -> precisions (fp16, bf16, fp32, fp64, bits:P, mpfr:P); InputError otherwise.
std::vector<lrnn::Precision> parse_precision_list(const std::string& text);
std::vector<lrnn::Precision> default_precisions();

}  // namespace statetrack::proofs
