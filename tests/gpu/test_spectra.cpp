// Learned spectra of products: householder_product_eigenvalues against dense products, and the
// neighbouring-token products (A(x_{t+1}) A(x_t)) that learned_spectra reports per layer and head.
#include <gtest/gtest.h>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "statetrack/automata/zoo.hpp"
#include "statetrack/gpu/random.hpp"
#include "statetrack/gpu/spectra.hpp"

using namespace statetrack;
using namespace statetrack::gpu;

namespace {

std::vector<double> unit(std::vector<double> v) {
    double n = 0;
    for (double x : v) n += x * x;
    for (double& x : v) x /= std::sqrt(n);
    return v;
}

// All eigenvalues of the dense product, factors applied in the order given by `order`.
std::vector<std::complex<double>> dense_eigenvalues(const std::vector<std::vector<double>>& keys, const std::vector<double>& betas,
                                                    const std::vector<std::size_t>& order) {
    const auto n = Eigen::Index(keys.front().size());
    Eigen::MatrixXd A = Eigen::MatrixXd::Identity(n, n);
    for (std::size_t j : order) {
        const Eigen::Map<const Eigen::VectorXd> k(keys[j].data(), n);
        A = (Eigen::MatrixXd::Identity(n, n) - betas[j] * k * k.transpose()) * A;
    }
    Eigen::EigenSolver<Eigen::MatrixXd> solver(A, false);
    return {solver.eigenvalues().data(), solver.eigenvalues().data() + n};
}

// Whether `all` is `part` plus eigenvalues 1 (the fixed complement), up to tol, matched greedily.
bool is_part_plus_ones(std::vector<std::complex<double>> all, const std::vector<std::complex<double>>& part, double tol) {
    for (auto z : part) {
        auto it = std::min_element(all.begin(), all.end(), [&](auto a, auto b) { return std::abs(a - z) < std::abs(b - z); });
        if (it == all.end() || std::abs(*it - z) > tol) return false;
        all.erase(it);
    }
    return std::all_of(all.begin(), all.end(), [&](auto z) { return std::abs(z - 1.0) <= tol; });
}

}  // namespace

TEST(ProductSpectra, TwoReflectionsAtSixtyDegreesRotateByATwoThirdTurn) {
    const std::vector<std::vector<double>> keys{{1, 0, 0, 0}, {0.5, std::sqrt(3.0) / 2, 0, 0}};
    const auto z = householder_product_eigenvalues(keys, std::vector<double>{2, 2});
    ASSERT_EQ(z.size(), 2u);
    for (auto e : z) {
        EXPECT_NEAR(std::abs(e), 1.0, 1e-12);
        EXPECT_NEAR(std::abs(std::arg(e)), 2 * std::numbers::pi / 3, 1e-12);
    }
    // the same key twice: a reflection squared is the identity on its (one-dimensional) span
    const auto same = householder_product_eigenvalues(std::vector<std::vector<double>>{keys[0], keys[0]}, std::vector<double>{2, 2});
    ASSERT_EQ(same.size(), 1u);
    EXPECT_NEAR(std::abs(same[0] - 1.0), 0.0, 1e-12);
    // one reflection: -1; beta in [0, 1] on orthogonal keys: 1 - beta each, real
    const auto one = householder_product_eigenvalues(std::vector<std::vector<double>>{keys[0]}, std::vector<double>{2});
    ASSERT_EQ(one.size(), 1u);
    EXPECT_NEAR(one[0].real(), -1.0, 1e-12);
    const auto damp = householder_product_eigenvalues(std::vector<std::vector<double>>{{1, 0, 0, 0}, {0, 1, 0, 0}},
                                                      std::vector<double>{0.5, 0.25});
    ASSERT_EQ(damp.size(), 2u);
    std::vector<double> re{damp[0].real(), damp[1].real()};
    std::sort(re.begin(), re.end());
    EXPECT_NEAR(re[0], 0.5, 1e-12);
    EXPECT_NEAR(re[1], 0.75, 1e-12);
    EXPECT_TRUE(householder_product_eigenvalues({}, {}).empty());
}

TEST(ProductSpectra, RestrictionMatchesTheDenseProductInItsOrder) {
    // Four factors: the order matters from four on (three factors' orders are cyclic shifts or reversals,
    // which keep the eigenvalues), so a product taken in another order is caught.
    Rng rng = make_rng(20261122, 1);
    std::vector<std::vector<double>> keys;
    std::vector<double> betas;
    for (int j = 0; j < 4; ++j) {
        std::vector<double> k(6);
        for (double& x : k) x = uniform01(rng) - 0.5;
        keys.push_back(unit(k));
        betas.push_back(2 * uniform01(rng));
    }
    const auto ours = householder_product_eigenvalues(keys, betas);
    ASSERT_EQ(ours.size(), 4u);
    EXPECT_TRUE(is_part_plus_ones(dense_eigenvalues(keys, betas, {0, 1, 2, 3}), ours, 1e-9));
    EXPECT_FALSE(is_part_plus_ones(dense_eigenvalues(keys, betas, {0, 2, 1, 3}), ours, 1e-9));
}

TEST(ProductSpectra, NeighbourPairsOfTrainedShapes) {
    const Task task{automata::zoo("parity"), "parity", LabelMode::final_position, Target::accept};
    const Batch batch = sample_batch(task, 3, {4, 7}, 1, 1);
    std::size_t pairs_per_head = 0;
    for (auto len : batch.lengths) pairs_per_head += std::size_t(len) - 1;
    for (const char* model : {"deltanet", "mamba"})
        for (EigRange eig : {EigRange::unit, EigRange::signed_unit}) {
            ModelConfig c;
            parse_model_name(model, c);
            c.eig = eig, c.layers = 2, c.d_model = 8, c.heads = 2;
            const auto layout = parameter_layout(c);
            std::vector<double> w(layout.total);
            init_parameters<double>(c, layout, 7, w);
            if (c.mixer != Mixer::mamba) {
                // large wbeta weights push beta to the ends of its range: near-reflections with [-1, 1]
                for (const auto& t : layout.tensors)
                    if (t.name.ends_with("wbeta"))
                        for (std::size_t i = 0; i < t.size(); ++i) w[t.offset + i] *= 40;
            }
            Workspace<double> ws;
            const auto spectra = learned_spectra<double>(c, layout, w, batch, ws);
            ASSERT_EQ(spectra.size(), 4u);
            const std::size_t per_pair = c.mixer == Mixer::mamba ? 4 : 2;  // head_dim diagonal entries, or rank of span(k_t, k_t+1)
            std::size_t complex_pairs = 0;
            for (const auto& s : spectra) {
                EXPECT_EQ(s.pairs.count, per_pair * pairs_per_head) << model;
                EXPECT_LE(s.pairs.max_modulus, 1 + 1e-9) << model;
                EXPECT_EQ(std::accumulate(s.pairs.angle_histogram.begin(), s.pairs.angle_histogram.end(), std::size_t(0)), s.pairs.count);
                EXPECT_EQ(std::accumulate(s.angle_histogram.begin(), s.angle_histogram.end(), std::size_t(0)), s.count);
                if (eig == EigRange::unit) {
                    // products of two symmetric positive semi-definite factors: real, non-negative spectrum
                    EXPECT_EQ(s.pairs.fraction_complex, 0.0) << model;
                    EXPECT_EQ(s.pairs.fraction_negative, 0.0) << model;
                }
                complex_pairs += std::size_t(std::lround(s.pairs.fraction_complex * double(s.pairs.count)));
            }
            if (c.mixer == Mixer::mamba) {
                EXPECT_EQ(complex_pairs, 0u);  // diagonal products stay real
            } else if (eig == EigRange::signed_unit) {
                EXPECT_GT(complex_pairs, 0u);  // rotations exist
            }
            const auto json = spectra_to_json(spectra);
            EXPECT_EQ(json[0]["pairs"]["count"].get<std::size_t>(), spectra[0].pairs.count);
            EXPECT_EQ(json[0]["angle_histogram"]["counts"].size(), spectrum_bins);
        }
}

// Beta in [0,1] keeps eigenvalues real and non-negative only for up to two factors: three projections
// (beta = 1) onto the lines orthogonal to keys 60 degrees apart in a plane multiply to a rank-one map
// with eigenvalue cos 60 * cos 60 * cos 120 = -1/8 (the trained [0,1] deltaproduct:3 models of
// docs/RESULTS.md reached -0.065 and -0.126).
TEST(Spectra, ThreeProjectionsCanGiveANegativeEigenvalue) {
    const double pi = std::acos(-1.0);
    std::vector<std::vector<double>> keys;
    for (int j = 0; j < 3; ++j) keys.push_back({std::cos(j * pi / 3), std::sin(j * pi / 3), 0.0});
    const auto z = householder_product_eigenvalues(keys, std::vector<double>{1, 1, 1});
    double most_negative = 0;
    for (auto e : z) {
        EXPECT_NEAR(e.imag(), 0.0, 1e-12);
        most_negative = std::min(most_negative, e.real());
    }
    EXPECT_NEAR(most_negative, -0.125, 1e-12);
    // two of the same projections: real and non-negative, as Proposition 1 says for k <= 2
    for (auto e : householder_product_eigenvalues(std::span(keys).first(2), std::vector<double>{1, 1}))
        EXPECT_GE(e.real(), -1e-12);
}
