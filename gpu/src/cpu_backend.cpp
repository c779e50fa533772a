// The CPU reference: forward and backward of the model, written out by hand (llm.c style).
// Read forward_pass() top to bottom, then backward_pass() bottom to top: each step of one is
// mirrored by the other. Eigen does the matrix products; the recurrences are plain loops.
#include "statetrack/gpu/cpu_backend.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>

#include "statetrack/automata/error.hpp"

namespace statetrack::gpu {

namespace {

constexpr double norm_eps = 1e-6;  // RMSNorm: 1 / sqrt(mean(x^2) + eps); L2: x / sqrt(sum(x^2) + eps)

template <class S>
using RowMat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class S>
Eigen::Map<RowMat<S>> mat(S* p, std::size_t rows, std::size_t cols) {
    return {p, Eigen::Index(rows), Eigen::Index(cols)};
}
template <class S>
Eigen::Map<const RowMat<S>> mat(const S* p, std::size_t rows, std::size_t cols) {
    return {p, Eigen::Index(rows), Eigen::Index(cols)};
}

template <class S> S sigmoid(S z) { return S(1) / (S(1) + std::exp(-z)); }
template <class S> S silu(S z) { return z * sigmoid(z); }
template <class S> S silu_grad(S z) { const S s = sigmoid(z); return s * (S(1) + z * (S(1) - s)); }
template <class S> S softplus(S z) { return z > S(20) ? z : std::log1p(std::exp(z)); }

// Where each activation lives in the workspace (offsets in scalars). Computed per batch shape.
struct LayerActs {
    std::size_t x_mid, xn1, r1;
    std::size_t pq, pk, pv, cq, ck, cv, q, k, v;  // projections, after the conv, after SiLU
    std::size_t qn, kn, qnorm, knorm, zbeta, beta;  // delta rule
    std::size_t zdt, delta, decay;                  // mamba
    std::size_t states, o, ro, on;
    std::size_t lstm_gates, lstm_c, lstm_h;
    std::size_t xn2, r2, ga, gu, hm;
};

struct Plan {
    std::size_t B, T, N, d, H, dh, F, m, C, K, wide;
    std::vector<std::size_t> lengths;  // word_length of each row: the recurrences stop there
    bool training;
    std::vector<std::size_t> x;  // residual streams: x[0] embeddings, x[l + 1] output of block l
    std::vector<LayerActs> layers;
    std::size_t xnf, rf, logits, dlogits, zeros;
    std::size_t g_x, g_xn, g_a, g_b, g_c, g_d, g_e, g_f, g_state, g_vec;  // backward scratch
    std::size_t total = 0;
};

Plan make_plan(const ModelConfig& c, const Batch& batch, bool training) {
    Plan p;
    check_batch(batch);
    p.B = batch.batch, p.T = batch.length, p.N = p.B * p.T;
    for (std::size_t b = 0; b < p.B; ++b) p.lengths.push_back(word_length(batch, b));
    p.d = c.d_model, p.H = c.heads, p.dh = c.head_dim(), p.F = c.factors, p.m = c.mlp_width(), p.C = c.classes;
    p.K = c.conv_kernel;
    p.wide = std::max({p.F * p.d, p.m, 4 * p.d, p.F * p.H});
    p.training = training;
    auto take = [&](std::size_t count) { const std::size_t at = p.total; p.total += count; return at; };
    const std::size_t N = p.N, d = p.d, Fd = p.F * p.d;
    const bool lstm = c.mixer == Mixer::lstm, mamba = c.mixer == Mixer::mamba;
    p.logits = take(N * p.C);  // first, so that logits() finds it after a training pass too
    p.x.push_back(take(N * d));
    for (std::size_t l = 0; l < c.layers; ++l) {
        LayerActs a{};
        a.xn1 = take(N * d), a.r1 = take(N);
        if (lstm) {
            a.lstm_gates = take(N * 4 * d), a.lstm_c = take(N * d), a.lstm_h = take(N * d);
        } else {
            a.pq = take(N * d), a.pk = take(N * Fd), a.pv = take(N * Fd);
            a.cq = take(N * d), a.ck = take(N * Fd), a.cv = take(N * Fd);
            a.q = take(N * d), a.k = take(N * Fd), a.v = take(N * Fd);
            if (mamba) {
                a.zdt = take(N * d), a.delta = take(N * d), a.decay = take(N * d);
            } else {
                a.qn = take(N * d), a.kn = take(N * Fd), a.qnorm = take(N * p.H), a.knorm = take(N * p.F * p.H);
                a.zbeta = take(N * p.F * p.H), a.beta = take(N * p.F * p.H);
            }
            // training keeps the state after every factor of every step; inference one per (b, head)
            a.states = take((training ? N * p.F : p.B) * p.H * p.dh * p.dh);
            a.o = take(N * d), a.ro = take(N * p.H), a.on = take(N * d);
        }
        a.x_mid = take(N * d);
        a.xn2 = take(N * d), a.r2 = take(N), a.ga = take(N * p.m), a.gu = take(N * p.m), a.hm = take(N * p.m);
        p.layers.push_back(a);
        p.x.push_back(take(N * d));
    }
    p.xnf = take(N * d), p.rf = take(N);
    p.zeros = take(p.dh * p.dh);
    if (training) {
        p.dlogits = take(N * p.C);
        p.g_x = take(N * d), p.g_xn = take(N * d);
        p.g_a = take(N * p.wide), p.g_b = take(N * p.wide), p.g_c = take(N * p.wide);
        p.g_d = take(N * p.wide), p.g_e = take(N * p.wide), p.g_f = take(N * p.wide);
        p.g_state = take(p.dh * p.dh), p.g_vec = take(8 * std::max(p.dh, 4 * d));
    }
    return p;
}

// ---- building blocks: forward and backward of each operation ----

// Y[N][out] = X[N][in] W^T (+ bias)
template <class S>
void linear_forward(const S* X, const S* W, const S* bias, S* Y, std::size_t N, std::size_t in, std::size_t out) {
    auto y = mat(Y, N, out);
    y.noalias() = mat(X, N, in) * mat(W, out, in).transpose();
    if (bias) y.rowwise() += mat(bias, 1, out).row(0);
}
// dX = dY W (or += when accumulate); dW += dY^T X; dbias += column sums of dY
template <class S>
void linear_backward(const S* X, const S* W, const S* dY, S* dX, S* dW, S* dbias, std::size_t N, std::size_t in,
                     std::size_t out, bool accumulate) {
    auto dy = mat(dY, N, out);
    if (dX) {
        if (accumulate) mat(dX, N, in).noalias() += dy * mat(W, out, in);
        else mat(dX, N, in).noalias() = dy * mat(W, out, in);
    }
    mat(dW, out, in).noalias() += dy.transpose() * mat(X, N, in);
    if (dbias) mat(dbias, 1, out).row(0) += dy.colwise().sum();
}

// Each row of `width` splits into groups of `group` normalised separately: y = g * x * r,
// r = 1 / sqrt(mean(x^2) + eps) per group (rinv holds r, rows * width / group values).
template <class S>
void rmsnorm_forward(const S* X, const S* g, S* Y, S* rinv, std::size_t rows, std::size_t width, std::size_t group) {
    const std::size_t groups = width / group;
    for (std::size_t n = 0; n < rows; ++n)
        for (std::size_t h = 0; h < groups; ++h) {
            const S* x = X + n * width + h * group;
            S ss = 0;
            for (std::size_t i = 0; i < group; ++i) ss += x[i] * x[i];
            const S r = S(1) / std::sqrt(ss / S(group) + S(norm_eps));
            rinv[n * groups + h] = r;
            for (std::size_t i = 0; i < group; ++i) Y[n * width + h * group + i] = g[h * group + i] * x[i] * r;
        }
}
// dX += r (g dy) - x r^3 sum(g dy x) / group; dg += dy x r
template <class S>
void rmsnorm_backward(const S* X, const S* g, const S* rinv, const S* dY, S* dX, S* dg, std::size_t rows,
                      std::size_t width, std::size_t group) {
    const std::size_t groups = width / group;
    for (std::size_t n = 0; n < rows; ++n)
        for (std::size_t h = 0; h < groups; ++h) {
            const std::size_t at = n * width + h * group;
            const S r = rinv[n * groups + h];
            S dot = 0;
            for (std::size_t i = 0; i < group; ++i) dot += g[h * group + i] * dY[at + i] * X[at + i];
            for (std::size_t i = 0; i < group; ++i) {
                dX[at + i] += r * g[h * group + i] * dY[at + i] - X[at + i] * r * r * r * dot / S(group);
                dg[h * group + i] += dY[at + i] * X[at + i] * r;
            }
        }
}

// y = x / sqrt(sum(x^2) + eps) per group; norms keeps the denominators.
template <class S>
void l2norm_forward(const S* X, S* Y, S* norms, std::size_t rows, std::size_t width, std::size_t group) {
    const std::size_t groups = width / group;
    for (std::size_t n = 0; n < rows; ++n)
        for (std::size_t h = 0; h < groups; ++h) {
            const std::size_t at = n * width + h * group;
            S ss = 0;
            for (std::size_t i = 0; i < group; ++i) ss += X[at + i] * X[at + i];
            const S nrm = std::sqrt(ss + S(norm_eps));
            norms[n * groups + h] = nrm;
            for (std::size_t i = 0; i < group; ++i) Y[at + i] = X[at + i] / nrm;
        }
}
// dx = (dy - y (y . dy)) / norm, in place on dY
template <class S>
void l2norm_backward(const S* Y, const S* norms, S* dY, std::size_t rows, std::size_t width, std::size_t group) {
    const std::size_t groups = width / group;
    for (std::size_t n = 0; n < rows; ++n)
        for (std::size_t h = 0; h < groups; ++h) {
            const std::size_t at = n * width + h * group;
            S dot = 0;
            for (std::size_t i = 0; i < group; ++i) dot += Y[at + i] * dY[at + i];
            for (std::size_t i = 0; i < group; ++i) dY[at + i] = (dY[at + i] - Y[at + i] * dot) / norms[n * groups + h];
        }
}

// Depthwise causal conv over time within each word: y_t[c] = sum_j w[c][j] x_{t-K+1+j}[c].
template <class S>
void conv_forward(const S* X, const S* w, S* Y, std::size_t B, std::size_t T, std::size_t C, std::size_t K) {
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t)
            for (std::size_t c = 0; c < C; ++c) {
                S acc = 0;
                for (std::size_t j = 0; j < K; ++j)
                    if (t + j + 1 >= K) acc += w[c * K + j] * X[(b * T + t + j + 1 - K) * C + c];
                Y[(b * T + t) * C + c] = acc;
            }
}
template <class S>
void conv_backward(const S* X, const S* w, const S* dY, S* dX, S* dw, std::size_t B, std::size_t T, std::size_t C,
                   std::size_t K) {
    std::fill(dX, dX + B * T * C, S(0));
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t)
            for (std::size_t c = 0; c < C; ++c) {
                const S g = dY[(b * T + t) * C + c];
                for (std::size_t j = 0; j < K; ++j)
                    if (t + j + 1 >= K) {
                        const std::size_t src = (b * T + t + j + 1 - K) * C + c;
                        dw[c * K + j] += g * X[src];
                        dX[src] += w[c * K + j] * g;
                    }
            }
}

template <class S>
void silu_forward(const S* X, S* Y, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) Y[i] = silu(X[i]);
}
// dY *= silu'(X), in place
template <class S>
void silu_backward(const S* X, S* dY, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) dY[i] *= silu_grad(X[i]);
}

// ---- the recurrences ----
// State of one head: S[r][c] (key index r, value index c), row-major dh x dh; output o = S^T q.

// Rows past each word's length of a [N][width] array set to 0: the recurrences stop at the word's
// end (Batch), and their outputs there are defined as 0.
template <class S>
void zero_past_lengths(const Plan& p, S* rows, std::size_t width) {
    for (std::size_t b = 0; b < p.B; ++b)
        std::fill(rows + (b * p.T + p.lengths[b]) * width, rows + (b + 1) * p.T * width, S(0));
}

template <class S>
struct StateIndex {
    const Plan& p;
    S* states;
    S* zeros;
    // training: the state after factor j at step t of (b, h); inference: one running state per (b, h)
    S* after(std::size_t b, std::size_t t, std::size_t j, std::size_t h) const {
        const std::size_t n2 = p.dh * p.dh;
        if (!p.training) return states + (b * p.H + h) * n2;
        return states + (((b * p.T + t) * p.F + j) * p.H + h) * n2;
    }
    S* before(std::size_t b, std::size_t t, std::size_t j, std::size_t h) const {
        if (!p.training) return after(b, t, j, h);
        if (j > 0) return after(b, t, j - 1, h);
        if (t > 0) return after(b, t - 1, p.F - 1, h);
        return zeros;
    }
};

// Delta rule, F factors per step: u = v - S^T k; S <- S + beta k u^T  (= (I - beta k k^T) S + beta k v^T).
template <class S>
void delta_forward(const Plan& p, const LayerActs& a, S* ws) {
    const std::size_t dh = p.dh, Fd = p.F * p.d, FH = p.F * p.H;
    StateIndex<S> at{p, ws + a.states, ws + p.zeros};
    if (!p.training) std::fill(ws + a.states, ws + a.states + p.B * p.H * dh * dh, S(0));
    std::vector<S> u(dh);
    zero_past_lengths(p, ws + a.o, p.d);
    for (std::size_t b = 0; b < p.B; ++b)
        for (std::size_t h = 0; h < p.H; ++h)
            for (std::size_t t = 0; t < p.lengths[b]; ++t) {
                const std::size_t n = b * p.T + t;
                for (std::size_t j = 0; j < p.F; ++j) {
                    const S* k = ws + a.kn + n * Fd + (j * p.H + h) * dh;
                    const S* v = ws + a.v + n * Fd + (j * p.H + h) * dh;
                    const S beta = ws[a.beta + n * FH + j * p.H + h];
                    const S* prev = at.before(b, t, j, h);
                    S* next = at.after(b, t, j, h);
                    for (std::size_t c = 0; c < dh; ++c) {
                        S acc = v[c];
                        for (std::size_t r = 0; r < dh; ++r) acc -= prev[r * dh + c] * k[r];
                        u[c] = acc;
                    }
                    for (std::size_t r = 0; r < dh; ++r)
                        for (std::size_t c = 0; c < dh; ++c) next[r * dh + c] = prev[r * dh + c] + beta * k[r] * u[c];
                }
                const S* St = at.after(b, t, p.F - 1, h);
                const S* q = ws + a.qn + n * p.d + h * dh;
                S* o = ws + a.o + n * p.d + h * dh;
                for (std::size_t c = 0; c < dh; ++c) {
                    S acc = 0;
                    for (std::size_t r = 0; r < dh; ++r) acc += St[r * dh + c] * q[r];
                    o[c] = acc;
                }
            }
}

// Reverse pass of delta_forward. In: dO. Out (overwritten): dq, dk, dv, dbeta.
template <class S>
void delta_backward(const Plan& p, const LayerActs& a, S* ws, const S* dO, S* dq, S* dk, S* dv, S* dbeta) {
    const std::size_t dh = p.dh, Fd = p.F * p.d, FH = p.F * p.H;
    StateIndex<S> at{p, ws + a.states, ws + p.zeros};
    S* dS = ws + p.g_state;
    S* u = ws + p.g_vec;
    S* du = u + dh;
    zero_past_lengths(p, dq, p.d), zero_past_lengths(p, dk, Fd), zero_past_lengths(p, dv, Fd);
    zero_past_lengths(p, dbeta, FH);
    for (std::size_t b = 0; b < p.B; ++b)
        for (std::size_t h = 0; h < p.H; ++h) {
            std::fill(dS, dS + dh * dh, S(0));
            for (std::size_t t = p.lengths[b]; t-- > 0;) {
                const std::size_t n = b * p.T + t;
                // o = S_t^T q
                const S* St = at.after(b, t, p.F - 1, h);
                const S* q = ws + a.qn + n * p.d + h * dh;
                const S* g = dO + n * p.d + h * dh;
                for (std::size_t r = 0; r < dh; ++r) {
                    S acc = 0;
                    for (std::size_t c = 0; c < dh; ++c) {
                        acc += St[r * dh + c] * g[c];
                        dS[r * dh + c] += q[r] * g[c];
                    }
                    dq[n * p.d + h * dh + r] = acc;
                }
                for (std::size_t j = p.F; j-- > 0;) {
                    const std::size_t kv = n * Fd + (j * p.H + h) * dh;
                    const S* k = ws + a.kn + kv;
                    const S* v = ws + a.v + kv;
                    const S beta = ws[a.beta + n * FH + j * p.H + h];
                    const S* prev = at.before(b, t, j, h);
                    for (std::size_t c = 0; c < dh; ++c) {
                        S acc = v[c];
                        for (std::size_t r = 0; r < dh; ++r) acc -= prev[r * dh + c] * k[r];
                        u[c] = acc;
                    }
                    // S_next = S_prev + beta k u^T, u = v - S_prev^T k
                    S db = 0;
                    for (std::size_t c = 0; c < dh; ++c) {
                        S acc = 0;
                        for (std::size_t r = 0; r < dh; ++r) acc += dS[r * dh + c] * k[r];
                        db += acc * u[c];
                        du[c] = beta * acc;
                        dv[kv + c] = du[c];
                    }
                    dbeta[n * FH + j * p.H + h] = db;
                    for (std::size_t r = 0; r < dh; ++r) {
                        S acc = 0;
                        for (std::size_t c = 0; c < dh; ++c) acc += beta * dS[r * dh + c] * u[c] - prev[r * dh + c] * du[c];
                        dk[kv + r] = acc;
                    }
                    for (std::size_t r = 0; r < dh; ++r)
                        for (std::size_t c = 0; c < dh; ++c) dS[r * dh + c] -= k[r] * du[c];
                }
            }
        }
}

// Diagonal selective recurrence: S <- Diag(a) S + k v^T with a = decay (for [0,1]) or 2 decay - 1.
template <class S>
S effective_decay(S decay, bool signed_range) { return signed_range ? S(2) * decay - S(1) : decay; }

template <class S>
void diagonal_forward(const Plan& p, const LayerActs& a, S* ws, bool signed_range) {
    const std::size_t dh = p.dh, d = p.d;
    StateIndex<S> at{p, ws + a.states, ws + p.zeros};
    if (!p.training) std::fill(ws + a.states, ws + a.states + p.B * p.H * dh * dh, S(0));
    zero_past_lengths(p, ws + a.o, d);
    for (std::size_t b = 0; b < p.B; ++b)
        for (std::size_t h = 0; h < p.H; ++h)
            for (std::size_t t = 0; t < p.lengths[b]; ++t) {
                const std::size_t n = b * p.T + t, hd = n * d + h * dh;
                const S* prev = at.before(b, t, 0, h);
                S* next = at.after(b, t, 0, h);
                for (std::size_t r = 0; r < dh; ++r) {
                    const S ar = effective_decay(ws[a.decay + hd + r], signed_range);
                    for (std::size_t c = 0; c < dh; ++c)
                        next[r * dh + c] = ar * prev[r * dh + c] + ws[a.k + hd + r] * ws[a.v + hd + c];
                }
                for (std::size_t c = 0; c < dh; ++c) {
                    S acc = 0;
                    for (std::size_t r = 0; r < dh; ++r) acc += next[r * dh + c] * ws[a.q + hd + r];
                    ws[a.o + hd + c] = acc;
                }
            }
}

// Reverse pass of diagonal_forward. Out (overwritten): dq, dk, dv, da (gradient of the effective a).
template <class S>
void diagonal_backward(const Plan& p, const LayerActs& a, S* ws, bool signed_range, const S* dO, S* dq, S* dk,
                       S* dv, S* da) {
    const std::size_t dh = p.dh, d = p.d;
    StateIndex<S> at{p, ws + a.states, ws + p.zeros};
    S* dS = ws + p.g_state;
    for (S* out : {dq, dk, dv, da}) zero_past_lengths(p, out, d);
    for (std::size_t b = 0; b < p.B; ++b)
        for (std::size_t h = 0; h < p.H; ++h) {
            std::fill(dS, dS + dh * dh, S(0));
            for (std::size_t t = p.lengths[b]; t-- > 0;) {
                const std::size_t n = b * p.T + t, hd = n * d + h * dh;
                const S* St = at.after(b, t, 0, h);
                const S* prev = at.before(b, t, 0, h);
                for (std::size_t r = 0; r < dh; ++r) {
                    S acc = 0;
                    for (std::size_t c = 0; c < dh; ++c) {
                        acc += St[r * dh + c] * dO[hd + c];
                        dS[r * dh + c] += ws[a.q + hd + r] * dO[hd + c];
                    }
                    dq[hd + r] = acc;
                }
                for (std::size_t c = 0; c < dh; ++c) {
                    S acc = 0;
                    for (std::size_t r = 0; r < dh; ++r) acc += dS[r * dh + c] * ws[a.k + hd + r];
                    dv[hd + c] = acc;
                }
                for (std::size_t r = 0; r < dh; ++r) {
                    S dar = 0, dkr = 0;
                    for (std::size_t c = 0; c < dh; ++c) {
                        dar += dS[r * dh + c] * prev[r * dh + c];
                        dkr += dS[r * dh + c] * ws[a.v + hd + c];
                    }
                    da[hd + r] = dar;
                    dk[hd + r] = dkr;
                    const S ar = effective_decay(ws[a.decay + hd + r], signed_range);
                    for (std::size_t c = 0; c < dh; ++c) dS[r * dh + c] *= ar;
                }
            }
        }
}

// Plain LSTM over the d channels; gate order i, f, g, o; pre-activations in `gates` on entry
// (x W_x^T + b), activations on exit.
template <class S>
void lstm_forward(const Plan& p, const LayerActs& a, const S* Wh, S* ws) {
    const std::size_t d = p.d;
    auto wh = mat(Wh, 4 * d, d);
    for (std::size_t b = 0; b < p.B; ++b)
        for (std::size_t t = 0; t < p.T; ++t) {
            const std::size_t n = b * p.T + t;
            S* z = ws + a.lstm_gates + n * 4 * d;
            if (t > 0) mat(z, 4 * d, 1).noalias() += wh * mat(ws + a.lstm_h + (n - 1) * d, d, 1);
            for (std::size_t i = 0; i < d; ++i) {
                const S gi = sigmoid(z[i]), gf = sigmoid(z[d + i]), gg = std::tanh(z[2 * d + i]), go = sigmoid(z[3 * d + i]);
                z[i] = gi, z[d + i] = gf, z[2 * d + i] = gg, z[3 * d + i] = go;
                const S c_prev = t > 0 ? ws[a.lstm_c + (n - 1) * d + i] : S(0);
                const S c = gf * c_prev + gi * gg;
                ws[a.lstm_c + n * d + i] = c;
                ws[a.lstm_h + n * d + i] = go * std::tanh(c);
            }
        }
}

// In: dH (gradient of h from the output projection). Out: dZ (pre-activation gradients), dWh.
template <class S>
void lstm_backward(const Plan& p, const LayerActs& a, const S* Wh, S* ws, const S* dH, S* dZ, S* dWh) {
    const std::size_t d = p.d;
    auto wh = mat(Wh, 4 * d, d);
    S* dh_next = ws + p.g_vec;
    S* dc_next = dh_next + d;
    for (std::size_t b = 0; b < p.B; ++b) {
        std::fill(dh_next, dh_next + 2 * d, S(0));
        for (std::size_t t = p.T; t-- > 0;) {
            const std::size_t n = b * p.T + t;
            const S* z = ws + a.lstm_gates + n * 4 * d;
            S* dz = dZ + n * 4 * d;
            for (std::size_t i = 0; i < d; ++i) {
                const S gi = z[i], gf = z[d + i], gg = z[2 * d + i], go = z[3 * d + i];
                const S tc = std::tanh(ws[a.lstm_c + n * d + i]);
                const S c_prev = t > 0 ? ws[a.lstm_c + (n - 1) * d + i] : S(0);
                const S dh = dH[n * d + i] + dh_next[i];
                const S dc = dh * go * (S(1) - tc * tc) + dc_next[i];
                dz[i] = dc * gg * gi * (S(1) - gi);
                dz[d + i] = dc * c_prev * gf * (S(1) - gf);
                dz[2 * d + i] = dc * gi * (S(1) - gg * gg);
                dz[3 * d + i] = dh * tc * go * (S(1) - go);
                dc_next[i] = dc * gf;
            }
            if (t > 0) {
                mat(dh_next, d, 1).noalias() = wh.transpose() * mat(dz, 4 * d, 1);
                mat(dWh, 4 * d, d).noalias() += mat(dz, 4 * d, 1) * mat(ws + a.lstm_h + (n - 1) * d, d, 1).transpose();
            }
        }
    }
}

// ---- the whole model ----

template <class S>
void forward_pass(const ModelConfig& c, const ParameterLayout& L, const S* W, const Batch& batch, const Plan& p, S* ws) {
    const std::size_t N = p.N, d = p.d, Fd = p.F * d, FH = p.F * p.H;
    std::fill(ws + p.zeros, ws + p.zeros + p.dh * p.dh, S(0));
    for (std::size_t n = 0; n < N; ++n)
        std::copy_n(W + L.embed + std::size_t(batch.tokens[n]) * d, d, ws + p.x[0] + n * d);
    for (std::size_t l = 0; l < c.layers; ++l) {
        const LayerSlots& s = L.layers[l];
        const LayerActs& a = p.layers[l];
        const S* xin = ws + p.x[l];
        rmsnorm_forward(xin, W + s.norm1, ws + a.xn1, ws + a.r1, N, d, d);
        if (c.mixer == Mixer::lstm) {
            linear_forward(ws + a.xn1, W + s.lstm_wx, W + s.lstm_bias, ws + a.lstm_gates, N, d, 4 * d);
            lstm_forward(p, a, W + s.lstm_wh, ws);
            linear_forward(ws + a.lstm_h, W + s.wo, (const S*)nullptr, ws + a.x_mid, N, d, d);
        } else {
            linear_forward(ws + a.xn1, W + s.wq, (const S*)nullptr, ws + a.pq, N, d, d);
            linear_forward(ws + a.xn1, W + s.wk, (const S*)nullptr, ws + a.pk, N, d, Fd);
            linear_forward(ws + a.xn1, W + s.wv, (const S*)nullptr, ws + a.pv, N, d, Fd);
            conv_forward(ws + a.pq, W + s.conv_q, ws + a.cq, p.B, p.T, d, p.K);
            conv_forward(ws + a.pk, W + s.conv_k, ws + a.ck, p.B, p.T, Fd, p.K);
            conv_forward(ws + a.pv, W + s.conv_v, ws + a.cv, p.B, p.T, Fd, p.K);
            silu_forward(ws + a.cq, ws + a.q, N * d);
            silu_forward(ws + a.ck, ws + a.k, N * Fd);
            silu_forward(ws + a.cv, ws + a.v, N * Fd);
            if (c.mixer == Mixer::mamba) {
                linear_forward(ws + a.xn1, W + s.wdt, W + s.bdt, ws + a.zdt, N, d, d);
                for (std::size_t i = 0; i < N * d; ++i) {
                    const S delta = softplus(ws[a.zdt + i]);
                    ws[a.delta + i] = delta;
                    ws[a.decay + i] = std::exp(-delta * std::exp(W[s.decay_log + i % d]));
                }
                diagonal_forward(p, a, ws, c.eig == EigRange::signed_unit);
            } else {
                l2norm_forward(ws + a.q, ws + a.qn, ws + a.qnorm, N, d, p.dh);
                l2norm_forward(ws + a.k, ws + a.kn, ws + a.knorm, N, Fd, p.dh);
                linear_forward(ws + a.xn1, W + s.wbeta, (const S*)nullptr, ws + a.zbeta, N, d, FH);
                const S scale = S(c.beta_scale());
                for (std::size_t i = 0; i < N * FH; ++i) ws[a.beta + i] = scale * sigmoid(ws[a.zbeta + i]);
                delta_forward(p, a, ws);
            }
            rmsnorm_forward(ws + a.o, W + s.onorm, ws + a.on, ws + a.ro, N, d, p.dh);
            linear_forward(ws + a.on, W + s.wo, (const S*)nullptr, ws + a.x_mid, N, d, d);
        }
        mat(ws + a.x_mid, N, d) += mat(xin, N, d);
        // MLP: x_out = x_mid + W_down (silu(W_gate xn2) * (W_up xn2))
        rmsnorm_forward(ws + a.x_mid, W + s.norm2, ws + a.xn2, ws + a.r2, N, d, d);
        linear_forward(ws + a.xn2, W + s.wgate, (const S*)nullptr, ws + a.ga, N, d, p.m);
        linear_forward(ws + a.xn2, W + s.wup, (const S*)nullptr, ws + a.gu, N, d, p.m);
        for (std::size_t i = 0; i < N * p.m; ++i) ws[a.hm + i] = silu(ws[a.ga + i]) * ws[a.gu + i];
        S* xout = ws + p.x[l + 1];
        linear_forward(ws + a.hm, W + s.wdown, (const S*)nullptr, xout, N, p.m, d);
        mat(xout, N, d) += mat(ws + a.x_mid, N, d);
    }
    rmsnorm_forward(ws + p.x[c.layers], W + L.norm_f, ws + p.xnf, ws + p.rf, N, d, d);
    linear_forward(ws + p.xnf, W + L.head, W + L.head_bias, ws + p.logits, N, d, p.C);
}

// Mean cross-entropy over labelled positions; dlogits = (softmax - onehot) / count when asked.
template <class S>
double cross_entropy(const Plan& p, const Batch& batch, const S* logits, S* dlogits) {
    const std::size_t count = labelled_positions(batch);
    double total = 0;
    if (dlogits) std::fill(dlogits, dlogits + p.N * p.C, S(0));
    for (std::size_t n = 0; n < p.N; ++n) {
        const int target = batch.targets[n];
        if (target < 0) continue;
        const S* z = logits + n * p.C;
        const S zmax = *std::max_element(z, z + p.C);
        S sum = 0;
        for (std::size_t k = 0; k < p.C; ++k) sum += std::exp(z[k] - zmax);
        total += double(std::log(sum) + zmax - z[target]);
        if (dlogits) {
            for (std::size_t k = 0; k < p.C; ++k) dlogits[n * p.C + k] = std::exp(z[k] - zmax) / sum / S(count);
            dlogits[n * p.C + std::size_t(target)] -= S(1) / S(count);
        }
    }
    return count ? total / double(count) : 0.0;
}

template <class S>
void backward_pass(const ModelConfig& c, const ParameterLayout& L, const S* W, const Batch& batch, const Plan& p,
                   S* ws, S* G) {
    const std::size_t N = p.N, d = p.d, Fd = p.F * d, FH = p.F * p.H;
    S* dx = ws + p.g_x;    // gradient of the residual stream, carried down through the blocks
    S* dxn = ws + p.g_xn;  // gradient of a normalised input
    // head and final norm
    linear_backward(ws + p.xnf, W + L.head, ws + p.dlogits, dxn, G + L.head, G + L.head_bias, N, d, p.C, false);
    std::fill(dx, dx + N * d, S(0));
    rmsnorm_backward(ws + p.x[c.layers], W + L.norm_f, ws + p.rf, dxn, dx, G + L.norm_f, N, d, d);
    for (std::size_t l = c.layers; l-- > 0;) {
        const LayerSlots& s = L.layers[l];
        const LayerActs& a = p.layers[l];
        // MLP (dx is the gradient of x_out; the residual passes it to x_mid unchanged)
        S* dhm = ws + p.g_a;
        S* dga = ws + p.g_b;
        S* dgu = ws + p.g_c;
        linear_backward(ws + a.hm, W + s.wdown, dx, dhm, G + s.wdown, (S*)nullptr, N, p.m, d, false);
        for (std::size_t i = 0; i < N * p.m; ++i) {
            dga[i] = dhm[i] * ws[a.gu + i] * silu_grad(ws[a.ga + i]);
            dgu[i] = dhm[i] * silu(ws[a.ga + i]);
        }
        linear_backward(ws + a.xn2, W + s.wgate, dga, dxn, G + s.wgate, (S*)nullptr, N, d, p.m, false);
        linear_backward(ws + a.xn2, W + s.wup, dgu, dxn, G + s.wup, (S*)nullptr, N, d, p.m, true);
        rmsnorm_backward(ws + a.x_mid, W + s.norm2, ws + a.r2, dxn, dx, G + s.norm2, N, d, d);
        // mixer (dx is now the gradient of x_mid; the residual passes it to x_in unchanged)
        if (c.mixer == Mixer::lstm) {
            S* dH = ws + p.g_a;
            S* dZ = ws + p.g_b;
            linear_backward(ws + a.lstm_h, W + s.wo, dx, dH, G + s.wo, (S*)nullptr, N, d, d, false);
            lstm_backward(p, a, W + s.lstm_wh, ws, dH, dZ, G + s.lstm_wh);
            linear_backward(ws + a.xn1, W + s.lstm_wx, dZ, dxn, G + s.lstm_wx, G + s.lstm_bias, N, d, 4 * d, false);
        } else {
            S* dOn = ws + p.g_a;
            S* dO = ws + p.g_b;
            S* dq = ws + p.g_c;
            S* dk = ws + p.g_d;
            S* dv = ws + p.g_e;
            S* dgate = ws + p.g_f;  // dbeta or d(effective decay)
            linear_backward(ws + a.on, W + s.wo, dx, dOn, G + s.wo, (S*)nullptr, N, d, d, false);
            std::fill(dO, dO + N * d, S(0));
            rmsnorm_backward(ws + a.o, W + s.onorm, ws + a.ro, dOn, dO, G + s.onorm, N, d, p.dh);
            if (c.mixer == Mixer::mamba) {
                const bool signed_range = c.eig == EigRange::signed_unit;
                diagonal_backward(p, a, ws, signed_range, dO, dq, dk, dv, dgate);
                // a = exp(-delta e^w), delta = softplus(zdt); the effective decay is a or 2a - 1
                for (std::size_t i = 0; i < N * d; ++i) {
                    const std::size_t ch = i % d;
                    const S ew = std::exp(W[s.decay_log + ch]);
                    const S common = dgate[i] * S(signed_range ? 2 : 1) * ws[a.decay + i];
                    G[s.decay_log + ch] -= common * ws[a.delta + i] * ew;
                    dgate[i] = -common * ew * sigmoid(ws[a.zdt + i]);
                }
                linear_backward(ws + a.xn1, W + s.wdt, dgate, dxn, G + s.wdt, G + s.bdt, N, d, d, false);
            } else {
                delta_backward(p, a, ws, dO, dq, dk, dv, dgate);
                const S scale = S(c.beta_scale());
                for (std::size_t i = 0; i < N * FH; ++i) {
                    const S sg = sigmoid(ws[a.zbeta + i]);
                    dgate[i] *= scale * sg * (S(1) - sg);
                }
                linear_backward(ws + a.xn1, W + s.wbeta, dgate, dxn, G + s.wbeta, (S*)nullptr, N, d, FH, false);
                l2norm_backward(ws + a.qn, ws + a.qnorm, dq, N, d, p.dh);
                l2norm_backward(ws + a.kn, ws + a.knorm, dk, N, Fd, p.dh);
            }
            silu_backward(ws + a.cq, dq, N * d);
            silu_backward(ws + a.ck, dk, N * Fd);
            silu_backward(ws + a.cv, dv, N * Fd);
            S* dpre = ws + p.g_a;  // the conv's input gradient, one projection at a time
            conv_backward(ws + a.pq, W + s.conv_q, dq, dpre, G + s.conv_q, p.B, p.T, d, p.K);
            linear_backward(ws + a.xn1, W + s.wq, dpre, dxn, G + s.wq, (S*)nullptr, N, d, d, true);
            conv_backward(ws + a.pk, W + s.conv_k, dk, dpre, G + s.conv_k, p.B, p.T, Fd, p.K);
            linear_backward(ws + a.xn1, W + s.wk, dpre, dxn, G + s.wk, (S*)nullptr, N, d, Fd, true);
            conv_backward(ws + a.pv, W + s.conv_v, dv, dpre, G + s.conv_v, p.B, p.T, Fd, p.K);
            linear_backward(ws + a.xn1, W + s.wv, dpre, dxn, G + s.wv, (S*)nullptr, N, d, Fd, true);
        }
        rmsnorm_backward(ws + p.x[l], W + s.norm1, ws + a.r1, dxn, dx, G + s.norm1, N, d, d);
    }
    for (std::size_t n = 0; n < N; ++n) {
        S* g = G + L.embed + std::size_t(batch.tokens[n]) * d;
        for (std::size_t i = 0; i < d; ++i) g[i] += dx[n * d + i];
    }
}

template <class S>
S* prepare(Workspace<S>& ws, const Plan& p) {
    if (ws.buffer.size() < p.total) ws.buffer.resize(p.total);  // the one allocation
    return ws.buffer.data();
}

}  // namespace

template <class Scalar>
void forward(const ModelConfig& config, const ParameterLayout& layout, std::span<const Scalar> params,
             const Batch& batch, Workspace<Scalar>& ws) {
    const Plan p = make_plan(config, batch, false);
    forward_pass(config, layout, params.data(), batch, p, prepare(ws, p));
}

template <class Scalar>
std::span<const Scalar> logits(const ModelConfig& config, const Batch& batch, const Workspace<Scalar>& ws) {
    const Plan p = make_plan(config, batch, false);
    return {ws.buffer.data() + p.logits, p.N * p.C};
}

template <class Scalar>
double loss_and_gradient(const ModelConfig& config, const ParameterLayout& layout, std::span<const Scalar> params,
                         const Batch& batch, Workspace<Scalar>& ws, std::span<Scalar> grads) {
    const bool backward = !grads.empty();
    const Plan p = make_plan(config, batch, backward);
    if (batch.targets.empty()) throw InputError("batch", "targets", "a loss needs the targets");
    Scalar* w = prepare(ws, p);
    forward_pass(config, layout, params.data(), batch, p, w);
    const double loss = cross_entropy(p, batch, w + p.logits, backward ? w + p.dlogits : nullptr);
    if (backward) {
        std::fill(grads.begin(), grads.end(), Scalar(0));
        backward_pass(config, layout, params.data(), batch, p, w, grads.data());
    }
    return loss;
}

template <class Scalar>
void count_correct(const ModelConfig& config, const Batch& batch, const Workspace<Scalar>& ws,
                   std::vector<std::size_t>& correct, std::vector<std::size_t>& labelled) {
    count_correct<Scalar>(logits(config, batch, ws), config.classes, batch, correct, labelled);
}

template <class Scalar>
void count_correct(std::span<const Scalar> z, std::size_t C, const Batch& batch, std::vector<std::size_t>& correct,
                   std::vector<std::size_t>& labelled) {
    correct.assign(batch.batch, 0);
    labelled.assign(batch.batch, 0);
    for (std::size_t n = 0; n < batch.batch * batch.length; ++n) {
        if (batch.targets[n] < 0) continue;
        const Scalar* row = z.data() + n * C;
        const auto predicted = std::size_t(std::max_element(row, row + C) - row);
        correct[n / batch.length] += predicted == std::size_t(batch.targets[n]);
        labelled[n / batch.length] += 1;
    }
}

template <class Scalar>
void transition_eigenvalues(const ModelConfig& c, const ParameterLayout& layout, std::span<const Scalar> params,
                            const Batch& batch, Workspace<Scalar>& ws,
                            const std::function<void(std::size_t, std::size_t, std::complex<double>)>& emit) {
    if (c.mixer == Mixer::lstm) return;
    const Plan p = make_plan(c, batch, false);
    Scalar* w = prepare(ws, p);
    forward_pass(c, layout, params.data(), batch, p, w);
    const std::size_t dh = p.dh, d = p.d, Fd = p.F * d, FH = p.F * p.H;
    for (std::size_t l = 0; l < c.layers; ++l) {
        const LayerActs& a = p.layers[l];
        for (std::size_t b = 0; b < p.B; ++b)
            for (std::size_t t = 0; t < p.lengths[b]; ++t) {
                const std::size_t n = b * p.T + t;
                for (std::size_t h = 0; h < p.H; ++h) {
                    if (c.mixer == Mixer::mamba) {
                        for (std::size_t r = 0; r < dh; ++r)
                            emit(l, h, double(effective_decay(w[a.decay + n * d + h * dh + r], c.eig == EigRange::signed_unit)));
                    } else if (p.F == 1) {
                        // 1 - beta |k|^2: k is normalised with an epsilon, so |k|^2 is just below 1
                        // (by up to ~1e-4 for the small keys of fresh weights).
                        const Scalar* k = w + a.kn + n * Fd + h * dh;
                        double kk = 0;
                        for (std::size_t r = 0; r < dh; ++r) kk += double(k[r]) * double(k[r]);
                        emit(l, h, 1.0 - double(w[a.beta + n * FH + h]) * kk);
                    } else {
                        // A = prod_j (I - beta_j k_j k_j^T) (factor 1 applied first) leaves span(k) invariant
                        // and fixes its complement: its non-trivial eigenvalues are those of Q^T A Q.
                        const auto n_dh = Eigen::Index(dh);
                        Eigen::MatrixXd A = Eigen::MatrixXd::Identity(n_dh, n_dh);
                        Eigen::MatrixXd K(n_dh, Eigen::Index(p.F));
                        for (std::size_t j = 0; j < p.F; ++j) {
                            Eigen::VectorXd k(n_dh);
                            for (std::size_t r = 0; r < dh; ++r) k(Eigen::Index(r)) = double(w[a.kn + n * Fd + (j * p.H + h) * dh + r]);
                            const double beta = double(w[a.beta + n * FH + j * p.H + h]);
                            A = (Eigen::MatrixXd::Identity(n_dh, n_dh) - beta * k * k.transpose()) * A;
                            K.col(Eigen::Index(j)) = k;
                        }
                        Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(K);
                        const Eigen::Index rank = qr.rank();
                        if (rank == 0) continue;
                        const Eigen::MatrixXd Q = Eigen::MatrixXd(qr.householderQ()).leftCols(rank);
                        const Eigen::MatrixXd M = Q.transpose() * A * Q;
                        Eigen::EigenSolver<Eigen::MatrixXd> solver(M, false);
                        for (Eigen::Index i = 0; i < rank; ++i) emit(l, h, solver.eigenvalues()(i));
                    }
                }
            }
    }
}

template <class Scalar>
void recurrence_steps(const ModelConfig& c, const ParameterLayout& layout, std::span<const Scalar> params,
                      const Batch& batch, Workspace<Scalar>& ws, const std::function<void(const RecurrenceStep&)>& emit) {
    if (c.mixer == Mixer::lstm) return;
    const Plan p = make_plan(c, batch, false);
    Scalar* w = prepare(ws, p);
    forward_pass(c, layout, params.data(), batch, p, w);
    const std::size_t dh = p.dh, d = p.d, Fd = p.F * d, FH = p.F * p.H;
    const bool mamba = c.mixer == Mixer::mamba;
    auto read = [&](std::size_t at) { return std::vector<double>(w + at, w + at + dh); };
    RecurrenceStep step;
    for (std::size_t l = 0; l < c.layers; ++l) {
        const LayerActs& a = p.layers[l];
        for (std::size_t h = 0; h < p.H; ++h)
            for (std::size_t b = 0; b < p.B; ++b)
                for (std::size_t t = 0; t < p.lengths[b]; ++t) {
                    const std::size_t n = b * p.T + t;
                    step.layer = l, step.head = h, step.row = b, step.position = t;
                    step.keys.clear(), step.values.clear(), step.betas.clear(), step.decay.clear();
                    if (mamba) {
                        const std::size_t hd = n * d + h * dh;
                        step.keys.push_back(read(a.k + hd));
                        step.values.push_back(read(a.v + hd));
                        for (std::size_t r = 0; r < dh; ++r)
                            step.decay.push_back(double(effective_decay(w[a.decay + hd + r], c.eig == EigRange::signed_unit)));
                    } else {
                        for (std::size_t j = 0; j < p.F; ++j) {
                            step.keys.push_back(read(a.kn + n * Fd + (j * p.H + h) * dh));
                            step.values.push_back(read(a.v + n * Fd + (j * p.H + h) * dh));
                            step.betas.push_back(double(w[a.beta + n * FH + j * p.H + h]));
                        }
                    }
                    emit(step);
                }
    }
}

#define STATETRACK_INSTANTIATE(S)                                                                                   \
    template void forward<S>(const ModelConfig&, const ParameterLayout&, std::span<const S>, const Batch&,           \
                             Workspace<S>&);                                                                         \
    template std::span<const S> logits<S>(const ModelConfig&, const Batch&, const Workspace<S>&);                    \
    template double loss_and_gradient<S>(const ModelConfig&, const ParameterLayout&, std::span<const S>,            \
                                         const Batch&, Workspace<S>&, std::span<S>);                                 \
    template void count_correct<S>(const ModelConfig&, const Batch&, const Workspace<S>&, std::vector<std::size_t>&, \
                                   std::vector<std::size_t>&);                                                       \
    template void count_correct<S>(std::span<const S>, std::size_t, const Batch&, std::vector<std::size_t>&,         \
                                   std::vector<std::size_t>&);                                                       \
    template void transition_eigenvalues<S>(const ModelConfig&, const ParameterLayout&, std::span<const S>,         \
                                            const Batch&, Workspace<S>&,                                             \
                                            const std::function<void(std::size_t, std::size_t, std::complex<double>)>&); \
    template void recurrence_steps<S>(const ModelConfig&, const ParameterLayout&, std::span<const S>, const Batch&,   \
                                      Workspace<S>&, const std::function<void(const RecurrenceStep&)>&);
STATETRACK_INSTANTIATE(float)
STATETRACK_INSTANTIATE(double)
#undef STATETRACK_INSTANTIATE

}  // namespace statetrack::gpu
