// Proposition 1: norms of GH products (exact), factorizations (SVD + Householder, permutations),
// and the eigenvalue claims.
#include <Eigen/Eigenvalues>
#include <Eigen/SVD>
#include <boost/multiprecision/gmp.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "statetrack/proofs/theorems.hpp"

namespace statetrack::proofs {

namespace {

using Q = boost::multiprecision::mpq_rational;
using QMatrix = std::vector<std::vector<Q>>;

QMatrix exact_product(const std::vector<Factor>& factors, std::size_t n) {
    QMatrix m(n, std::vector<Q>(n, Q(0)));
    for (std::size_t i = 0; i < n; ++i) m[i][i] = 1;
    for (const auto& f : factors) {  // m <- m G
        std::vector<Q> v(n);
        Q dot = 0;
        for (std::size_t i = 0; i < n; ++i) {
            v[i] = Q(f.v[Eigen::Index(i)]);
            dot += v[i] * v[i];
        }
        const Q c = Q(f.beta) / dot;
        for (std::size_t r = 0; r < n; ++r) {
            Q mv = 0;
            for (std::size_t i = 0; i < n; ++i) mv += m[r][i] * v[i];
            for (std::size_t i = 0; i < n; ++i) m[r][i] -= c * mv * v[i];
        }
    }
    return m;
}

Q determinant(QMatrix a) {
    const std::size_t n = a.size();
    Q det = 1;
    for (std::size_t c = 0; c < n; ++c) {
        std::size_t p = c;
        while (p < n && a[p][c] == 0) ++p;
        if (p == n) return 0;
        if (p != c) {
            std::swap(a[p], a[c]);
            det = -det;
        }
        det *= a[c][c];
        for (std::size_t r = c + 1; r < n; ++r) {
            const Q f = a[r][c] / a[c][c];
            for (std::size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
        }
    }
    return det;
}

std::mt19937_64& rng_of(std::uint64_t seed) {
    thread_local std::mt19937_64 rng;
    rng.seed(seed);
    return rng;
}

double uniform(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * double(rng() >> 11) * 0x1p-53; }

Factor random_factor(std::mt19937_64& rng, std::size_t n, double beta_lo, double beta_hi) {
    Factor f;
    f.v.resize(Eigen::Index(n));
    std::normal_distribution<double> normal;
    do {
        for (std::size_t i = 0; i < n; ++i) f.v[Eigen::Index(i)] = normal(rng);
    } while (f.v.norm() < 1e-3);
    f.v.normalize();
    f.beta = uniform(rng, beta_lo, beta_hi);
    return f;
}

}  // namespace

Eigen::MatrixXd product(const std::vector<Factor>& factors, std::size_t n) {
    Eigen::MatrixXd m = Eigen::MatrixXd::Identity(Eigen::Index(n), Eigen::Index(n));
    for (const auto& f : factors) m = m * (Eigen::MatrixXd::Identity(Eigen::Index(n), Eigen::Index(n)) - f.beta / f.v.squaredNorm() * f.v * f.v.transpose());
    return m;
}

bool norm_at_most_one_exact(const std::vector<Factor>& factors, std::size_t n) {
    const QMatrix m = exact_product(factors, n);
    QMatrix s(n, std::vector<Q>(n));
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            Q x = i == j ? Q(1) : Q(0);
            for (std::size_t k = 0; k < n; ++k) x -= m[k][i] * m[k][j];
            s[i][j] = x;
        }
    for (std::size_t mask = 1; mask < (std::size_t(1) << n); ++mask) {
        std::vector<std::size_t> idx;
        for (std::size_t i = 0; i < n; ++i)
            if (mask >> i & 1) idx.push_back(i);
        QMatrix sub(idx.size(), std::vector<Q>(idx.size()));
        for (std::size_t a = 0; a < idx.size(); ++a)
            for (std::size_t b = 0; b < idx.size(); ++b) sub[a][b] = s[idx[a]][idx[b]];
        if (determinant(sub) < 0) return false;
    }
    return true;
}

std::vector<Factor> factor_orthogonal(const Eigen::MatrixXd& q) {
    const Eigen::Index n = q.rows();
    std::vector<Factor> hs;  // H_k ... H_1 Q = D, so Q = H_1 ... H_k D
    Eigen::MatrixXd r = q;
    for (Eigen::Index k = 0; k + 1 < n; ++k) {
        Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
        x.tail(n - k) = r.col(k).tail(n - k);
        Eigen::VectorXd v = x;
        v[k] -= x.norm();  // reflect x onto +|x| e_k
        if (v.norm() <= 1e-14) continue;
        const Factor f{v, 2.0};
        r = (Eigen::MatrixXd::Identity(n, n) - 2.0 / v.squaredNorm() * v * v.transpose()) * r;
        hs.push_back(f);
    }
    if (r(n - 1, n - 1) < 0) hs.push_back(Factor{Eigen::VectorXd::Unit(n, n - 1), 2.0});
    return hs;  // the reflections are symmetric: Q = H_1 ... H_k (D folded in as the last one)
}

std::vector<Factor> factor_contraction(const Eigen::MatrixXd& m) {
    const Eigen::Index n = m.rows();
    Eigen::JacobiSVD<Eigen::MatrixXd> svd(m, Eigen::ComputeFullU | Eigen::ComputeFullV);
    std::vector<Factor> out = factor_orthogonal(svd.matrixU());
    for (Eigen::Index i = 0; i < n; ++i) {
        const double sigma = std::min(1.0, svd.singularValues()[i]);
        if (sigma != 1.0) out.push_back(Factor{Eigen::VectorXd::Unit(n, i), 1.0 - sigma});
    }
    const std::vector<Factor> vt = factor_orthogonal(svd.matrixV().transpose());
    out.insert(out.end(), vt.begin(), vt.end());
    return out;
}

std::vector<Factor> factor_permutation(const std::vector<std::size_t>& p) {
    // P e_i = e_{p[i]}. Undo cycles by swaps from the right: P = S_1 ... S_k.
    const std::size_t n = p.size();
    std::vector<std::size_t> cur = p;  // cur = current S_k^-1 ... applied
    std::vector<Factor> swaps;
    for (std::size_t i = 0; i < n; ++i) {
        while (cur[i] != i) {
            const std::size_t j = cur[i];
            Eigen::VectorXd v = Eigen::VectorXd::Zero(Eigen::Index(n));
            v[Eigen::Index(i)] = 1;
            v[Eigen::Index(j)] = -1;
            swaps.push_back(Factor{v, 2.0});
            // cur <- cur o (i j)
            std::swap(cur[i], cur[j]);
        }
    }
    // P S_1 ... S_k = I, so P = S_k ... S_1.
    std::reverse(swaps.begin(), swaps.end());
    return swaps;
}

double reconstruction_error(const std::vector<Factor>& factors, const Eigen::MatrixXd& target) {
    const std::size_t n = std::size_t(target.rows());
    const QMatrix m = exact_product(factors, n);
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j)
            worst = std::max(worst, std::abs((m[i][j] - Q(target(Eigen::Index(i), Eigen::Index(j)))).convert_to<double>()));
    return worst;
}

namespace {
std::vector<std::complex<double>> eigen_of(const std::vector<Factor>& factors, std::size_t n) {
    Eigen::EigenSolver<Eigen::MatrixXd> es(product(factors, n), false);
    std::vector<std::complex<double>> ev;
    for (Eigen::Index i = 0; i < es.eigenvalues().size(); ++i) ev.push_back(es.eigenvalues()[i]);
    return ev;
}
}  // namespace

EigenClaim check_open_interval_claim(const std::vector<Factor>& factors, std::size_t n) {
    EigenClaim c;
    for (const auto& l : eigen_of(factors, n)) {
        c.largest_imaginary = std::max(c.largest_imaginary, std::abs(l.imag()));
        if (std::abs(l - 1.0) < 1e-7) continue;
        c.largest_modulus_not_one = std::max(c.largest_modulus_not_one, std::abs(l));
        if (std::abs(l) >= 1 - 1e-9) {
            c.holds = false;
            c.violation = l;
        }
    }
    return c;
}

EigenClaim check_real_unit_claim(const std::vector<Factor>& factors, std::size_t n) {
    EigenClaim c;
    for (const auto& l : eigen_of(factors, n)) {
        c.largest_imaginary = std::max(c.largest_imaginary, std::abs(l.imag()));
        if (std::abs(l - 1.0) > 1e-7) c.largest_modulus_not_one = std::max(c.largest_modulus_not_one, std::abs(l));
        if (std::abs(l.imag()) > 1e-6 || l.real() < -1e-9 || l.real() > 1 + 1e-9) {
            c.holds = false;
            c.violation = l;
        }
    }
    return c;
}

TheoremReport prove_prop1(const ProveOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    TheoremReport r;
    r.name = "prop1";
    r.statement = "GH products: norm <= 1; every norm-1 matrix is a product of <= 3n factors; eigenvalue claims for (-1,1] and [0,1]";
    auto& rng = rng_of(options.seed);
    const std::size_t trials = options.quick ? 40 : 400;
    bool holds = true;
    // 1. norms, exactly.
    std::size_t norm_ok = 0;
    double max_norm = 0;
    for (std::size_t t = 0; t < trials; ++t) {
        const std::size_t n = 2 + t % 3, k = 1 + t % 6;
        std::vector<Factor> fs;
        for (std::size_t i = 0; i < k; ++i) fs.push_back(random_factor(rng, n, 0, 2));
        if (t % 7 == 0) fs.push_back(Factor{fs[0].v, 2.0});  // a reflection: norm exactly 1
        norm_ok += norm_at_most_one_exact(fs, n);
        Eigen::JacobiSVD<Eigen::MatrixXd> svd(product(fs, n));
        max_norm = std::max(max_norm, svd.singularValues()[0]);
    }
    const bool norms = norm_ok == trials;
    holds = holds && norms;
    r.lines.push_back(fmt::format("1. |N| <= 1 proved exactly (rational I - N^T N positive semidefinite) for {}/{} random products "
                                  "(n = 2..4, k = 1..7, beta in [0, 2]); largest fp64 norm {:.17g}",
                                  norm_ok, trials, max_norm));
    // 2. factorizations.
    double err_contraction = 0, err_orth = 0;
    std::size_t max_contraction = 0, max_orth = 0, max_swaps_excess = 0;
    bool counts_ok = true;
    for (std::size_t t = 0; t < trials; ++t) {
        const std::size_t n = 2 + t % 4;
        const Eigen::Index N = Eigen::Index(n);
        Eigen::MatrixXd m(N, N);
        for (Eigen::Index i = 0; i < N; ++i)
            for (Eigen::Index j = 0; j < N; ++j) m(i, j) = uniform(rng, -1, 1);
        Eigen::JacobiSVD<Eigen::MatrixXd> svd(m, Eigen::ComputeFullU | Eigen::ComputeFullV);
        m /= svd.singularValues()[0] * uniform(rng, 1, 1.5);  // norm in (2/3, 1]
        const auto fc = factor_contraction(m);
        counts_ok = counts_ok && fc.size() <= 3 * n;
        max_contraction = std::max(max_contraction, fc.size());
        err_contraction = std::max(err_contraction, reconstruction_error(fc, m));
        const Eigen::MatrixXd q = svd.matrixU();
        const auto fo = factor_orthogonal(q);
        counts_ok = counts_ok && fo.size() <= n;
        max_orth = std::max(max_orth, fo.size());
        err_orth = std::max(err_orth, reconstruction_error(fo, q));
        std::vector<std::size_t> p(n);
        for (std::size_t i = 0; i < n; ++i) p[i] = i;
        std::shuffle(p.begin(), p.end(), rng);
        std::size_t moved = 0, cycles = 0;
        std::vector<bool> seen(n);
        for (std::size_t i = 0; i < n; ++i) {
            if (seen[i] || p[i] == i) continue;
            ++cycles;
            for (std::size_t j = i; !seen[j]; j = p[j]) seen[j] = true, ++moved;
        }
        Eigen::MatrixXd pm = Eigen::MatrixXd::Zero(N, N);
        for (std::size_t i = 0; i < n; ++i) pm(Eigen::Index(p[i]), Eigen::Index(i)) = 1;
        const auto fp = factor_permutation(p);
        if (fp.size() != moved - cycles || reconstruction_error(fp, pm) != 0) counts_ok = false;
        max_swaps_excess = std::max(max_swaps_excess, fp.size() + 1 > n ? fp.size() + 1 - n : 0);
    }
    const bool factorizations = counts_ok && err_contraction < 1e-12 && err_orth < 1e-12 && max_swaps_excess == 0;
    holds = holds && factorizations;
    r.lines.push_back(fmt::format("2. {} random contractions (n = 2..5): SVD + Householder into at most {} factors (bound 3n), exact "
                                  "reconstruction error {:.2e}; orthogonal factors into at most {} reflections (bound n), error {:.2e}; "
                                  "permutations into exactly p - c swaps (<= n - 1), reconstructed exactly: {}",
                                  trials, max_contraction, err_contraction, max_orth, err_orth, counts_ok ? "yes" : "NO"));
    // 3. eigenvalues.
    double open_max = 0, k2_imag = 0, k3_max = 0;
    std::size_t k3_complex = 0;
    bool open_ok = true, k2_ok = true, k3_below_one = true;
    const std::size_t eig_trials = options.quick ? 2000 : 50000;
    for (std::size_t t = 0; t < eig_trials; ++t) {
        const std::size_t n = 2 + t % 3;
        std::vector<Factor> fs;
        for (std::size_t i = 0; i < 1 + t % 4; ++i) fs.push_back(random_factor(rng, n, 0, 1.999999));
        const auto c = check_open_interval_claim(fs, n);
        open_ok = open_ok && c.holds;
        open_max = std::max(open_max, c.largest_modulus_not_one);
        std::vector<Factor> two{random_factor(rng, n, 0, 1), random_factor(rng, n, 0, 1)};
        const auto c2 = check_real_unit_claim(two, n);
        k2_ok = k2_ok && c2.holds;
        k2_imag = std::max(k2_imag, c2.largest_imaginary);
        std::vector<Factor> three{random_factor(rng, 2, 0, 1), random_factor(rng, 2, 0, 1), random_factor(rng, 2, 0, 1)};
        for (const auto& l : eigen_of(three, 2)) {
            if (std::abs(l.imag()) > 1e-9) {
                ++k3_complex;
                k3_max = std::max(k3_max, std::abs(l));
                if (std::abs(l) >= 1) k3_below_one = false;
            }
        }
    }
    holds = holds && open_ok && k2_ok && k3_below_one && k3_complex > 0;
    r.lines.push_back(fmt::format("3. {} random products with beta in [0, 2): eigenvalues are 1 or of modulus < 1: {} (largest other modulus {:.6f}); "
                                  "beta in [0, 1], k = 2: real in [0, 1]: {} (largest |imaginary part| {:.1e}); k = 3 in 2-D: {} products with "
                                  "non-real eigenvalues, largest modulus {:.4f} (< 1: {})",
                                  eig_trials, open_ok ? "yes" : "NO", open_max, k2_ok ? "yes" : "NO", k2_imag, k3_complex, k3_max,
                                  k3_below_one ? "yes" : "NO"));
    r.holds = holds;
    r.details = {{"norms", {{"trials", trials}, {"proved_exactly", norm_ok}, {"max_fp64_norm", max_norm}}},
                 {"factorizations",
                  {{"trials", trials}, {"max_factors_contraction", max_contraction}, {"reconstruction_error_contraction", err_contraction},
                   {"max_reflections_orthogonal", max_orth}, {"reconstruction_error_orthogonal", err_orth}, {"counts_within_bounds", counts_ok}}},
                 {"eigenvalues",
                  {{"trials", eig_trials}, {"open_interval_claim", open_ok}, {"open_interval_max_modulus", open_max}, {"k2_real_unit", k2_ok},
                   {"k2_max_imaginary", k2_imag}, {"k3_nonreal_products", k3_complex}, {"k3_max_modulus_nonreal", k3_max}}}};
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

}  // namespace statetrack::proofs
