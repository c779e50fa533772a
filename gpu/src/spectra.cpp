#include "statetrack/gpu/spectra.hpp"

#include <algorithm>
#include <cmath>

namespace statetrack::gpu {

template <class Scalar>
std::vector<SpectrumSummary> learned_spectra(const ModelConfig& config, const ParameterLayout& layout,
                                             std::span<const Scalar> params, const Batch& batch, Workspace<Scalar>& ws) {
    std::vector<SpectrumSummary> out;
    if (config.mixer == Mixer::lstm) return out;
    for (std::size_t l = 0; l < config.layers; ++l)
        for (std::size_t h = 0; h < config.heads; ++h) {
            SpectrumSummary s;
            s.layer = l, s.head = h;
            s.min_real = INFINITY, s.max_real = -INFINITY;
            out.push_back(s);
        }
    transition_eigenvalues<Scalar>(config, layout, params, batch, ws, [&](std::size_t l, std::size_t h, std::complex<double> z) {
        auto& s = out[l * config.heads + h];
        s.count += 1;
        s.min_real = std::min(s.min_real, z.real());
        s.max_real = std::max(s.max_real, z.real());
        s.max_modulus = std::max(s.max_modulus, std::abs(z));
        s.fraction_negative += z.real() < 0;
        s.fraction_complex += std::abs(z.imag()) > 1e-9;
        const double position = (std::clamp(z.real(), -1.0, 1.0) + 1) / 2 * double(spectrum_bins);
        s.histogram[std::min(spectrum_bins - 1, std::size_t(position))] += 1;
    });
    for (auto& s : out)
        if (s.count) {
            s.fraction_negative /= double(s.count);
            s.fraction_complex /= double(s.count);
        }
    return out;
}

nlohmann::json spectra_to_json(const std::vector<SpectrumSummary>& spectra) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : spectra)
        out.push_back({{"layer", s.layer}, {"head", s.head}, {"count", s.count}, {"min", s.min_real},
                       {"max", s.max_real}, {"max_modulus", s.max_modulus}, {"fraction_negative", s.fraction_negative},
                       {"fraction_complex", s.fraction_complex},
                       {"histogram", {{"range", {-1.0, 1.0}}, {"bins", spectrum_bins}, {"counts", s.histogram}}}});
    return out;
}

template std::vector<SpectrumSummary> learned_spectra<float>(const ModelConfig&, const ParameterLayout&,
                                                             std::span<const float>, const Batch&, Workspace<float>&);
template std::vector<SpectrumSummary> learned_spectra<double>(const ModelConfig&, const ParameterLayout&,
                                                              std::span<const double>, const Batch&, Workspace<double>&);

}  // namespace statetrack::gpu
