#pragma once
// Learned spectra: the non-trivial eigenvalues of every layer's and head's transition A(x_t) on
// sampled words, summarised so a user sees whether a trained model uses negative eigenvalues, and
// of the products A(x_{t+1}) A(x_t) of neighbouring tokens, where two reflections make a rotation
// (counting mod 3 needs one: PAPER.md, Theorem 2).
#include <complex>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "statetrack/gpu/cpu_backend.hpp"

namespace statetrack::gpu {

inline constexpr std::size_t spectrum_bins = 20;  // histograms: real parts over [-1, 1], |arg| over [0, pi]

// Counts and extremes of a set of eigenvalues.
struct EigenvalueSummary {
    std::size_t count = 0;
    double min_real = 0, max_real = 0, max_modulus = 0;
    double fraction_negative = 0;  // real part < 0
    double fraction_complex = 0;   // |imaginary part| > 1e-6
    std::vector<std::size_t> histogram = std::vector<std::size_t>(spectrum_bins, 0);        // real parts
    std::vector<std::size_t> angle_histogram = std::vector<std::size_t>(spectrum_bins, 0);  // |arg z|: 0 real positive, pi real negative
};

struct SpectrumSummary : EigenvalueSummary {
    std::size_t layer = 0, head = 0;
    EigenvalueSummary pairs;  // eigenvalues of A(x_{t+1}) A(x_t), neighbouring real positions of one word
};

// The non-trivial eigenvalues of (I - beta_m k_m k_m^T) ... (I - beta_1 k_1 k_1^T) (factor 1 applied
// first): the product leaves span(k_1..k_m) invariant and fixes its complement, so these are the
// eigenvalues of its restriction to that span (as many as the span's rank).
std::vector<std::complex<double>> householder_product_eigenvalues(std::span<const std::vector<double>> keys,
                                                                  std::span<const double> betas);

// One summary per (layer, head); empty for the LSTM.
template <class Scalar>
std::vector<SpectrumSummary> learned_spectra(const ModelConfig& config, const ParameterLayout& layout,
                                             std::span<const Scalar> params, const Batch& batch, Workspace<Scalar>& ws);

nlohmann::json spectra_to_json(const std::vector<SpectrumSummary>& spectra);

}  // namespace statetrack::gpu
