#pragma once
// One checker per statement of PAPER.md (`statetrack prove NAME`). Each returns what it checked,
// in words and as JSON, and whether the statement holds as the toolkit states it (docs/theorems.md).
// The pieces that decide (period checks, eigenvalue claims, factorizations) are exposed so tests can
// feed them cases where the statement fails.
#include <nlohmann/json.hpp>

#include <complex>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "statetrack/lrnn/network.hpp"
#include "statetrack/lrnn/precision.hpp"
#include "statetrack/proofs/periodicity.hpp"
#include "statetrack/proofs/verify.hpp"

namespace statetrack::proofs {

struct TheoremReport {
    std::string name;
    std::string statement;           // one line: what is checked
    bool holds = false;
    std::vector<std::string> lines;  // what was checked and found, for humans
    nlohmann::json details;          // the same as data
    double seconds = 0;
};
nlohmann::json to_json(const TheoremReport& report);  // {"theorem", "statement", "holds", "seconds", ...details}

struct ProveOptions {
    bool quick = false;               // sized down (tests); the full run is what CI and `report` run
    std::uint64_t seed = 20261122;
    std::string mlregtest_dir;        // theorem4: the corpus (default: tests/data/mlregtest of the source tree)
    std::size_t mlregtest_stride = 0; // theorem4: every k-th corpus file (0: 49 with quick, else 1 = all 1,470)
    Progress progress;
};

const std::vector<std::string>& theorem_names();  // theorem1 theorem2 prop1 theorem3 theorem4 theorem6
// Throws InputError for an unknown name.
TheoremReport prove(const std::string& name, const ProveOptions& options = {});

TheoremReport prove_theorem1(const ProveOptions& options);
TheoremReport prove_theorem2(const ProveOptions& options);
TheoremReport prove_prop1(const ProveOptions& options);
TheoremReport prove_theorem3(const ProveOptions& options);
TheoremReport prove_theorem4(const ProveOptions& options);
TheoremReport prove_theorem6(const ProveOptions& options);

// `prove theorem1 --model M`: the state on 1^k (the letter "1") in a precision, by cycle detection
// on its bit pattern; when the output is eventually constant, two words of different parity with
// the same output. Needs the letter "1" in the alphabet (InputError otherwise).
struct ParityDecision {
    bool nonnegative_spectra = false;     // every letter's transitions (fp64 dense view) have real eigenvalues >= 0
    bool cycle_found = false;
    std::size_t pre_period = 0, period = 0;
    bool can_follow_parity = false;       // the outputs on the cycle alternate like parity
    std::optional<std::pair<std::size_t, std::size_t>> same_output;  // lengths k1, k2 of different parity, same output
};
ParityDecision decide_parity(const lrnn::Network& network, const lrnn::Precision& precision, std::size_t max_steps = 1 << 20);
TheoremReport prove_theorem1_model(const lrnn::Network& network, const lrnn::Precision& precision);

// Theorem 1's test on one model: state periodicity on 1^k; the statement fails on this model when
// the outputs on the cycle alternate (they could follow parity).
bool outputs_alternate(const Periodicity& p);
// Theorem 2's test: every layer i's state period divides 2^i.
bool periods_divide_powers_of_two(const Periodicity& p);

// Proposition 1 pieces. A GH factor (v, beta) in fp64; products are G_1 G_2 ... G_k.
struct Factor {
    Eigen::VectorXd v;
    double beta = 0;
};
Eigen::MatrixXd product(const std::vector<Factor>& factors, std::size_t n);
// |N| <= 1 decided exactly: the fp64 entries are rationals, N is formed in exact rational
// arithmetic and I - N^T N is checked positive semidefinite by its principal minors (n <= 6).
bool norm_at_most_one_exact(const std::vector<Factor>& factors, std::size_t n);
// Factorizations: orthogonal Q -> at most n reflections; any M with |M| <= 1 -> at most 3n factors
// (SVD + Householder); a permutation (p[i] = image of i) -> p - c swaps. Each returns the factors;
// reconstruction_error measures |product - target|_max exactly (rational arithmetic).
std::vector<Factor> factor_orthogonal(const Eigen::MatrixXd& q);
std::vector<Factor> factor_contraction(const Eigen::MatrixXd& m);
std::vector<Factor> factor_permutation(const std::vector<std::size_t>& p);
double reconstruction_error(const std::vector<Factor>& factors, const Eigen::MatrixXd& target);
// The eigenvalue claims: (-1, 1] factors give eigenvalues 1 or |lambda| < 1; returns the worst
// offender's modulus (> 1 - tol and not 1: a violation).
struct EigenClaim {
    bool holds = true;
    double largest_modulus_not_one = 0;  // over the eigenvalues not equal to 1
    double largest_imaginary = 0;
    std::optional<std::complex<double>> violation;
};
EigenClaim check_open_interval_claim(const std::vector<Factor>& factors, std::size_t n);
// beta in [0, 1] and k <= 2: every eigenvalue real in [0, 1].
EigenClaim check_real_unit_claim(const std::vector<Factor>& factors, std::size_t n);

// Theorem 4: the DFA "the second-to-last letter is a" over {a, b}.
automata::Dfa second_to_last_a();

}  // namespace statetrack::proofs
