// Dense LRNNs on a constant input in IEEE, p-bit and cast-model arithmetic; Brent's cycle detection.
#include "statetrack/proofs/periodicity.hpp"

#include <Eigen/Eigenvalues>
#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "brent.hpp"
#include "same_bits.hpp"
#include "statetrack/automata/error.hpp"

namespace statetrack::proofs {

std::string Arithmetic::name() const {
    switch (kind) {
        case Kind::fp16: return "fp16";
        case Kind::bf16: return "bf16";
        case Kind::fp32: return "fp32";
        case Kind::fp64: return "fp64";
        case Kind::bits: return fmt::format("bits:{}", bits);
        case Kind::grid: return fmt::format("grid:{}:{}", bits, grid_bound);
    }
    return "?";
}

Arithmetic parse_arithmetic(const std::string& text) {
    using K = Arithmetic::Kind;
    if (text == "fp16") return {K::fp16, 11};
    if (text == "bf16") return {K::bf16, 8};
    if (text == "fp32") return {K::fp32, 24};
    if (text == "fp64") return {K::fp64, 53};
    auto number = [&](const std::string& s, unsigned lo, unsigned hi) {
        unsigned v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
            throw InputError("--precisions", text, fmt::format("expected an integer in {}..{}", lo, hi));
        return v;
    };
    if (text.rfind("bits:", 0) == 0) return {K::bits, number(text.substr(5), 2, 113)};
    if (text.rfind("grid:", 0) == 0) {
        const std::string rest = text.substr(5);
        const auto colon = rest.find(':');
        Arithmetic a{K::grid, number(rest.substr(0, colon), 1, 24)};
        if (colon != std::string::npos) a.grid_bound = number(rest.substr(colon + 1), 1, 1024);
        return a;
    }
    throw InputError("--precisions", text, "unknown arithmetic (fp16, bf16, fp32, fp64, bits:P, grid:F[:BOUND])");
}

bool Periodicity::outputs_constant_on_cycle() const {
    for (auto o : cycle_outputs)
        if (o != cycle_outputs.front()) return false;
    return true;
}

namespace {

// The model's parameters in one arithmetic, and its step.
template <class T>
struct Typed {
    struct Layer {
        std::vector<T> h0, readout;
        std::vector<std::vector<T>> A, B;  // A row-major
        std::size_t n = 0;
    };
    std::vector<Layer> layers;
};

template <class T>
T from_double(double x) {
    if constexpr (std::is_same_v<T, lrnn::MpfrFloat>) {
        T r;
        mpfr_set_d(r.get(), x, MPFR_RNDN);
        return r;
    } else {
        return T(x);
    }
}

template <class T>
Typed<T> typed(const DenseLrnn& m) {
    Typed<T> t;
    auto vec = [](const Eigen::VectorXd& v) {
        std::vector<T> out;
        for (Eigen::Index i = 0; i < v.size(); ++i) out.push_back(from_double<T>(v[i]));
        return out;
    };
    for (const auto& l : m.layers) {
        typename Typed<T>::Layer tl;
        tl.n = std::size_t(l.h0.size());
        tl.h0 = vec(l.h0);
        tl.readout = vec(l.readout);
        for (const auto& a : l.A) {
            std::vector<T> flat;
            for (Eigen::Index i = 0; i < a.rows(); ++i)
                for (Eigen::Index j = 0; j < a.cols(); ++j) flat.push_back(from_double<T>(a(i, j)));
            tl.A.push_back(std::move(flat));
        }
        for (const auto& b : l.B) tl.B.push_back(vec(b));
        t.layers.push_back(std::move(tl));
    }
    return t;
}

template <class T>
struct DenseState {
    std::vector<std::vector<T>> h;
    std::vector<std::uint8_t> out;
};

// IEEE / p-bit: every product and every sum rounds (row by row, left to right).
template <class T>
void step(const Typed<T>& m, DenseState<T>& s) {
    for (std::size_t l = 0; l < m.layers.size(); ++l) {
        const auto& L = m.layers[l];
        const std::size_t x = l == 0 ? 0 : s.out[l - 1];
        const auto& A = L.A[x];
        std::vector<T> next(L.n);
        for (std::size_t i = 0; i < L.n; ++i) {
            T acc = T(0);
            for (std::size_t j = 0; j < L.n; ++j) acc = T(acc + T(A[i * L.n + j] * s.h[l][j]));
            next[i] = T(acc + L.B[x][i]);
        }
        T score = T(0);
        for (std::size_t i = 0; i < L.n; ++i) score = T(score + T(L.readout[i] * next[i]));
        s.h[l] = std::move(next);
        s.out[l] = T(0) < score ? 1 : 0;
    }
}

// The cast model: values k 2^-f stored as k; exact products need 128 bits (|k| < 2^35).
__extension__ typedef __int128 Wide;
struct Grid {
    unsigned f;
    std::int64_t bound;  // in units of 2^-f
    std::int64_t saturate(Wide k) const { return std::int64_t(k > bound ? bound : k < -bound ? -bound : k); }
    // nearest element of D to x 2^-f (x in units of 2^-f), the smaller one on ties
    std::int64_t cast_double(double x) const {
        const double scaled = std::ldexp(x, int(f));
        return saturate(Wide(std::ceil(scaled - 0.5)));
    }
    // nearest element to p 2^-2f (an exact product sum), ties to the smaller
    std::int64_t cast_product(Wide p) const {
        const Wide one = Wide(1) << f, half = one >> 1;
        Wide num = p - half;  // ceil(num / one)
        Wide q = num / one;
        if (num % one != 0 && num > 0) ++q;
        return saturate(q);
    }
};

struct GridModel {
    Grid g;
    Typed<std::int64_t> m;
};

void step_grid(const GridModel& gm, DenseState<std::int64_t>& s) {
    for (std::size_t l = 0; l < gm.m.layers.size(); ++l) {
        const auto& L = gm.m.layers[l];
        const std::size_t x = l == 0 ? 0 : s.out[l - 1];
        const auto& A = L.A[x];
        std::vector<std::int64_t> next(L.n);
        for (std::size_t i = 0; i < L.n; ++i) {
            Wide acc = 0;
            for (std::size_t j = 0; j < L.n; ++j) acc += Wide(A[i * L.n + j]) * s.h[l][j];
            next[i] = gm.g.saturate(Wide(gm.g.cast_product(acc)) + L.B[x][i]);
        }
        Wide score = 0;
        for (std::size_t i = 0; i < L.n; ++i) score += Wide(L.readout[i]) * next[i];
        s.h[l] = std::move(next);
        s.out[l] = score > 0 ? 1 : 0;
    }
}

GridModel grid_model(const DenseLrnn& model, const Arithmetic& a) {
    GridModel gm{Grid{a.bits, std::int64_t(a.grid_bound) << a.bits}, {}};
    auto vec = [&](const Eigen::VectorXd& v) {
        std::vector<std::int64_t> out;
        for (Eigen::Index i = 0; i < v.size(); ++i) out.push_back(gm.g.cast_double(v[i]));
        return out;
    };
    for (const auto& l : model.layers) {
        Typed<std::int64_t>::Layer tl;
        tl.n = std::size_t(l.h0.size());
        tl.h0 = vec(l.h0);
        tl.readout = vec(l.readout);
        for (const auto& A : l.A) {
            std::vector<std::int64_t> flat;
            for (Eigen::Index i = 0; i < A.rows(); ++i)
                for (Eigen::Index j = 0; j < A.cols(); ++j) flat.push_back(gm.g.cast_double(A(i, j)));
            tl.A.push_back(std::move(flat));
        }
        for (const auto& b : l.B) tl.B.push_back(vec(b));
        gm.m.layers.push_back(std::move(tl));
    }
    return gm;
}

template <class T>
bool same_prefix(const DenseState<T>& a, const DenseState<T>& b, std::size_t layers) {
    for (std::size_t l = 0; l < layers; ++l) {
        if (a.out[l] != b.out[l]) return false;
        for (std::size_t i = 0; i < a.h[l].size(); ++i)
            if (!detail::same_bits(a.h[l][i], b.h[l][i])) return false;
    }
    return true;
}

template <>
bool same_prefix(const DenseState<std::int64_t>& a, const DenseState<std::int64_t>& b, std::size_t layers) {
    for (std::size_t l = 0; l < layers; ++l)
        if (a.out[l] != b.out[l] || a.h[l] != b.h[l]) return false;
    return true;
}

// Brent: lambda, then mu; then one pass over the cycle for the per-layer periods and the outputs.
template <class T, class Step>
Periodicity brent(DenseState<T> start, Step advance, std::size_t max_steps) {
    Periodicity p;
    const std::size_t L = start.h.size();
    auto same = [&](const DenseState<T>& a, const DenseState<T>& b) { return same_prefix(a, b, L); };
    DenseState<T> tortoise = start, hare = start;
    advance(hare);
    std::size_t power = 1, lambda = 1, steps = 1;
    while (!same(tortoise, hare)) {
        if (steps >= max_steps) {
            p.steps = steps;
            return p;
        }
        if (power == lambda) {
            tortoise = hare;
            power *= 2;
            lambda = 0;
        }
        advance(hare);
        ++lambda;
        ++steps;
    }
    auto [mu, x] = detail::pre_period(start, lambda, advance, same);
    p.found = true;
    p.pre_period = mu;
    p.period = lambda;
    // x is the state at index mu; walk the cycle once.
    p.layer_periods.assign(L, 0);
    DenseState<T> z = x;
    for (std::size_t k = 1; k <= lambda; ++k) {
        advance(z);
        if (p.cycle_outputs.size() < 4096) p.cycle_outputs.push_back(z.out.back());
        for (std::size_t l = 0; l < L; ++l)
            if (p.layer_periods[l] == 0 && same_prefix(z, x, l + 1)) p.layer_periods[l] = k;
    }
    p.steps = steps + 2 * mu + 2 * lambda;
    return p;
}

template <class T>
Periodicity periodicity_as(const DenseLrnn& model, std::size_t max_steps) {
    const Typed<T> m = typed<T>(model);
    DenseState<T> s;
    for (const auto& l : m.layers) {
        s.h.push_back(l.h0);
        s.out.push_back(0);
    }
    return brent(s, [&](DenseState<T>& x) { step(m, x); }, max_steps);
}

}  // namespace

Periodicity find_period(const DenseLrnn& model, const Arithmetic& a, std::size_t max_steps) {
    using K = Arithmetic::Kind;
    switch (a.kind) {
        case K::fp16: return periodicity_as<lrnn::Half>(model, max_steps);
        case K::bf16: return periodicity_as<lrnn::BFloat16>(model, max_steps);
        case K::fp32: return periodicity_as<float>(model, max_steps);
        case K::fp64: return periodicity_as<double>(model, max_steps);
        case K::bits: {
            lrnn::ScopedPrecision scope(a.bits);
            return periodicity_as<lrnn::MpfrFloat>(model, max_steps);
        }
        case K::grid: {
            const GridModel gm = grid_model(model, a);
            DenseState<std::int64_t> s;
            for (const auto& l : gm.m.layers) {
                s.h.push_back(l.h0);
                s.out.push_back(0);
            }
            return brent(s, [&](DenseState<std::int64_t>& x) { step_grid(gm, x); }, max_steps);
        }
    }
    return {};
}

std::vector<std::vector<std::complex<double>>> cast_spectra(const DenseLrnn& model, const Arithmetic& a) {
    std::vector<std::vector<std::complex<double>>> out;
    auto cast = [&](double x) -> double {
        using K = Arithmetic::Kind;
        switch (a.kind) {
            case K::fp16: return double(float(lrnn::Half(x)));
            case K::bf16: return double(float(lrnn::BFloat16(x)));
            case K::fp32: return double(float(x));
            case K::fp64: return x;
            case K::bits: {
                lrnn::ScopedPrecision scope(a.bits);
                return mpfr_get_d(from_double<lrnn::MpfrFloat>(x).get(), MPFR_RNDN);
            }
            case K::grid: {
                const Grid g{a.bits, std::int64_t(a.grid_bound) << a.bits};
                return std::ldexp(double(g.cast_double(x)), -int(a.bits));
            }
        }
        return x;
    };
    for (const auto& l : model.layers)
        for (const auto& A : l.A) {
            const Eigen::MatrixXd C = A.unaryExpr(cast);
            Eigen::EigenSolver<Eigen::MatrixXd> es(C, false);
            std::vector<std::complex<double>> ev;
            for (Eigen::Index i = 0; i < es.eigenvalues().size(); ++i) ev.push_back(es.eigenvalues()[i]);
            out.push_back(std::move(ev));
        }
    return out;
}

Freeze freeze_length(double a, const Arithmetic& arithmetic, std::size_t max_steps) {
    Freeze f;
    if (a == 1 && arithmetic.kind == Arithmetic::Kind::fp64) {
        // Every integer up to 2^53 is a double, so h_t = t exactly until t = 2^53, where
        // 2^53 + 1 rounds back to 2^53 (ties to even). Checked at the boundary, not iterated.
        const double top = 0x1p53;
        volatile double below = top - 1, at = top;
        if (below + 1 == top && at + 1 == top) {
            f.length = std::size_t(1) << 53;
            f.period = 1;
            f.analytic = true;
        }
        return f;
    }
    DenseLrnn m;
    DenseLayer l;
    l.h0 = Eigen::VectorXd::Zero(1);
    l.A = {Eigen::MatrixXd::Constant(1, 1, a)};
    l.B = {Eigen::VectorXd::Ones(1)};
    l.readout = Eigen::VectorXd::Ones(1);
    m.layers.push_back(l);
    const Periodicity p = find_period(m, arithmetic, max_steps);
    if (!p.found) return f;
    f.period = p.period;
    if (p.period == 1) f.length = p.pre_period;
    return f;
}

}  // namespace statetrack::proofs
