#pragma once
// Learned spectra: the non-trivial eigenvalues of every layer's and head's transition A(x_t) on
// sampled words, summarised so a user sees whether a trained model uses negative eigenvalues.
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "statetrack/gpu/cpu_backend.hpp"

namespace statetrack::gpu {

inline constexpr std::size_t spectrum_bins = 20;  // histogram of real parts over [-1, 1]

struct SpectrumSummary {
    std::size_t layer = 0, head = 0, count = 0;
    double min_real = 0, max_real = 0, max_modulus = 0;
    double fraction_negative = 0;  // real part < 0
    double fraction_complex = 0;   // |imaginary part| > 1e-9
    std::vector<std::size_t> histogram = std::vector<std::size_t>(spectrum_bins, 0);
};

// One summary per (layer, head); empty for the LSTM.
template <class Scalar>
std::vector<SpectrumSummary> learned_spectra(const ModelConfig& config, const ParameterLayout& layout,
                                             std::span<const Scalar> params, const Batch& batch, Workspace<Scalar>& ws);

nlohmann::json spectra_to_json(const std::vector<SpectrumSummary>& spectra);

}  // namespace statetrack::gpu
