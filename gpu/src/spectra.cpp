#include "statetrack/gpu/spectra.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace statetrack::gpu {

namespace {

EigenvalueSummary empty_summary() {
    EigenvalueSummary s;
    s.min_real = INFINITY, s.max_real = -INFINITY;
    return s;
}

// A product's nearly double real eigenvalues split into a pair with an imaginary part of about the
// square root of the rounding error (1e-8 in fp64): not a rotation.
constexpr double complex_threshold = 1e-6;

std::size_t bin_of(double x, double lo, double hi) {
    const double position = (std::clamp(x, lo, hi) - lo) / (hi - lo) * double(spectrum_bins);
    return std::min(spectrum_bins - 1, std::size_t(position));
}

void add(EigenvalueSummary& s, std::complex<double> z) {
    s.count += 1;
    s.min_real = std::min(s.min_real, z.real());
    s.max_real = std::max(s.max_real, z.real());
    s.max_modulus = std::max(s.max_modulus, std::abs(z));
    s.fraction_negative += z.real() < 0;
    s.fraction_complex += std::abs(z.imag()) > complex_threshold;
    s.histogram[bin_of(z.real(), -1.0, 1.0)] += 1;
    s.angle_histogram[bin_of(std::abs(std::arg(z)), 0.0, std::numbers::pi)] += 1;
}

void finish(EigenvalueSummary& s) {
    if (!s.count) return;
    s.fraction_negative /= double(s.count);
    s.fraction_complex /= double(s.count);
}

nlohmann::json to_json(const EigenvalueSummary& s) {
    // an empty summary has no extremes: null rather than the infinities JSON cannot hold
    const auto extreme = [&](double x) { return s.count ? nlohmann::json(x) : nlohmann::json(nullptr); };
    return {{"count", s.count},
            {"min", extreme(s.min_real)},
            {"max", extreme(s.max_real)},
            {"max_modulus", s.max_modulus},
            {"fraction_negative", s.fraction_negative},
            {"fraction_complex", s.fraction_complex},
            {"histogram", {{"range", {-1.0, 1.0}}, {"bins", spectrum_bins}, {"counts", s.histogram}}},
            {"angle_histogram", {{"range", {0.0, std::numbers::pi}}, {"bins", spectrum_bins}, {"counts", s.angle_histogram}}}};
}

}  // namespace

std::vector<std::complex<double>> householder_product_eigenvalues(std::span<const std::vector<double>> keys,
                                                                  std::span<const double> betas) {
    if (keys.empty()) return {};
    const auto n = Eigen::Index(keys.front().size()), m = Eigen::Index(keys.size());
    Eigen::MatrixXd K(n, m);
    for (Eigen::Index j = 0; j < m; ++j) K.col(j) = Eigen::Map<const Eigen::VectorXd>(keys[std::size_t(j)].data(), n);
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(K);
    const Eigen::Index rank = qr.rank();
    if (rank == 0) return {};
    const Eigen::MatrixXd Q = Eigen::MatrixXd(qr.householderQ()).leftCols(rank);
    Eigen::MatrixXd X = Q;  // A Q, the factors applied in order
    for (Eigen::Index j = 0; j < m; ++j) X -= betas[std::size_t(j)] * K.col(j) * (K.col(j).transpose() * X);
    Eigen::EigenSolver<Eigen::MatrixXd> solver(Q.transpose() * X, false);
    std::vector<std::complex<double>> out;
    for (Eigen::Index i = 0; i < rank; ++i) out.push_back(solver.eigenvalues()(i));
    return out;
}

template <class Scalar>
std::vector<SpectrumSummary> learned_spectra(const ModelConfig& config, const ParameterLayout& layout,
                                             std::span<const Scalar> params, const Batch& batch, Workspace<Scalar>& ws) {
    std::vector<SpectrumSummary> out;
    if (config.mixer == Mixer::lstm) return out;
    for (std::size_t l = 0; l < config.layers; ++l)
        for (std::size_t h = 0; h < config.heads; ++h) {
            SpectrumSummary s;
            static_cast<EigenvalueSummary&>(s) = empty_summary();
            s.pairs = empty_summary();
            s.layer = l, s.head = h;
            out.push_back(s);
        }
    transition_eigenvalues<Scalar>(config, layout, params, batch, ws, [&](std::size_t l, std::size_t h, std::complex<double> z) {
        add(out[l * config.heads + h], z);
    });
    // Neighbouring tokens: steps come per (layer, head, row) in position order.
    RecurrenceStep previous;
    bool have_previous = false;
    recurrence_steps<Scalar>(config, layout, params, batch, ws, [&](const RecurrenceStep& step) {
        const bool neighbour = have_previous && previous.layer == step.layer && previous.head == step.head &&
                               previous.row == step.row && previous.position + 1 == step.position;
        if (neighbour) {
            auto& pairs = out[step.layer * config.heads + step.head].pairs;
            if (!step.decay.empty()) {
                for (std::size_t r = 0; r < step.decay.size(); ++r) add(pairs, previous.decay[r] * step.decay[r]);
            } else {
                std::vector<std::vector<double>> keys = previous.keys;
                std::vector<double> betas = previous.betas;
                keys.insert(keys.end(), step.keys.begin(), step.keys.end());
                betas.insert(betas.end(), step.betas.begin(), step.betas.end());
                for (auto z : householder_product_eigenvalues(keys, betas)) add(pairs, z);
            }
        }
        previous = step;
        have_previous = true;
    });
    for (auto& s : out) finish(s), finish(s.pairs);
    return out;
}

nlohmann::json spectra_to_json(const std::vector<SpectrumSummary>& spectra) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : spectra) {
        nlohmann::json j = to_json(s);
        j["layer"] = s.layer, j["head"] = s.head, j["pairs"] = to_json(s.pairs);
        out.push_back(std::move(j));
    }
    return out;
}

template std::vector<SpectrumSummary> learned_spectra<float>(const ModelConfig&, const ParameterLayout&,
                                                             std::span<const float>, const Batch&, Workspace<float>&);
template std::vector<SpectrumSummary> learned_spectra<double>(const ModelConfig&, const ParameterLayout&,
                                                              std::span<const double>, const Batch&, Workspace<double>&);

}  // namespace statetrack::gpu
