#pragma once
// Finite-precision periodicity (PAPER.md section 2 and Lemma 1): small dense LRNNs on a constant
// input, run in IEEE arithmetic, p-bit MPFR, or the paper's cast model on a finite grid D, with
// Brent's cycle detection on the bit patterns of the whole state. Theorems 1 and 2 are checked
// with these (theorems.hpp).
#include <Eigen/Core>

#include <complex>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace statetrack::proofs {

// One layer: h <- A[x] h + B[x], x the input symbol (layer 0: always 0, the constant letter; layer
// i > 0: the output symbol of layer i-1 at the same step); output symbol [readout . h > 0].
struct DenseLayer {
    Eigen::VectorXd h0;
    std::vector<Eigen::MatrixXd> A;  // per input symbol (1 for layer 0, 2 otherwise)
    std::vector<Eigen::VectorXd> B;
    Eigen::VectorXd readout;
};
struct DenseLrnn {
    std::vector<DenseLayer> layers;
};

// The arithmetic: IEEE types (every operation rounds), a p-bit mantissa (MPFR), or the cast model:
// D = { k 2^-f : |k| <= bound 2^f }, cast = nearest element, the smaller one on ties (saturating);
// parameters are cast into D, A h is computed exactly and cast, then + B exactly and cast.
struct Arithmetic {
    enum class Kind : std::uint8_t { fp16, bf16, fp32, fp64, bits, grid };
    Kind kind = Kind::fp32;
    unsigned bits = 0;          // bits: the mantissa; grid: the fractional bits f
    unsigned grid_bound = 4;    // grid: the largest magnitude in D
    std::string name() const;
};
Arithmetic parse_arithmetic(const std::string& text);  // fp16 bf16 fp32 fp64 bits:P grid:F[:BOUND]

// Eventual periodicity of the state (and outputs) on the constant input.
struct Periodicity {
    bool found = false;          // false: no repeat within max_steps
    std::size_t pre_period = 0;  // mu: first index of the cycle (state index, H_0 = index 0)
    std::size_t period = 0;      // lambda
    std::size_t steps = 0;       // steps evaluated
    // Output symbols of the last layer at t = mu+1 .. mu+lambda (the cycle), and layer by layer
    // the period of each layer's own state (layers 1..i together).
    std::vector<std::uint8_t> cycle_outputs;
    std::vector<std::size_t> layer_periods;
    bool outputs_constant_on_cycle() const;
};
Periodicity find_period(const DenseLrnn& model, const Arithmetic& arithmetic, std::size_t max_steps);

// Eigenvalues of every transition matrix of the model after casting its entries into the
// arithmetic (what the finite-precision model really multiplies by).
std::vector<std::vector<std::complex<double>>> cast_spectra(const DenseLrnn& model, const Arithmetic& arithmetic);

// h <- a h + 1 from h = 0: the number of steps after which h stops changing (the freeze length),
// or nullopt when h does not freeze within max_steps (e.g. a = -1 alternates).
struct Freeze {
    std::optional<std::size_t> length;  // first t with h_t == h_{t+1}
    std::size_t period = 0;             // the eventual period (1 when it freezes)
    bool analytic = false;              // a = 1 in fp64: derived from the integers' representability, checked at the boundary
};
Freeze freeze_length(double a, const Arithmetic& arithmetic, std::size_t max_steps);

}  // namespace statetrack::proofs
