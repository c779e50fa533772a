// The recurrences with the state in registers. A group of DH consecutive lanes owns one (word b,
// head h). The forwards and the diagonal backward hold the state by columns: lane c holds column c
// of S (S[r][c], r = 0..DH-1), the value index; the delta backward holds it by rows. Key-side
// vectors (k, q, the decay) are broadcast to the whole group through shared memory (one store,
// then DH/4 16-byte broadcast loads: shuffles, one per value, made the recurrences 40% of a
// training step in the ncu profile of 2026-11-22). Sums over c that every
// lane needs one entry of (S g, S k, ...) use a transpose-reduction: DH - 1 shuffles, after which
// lane r holds entry r. Formulas and order follow delta_forward / delta_backward and
// diagonal_forward / diagonal_backward in cpu_backend.cpp.
#include <stdexcept>

#include "kernels.cuh"

namespace statetrack::gpu::cuda {

namespace {

constexpr unsigned full_mask = 0xffffffffu;
constexpr int block_threads = 128;
constexpr float norm_eps = 1e-6f;

__device__ float sigmoidf(float z) { return 1.0f / (1.0f + expf(-z)); }
__device__ float softplusf(float z) { return z > 20.0f ? z : log1pf(expf(z)); }

template <int DH>
__device__ float group_sum(float x) {
#pragma unroll
    for (int s = DH / 2; s >= 1; s /= 2) x += __shfl_xor_sync(full_mask, x, s);
    return x;
}
// One halving stage of transpose_reduce, then the next: lanes with bit S set keep the upper half of
// w (entries i + S), the others the lower half, and each adds the partner's copy of the half it keeps.
// Compile-time S and indices keep w in registers (a `for (s = DH / 2; s >= 1; s /= 2)` loop was not
// unrolled by nvcc 13 and put w in a 128-byte local-memory stack frame: ptxas -v).
template <int DH, int S>
__device__ void transpose_stage(float (&w)[DH], int lane) {
    if constexpr (S >= 1) {
        const bool upper = lane & S;
#pragma unroll
        for (int i = 0; i < S; ++i) {
            const float send = upper ? w[i] : w[i + S];
            const float keep = upper ? w[i + S] : w[i];
            w[i] = keep + __shfl_xor_sync(full_mask, send, S);
        }
        transpose_stage<DH, S / 2>(w, lane);
    }
}
// w[r] holds this lane's term of entry r; returns sum over the group's lanes of entry `lane`.
template <int DH>
__device__ float transpose_reduce(float (&w)[DH], int lane) {
    transpose_stage<DH, DH / 2>(w, lane);
    return w[0];
}

// Which (b, h) and column this thread serves; groups past the end compute on (b, h) = last and
// write nothing, so that every lane of a warp takes part in the shuffles.
struct Place {
    std::size_t b, h;
    int c;
    bool valid;
    float* slot;  // the group's DH floats of shared memory (16-byte aligned), for broadcast
};
template <int DH>
__device__ Place place(std::size_t B, std::size_t H) {
    const std::size_t thread = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    std::size_t group = thread / DH;
    const bool valid = group < B * H;
    if (!valid) group = B * H - 1;
    __shared__ __align__(16) float shared[block_threads];
    return {group / H, group % H, int(thread % DH), valid, shared + (threadIdx.x / DH) * DH};
}

// All DH values of x across the group (lane r's x in out[r]), through this group's DH floats of
// shared memory `slot` (16-byte aligned).
template <int DH>
__device__ void broadcast(float x, float* slot, int c, float (&out)[DH]) {
    __syncwarp();  // the group's previous reads of slot are done
    slot[c] = x;
    __syncwarp();
    const float4* v = reinterpret_cast<const float4*>(slot);
#pragma unroll
    for (int i = 0; i < DH / 4; ++i) {
        const float4 f = v[i];
        out[4 * i] = f.x, out[4 * i + 1] = f.y, out[4 * i + 2] = f.z, out[4 * i + 3] = f.w;
    }
}
// x / sqrt(sum x^2 + eps) over the group; `norm` receives the denominator.
template <int DH>
__device__ float l2_normalise(float x, float& norm) {
    norm = sqrtf(group_sum<DH>(x * x) + norm_eps);
    return x / norm;
}

// sum_r a[r] b[r] in four interleaved partial sums: a chain of DH dependent adds was the longest
// latency of each step (DH is a multiple of 4).
template <int DH>
__device__ float dot(const float (&a)[DH], const float (&b)[DH]) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma unroll
    for (int r = 0; r < DH; r += 4) s0 += a[r] * b[r], s1 += a[r + 1] * b[r + 1], s2 += a[r + 2] * b[r + 2], s3 += a[r + 3] * b[r + 3];
    return (s0 + s1) + (s2 + s3);
}
// DH consecutive floats (16-byte aligned) into registers.
template <int DH>
__device__ void load_row(const float* src, float (&out)[DH]) {
    const float4* v = reinterpret_cast<const float4*>(src);
#pragma unroll
    for (int i = 0; i < DH / 4; ++i) {
        const float4 f = v[i];
        out[4 * i] = f.x, out[4 * i + 1] = f.y, out[4 * i + 2] = f.z, out[4 * i + 3] = f.w;
    }
}

// Where one lane's inputs of factor j at row n are, and the loads of them. The kernels load a
// substep ahead (the next factor, or the next step's first factor and q), so that each step's
// chain of group reductions does not also wait for memory.
struct DeltaLane {
    std::size_t H, h, c, dh, d, Fd, ld, FH;
    __device__ std::size_t col(std::size_t j) const { return (j * H + h) * dh + c; }
};
template <int DH>
__device__ DeltaLane delta_lane(const DeltaShape& s, const Place& p) {
    const std::size_t d = s.H * DH, Fd = s.F * d;
    return {s.H, p.h, std::size_t(p.c), DH, d, Fd, d + 2 * Fd, s.F * s.H};
}
struct FactorInputs {
    float k, w, z;  // raw key, v (forward) or the saved u (backward), beta logit
};
__device__ FactorInputs load_factor(const DeltaLane& l, const float* act, const float* zbeta, const float* w,
                                    std::size_t w_stride, std::size_t w_offset, std::size_t n, std::size_t j) {
    const std::size_t col = l.col(j);
    return {act[n * l.ld + l.d + col], w[n * w_stride + w_offset + col], zbeta[n * l.FH + j * l.H + l.h]};
}

template <int DH, bool TRAIN>
__global__ void __launch_bounds__(block_threads) delta_forward_kernel(DeltaShape s, const float* act, const float* zbeta,
                                                                      float* o, float* u_out, float* final) {
    const Place p = place<DH>(s.B, s.H);
    const std::size_t H = s.H, F = s.F, d = H * DH, Fd = F * d, ld = d + 2 * Fd;
    const DeltaLane lane = delta_lane<DH>(s, p);
    float S[DH], kb[DH];
#pragma unroll
    for (int r = 0; r < DH; ++r) S[r] = 0;
    const std::size_t n0 = p.b * s.T;
    FactorInputs next = load_factor(lane, act, zbeta, act, ld, d + Fd, n0, 0);
    float q_next = act[n0 * ld + p.h * DH + p.c];
    for (std::size_t t = 0; t < s.T; ++t) {
        const std::size_t n = n0 + t;
        const float q_raw = q_next;
        for (std::size_t j = 0; j < F; ++j) {
            const FactorInputs in = next;
            if (j + 1 < F) {
                next = load_factor(lane, act, zbeta, act, ld, d + Fd, n, j + 1);
            } else if (t + 1 < s.T) {
                next = load_factor(lane, act, zbeta, act, ld, d + Fd, n + 1, 0);
                q_next = act[(n + 1) * ld + p.h * DH + p.c];
            }
            const std::size_t col = lane.col(j);
            float knorm;
            const float k = l2_normalise<DH>(in.k, knorm);
            const float beta = s.beta_scale * sigmoidf(in.z);
            float u = in.w;
            broadcast<DH>(k, p.slot, p.c, kb);
#pragma unroll
            for (int r = 0; r < DH; ++r) u -= S[r] * kb[r];
#pragma unroll
            for (int r = 0; r < DH; ++r) S[r] += beta * kb[r] * u;
            if (TRAIN && p.valid) u_out[n * Fd + col] = u;
        }
        float qnorm;
        const float q = l2_normalise<DH>(q_raw, qnorm);
        broadcast<DH>(q, p.slot, p.c, kb);
        float out = 0;
#pragma unroll
        for (int r = 0; r < DH; ++r) out += S[r] * kb[r];
        if (p.valid) o[n * d + p.h * DH + p.c] = out;
    }
    if (TRAIN && p.valid) {
        float* dst = final + ((p.b * H + p.h) * DH) * DH + p.c;
#pragma unroll
        for (int r = 0; r < DH; ++r) dst[r * DH] = S[r];
    }
}

// The backward holds the state by rows: lane r owns S[r][.] and dS[r][.] (r the key index), so that
// S g, dS u and S du are sums within the lane and only dS^T k needs a transpose-reduction (the
// forward's column layout needed two per step: S g and the key gradient; ncu 2026-11-22 had the
// backward at 168 registers and latency-bound). The value-side vectors (g, u, du) are broadcast.
template <int DH>
__global__ void __launch_bounds__(block_threads) delta_backward_kernel(DeltaShape s, const float* act, const float* zbeta,
                                                                       const float* u_saved, const float* final,
                                                                       const float* dO, float* dact, float* dzbeta) {
    const Place p = place<DH>(s.B, s.H);
    const std::size_t H = s.H, F = s.F, d = H * DH, Fd = F * d, ld = d + 2 * Fd, FH = F * H;
    float S[DH], dS[DH], w[DH], vb[DH];
    load_row<DH>(final + ((p.b * H + p.h) * DH + std::size_t(p.c)) * DH, S);
#pragma unroll
    for (int c = 0; c < DH; ++c) dS[c] = 0;
    const DeltaLane lane = delta_lane<DH>(s, p);
    const std::size_t n_last = p.b * s.T + s.T - 1, qcol = p.h * DH + p.c;
    FactorInputs next = load_factor(lane, act, zbeta, u_saved, Fd, 0, n_last, F - 1);
    float q_next = act[n_last * ld + qcol], g_next = dO[n_last * d + qcol];
    for (std::size_t t = s.T; t-- > 0;) {
        const std::size_t n = p.b * s.T + t;
        float* drow = dact + n * ld;
        // o = S_t^T q: dq = S_t g, dS += q g^T; then back through the L2 norm of q
        float qnorm;
        const float q = l2_normalise<DH>(q_next, qnorm);
        broadcast<DH>(g_next, p.slot, p.c, vb);
        const float dq = dot<DH>(S, vb);
#pragma unroll
        for (int c = 0; c < DH; ++c) dS[c] += q * vb[c];
        const float dq_raw = (dq - q * group_sum<DH>(q * dq)) / qnorm;
        if (p.valid) drow[p.h * DH + p.c] = dq_raw;
        for (std::size_t j = F; j-- > 0;) {
            const FactorInputs in = next;
            if (j > 0) {
                next = load_factor(lane, act, zbeta, u_saved, Fd, 0, n, j - 1);
            } else if (t > 0) {
                next = load_factor(lane, act, zbeta, u_saved, Fd, 0, n - 1, F - 1);
                q_next = act[(n - 1) * ld + qcol], g_next = dO[(n - 1) * d + qcol];
            }
            const std::size_t col = lane.col(j);
            float knorm;
            const float k = l2_normalise<DH>(in.k, knorm);
            const float sg = sigmoidf(in.z);
            const float beta = s.beta_scale * sg;
            const float u = in.w;
            // S_prev = S_next - beta k u^T (the forward's products beta k_r times u_c)
            broadcast<DH>(u, p.slot, p.c, vb);
            const float bk = beta * k;
#pragma unroll
            for (int c = 0; c < DH; ++c) S[c] -= bk * vb[c];
            const float dS_u = dot<DH>(dS, vb);
#pragma unroll
            for (int c = 0; c < DH; ++c) w[c] = dS[c] * k;
            const float acc = transpose_reduce<DH>(w, p.c);  // (dS^T k)[lane]
            const float db = group_sum<DH>(acc * u);
            const float du = beta * acc;
            broadcast<DH>(du, p.slot, p.c, vb);
            const float dk = beta * dS_u - dot<DH>(S, vb);  // beta dS u - S du, row r
#pragma unroll
            for (int c = 0; c < DH; ++c) dS[c] -= k * vb[c];
            const float dk_raw = (dk - k * group_sum<DH>(k * dk)) / knorm;
            if (p.valid) {
                drow[d + col] = dk_raw;
                drow[d + Fd + col] = du;
                if (p.c == 0) dzbeta[n * FH + j * H + p.h] = db * s.beta_scale * sg * (1.0f - sg);
            }
        }
    }
}

// Diagonal: S <- Diag(a) S + k v^T with a = decay or 2 decay - 1, decay = exp(-softplus(zdt) e^w).
struct Gate {
    float a, decay, delta, ew;
};
__device__ Gate diagonal_gate(float zdt, float decay_log, bool signed_range) {
    Gate g;
    g.delta = softplusf(zdt);
    g.ew = expf(decay_log);
    g.decay = expf(-g.delta * g.ew);
    g.a = signed_range ? 2.0f * g.decay - 1.0f : g.decay;
    return g;
}

template <int DH, bool TRAIN>
__global__ void __launch_bounds__(block_threads) diagonal_forward_kernel(DiagonalShape s, const float* act,
                                                                         const float* zdt, const float* decay_log,
                                                                         float* o, float* states) {
    const Place p = place<DH>(s.B, s.H);
    const std::size_t H = s.H, d = H * DH, ld = 3 * d, ch = p.h * DH + p.c;
    float S[DH], ab[DH], kb[DH];
#pragma unroll
    for (int r = 0; r < DH; ++r) S[r] = 0;
    const float wlog = decay_log[ch];
    for (std::size_t t = 0; t < s.T; ++t) {
        const std::size_t n = p.b * s.T + t;
        const float* row = act + n * ld;
        const float a = diagonal_gate(zdt[n * d + ch], wlog, s.signed_range).a;  // lane c holds a[c] (key index c)
        const float q = row[ch], k = row[d + ch], v = row[2 * d + ch];
        broadcast<DH>(a, p.slot, p.c, ab);
        broadcast<DH>(k, p.slot, p.c, kb);
#pragma unroll
        for (int r = 0; r < DH; ++r) S[r] = ab[r] * S[r] + kb[r] * v;
        broadcast<DH>(q, p.slot, p.c, kb);
        float out = 0;
#pragma unroll
        for (int r = 0; r < DH; ++r) out += S[r] * kb[r];
        if (p.valid) {
            o[n * d + ch] = out;
            if (TRAIN) {
                float* dst = states + ((n * H + p.h) * DH) * DH + p.c;
#pragma unroll
                for (int r = 0; r < DH; ++r) dst[r * DH] = S[r];
            }
        }
    }
}

template <int DH>
__global__ void __launch_bounds__(block_threads) diagonal_backward_kernel(DiagonalShape s, const float* act,
                                                                          const float* zdt, const float* decay_log,
                                                                          const float* states, const float* dO,
                                                                          float* dact, float* dzdt, float* ddecay_log) {
    const Place p = place<DH>(s.B, s.H);
    const std::size_t H = s.H, d = H * DH, ld = 3 * d, ch = p.h * DH + p.c;
    float dS[DH], w[DH], kb[DH];
#pragma unroll
    for (int r = 0; r < DH; ++r) dS[r] = 0;
    const float wlog = decay_log[ch];
    float dwlog = 0;
    for (std::size_t t = s.T; t-- > 0;) {
        const std::size_t n = p.b * s.T + t;
        const float* row = act + n * ld;
        float* drow = dact + n * ld;
        const float z = zdt[n * d + ch];
        const Gate gate = diagonal_gate(z, wlog, s.signed_range);
        const float q = row[ch], k = row[d + ch], v = row[2 * d + ch];
        const float g = dO[n * d + ch];
        const float* St = states + ((n * H + p.h) * DH) * DH + p.c;
        const float* Sp = St - H * DH * DH;  // the state of step t - 1 (zero before the word)
        // dq = S_t g; dS += q g^T
#pragma unroll
        for (int r = 0; r < DH; ++r) w[r] = St[r * DH] * g;
        const float dq = transpose_reduce<DH>(w, p.c);
        broadcast<DH>(q, p.slot, p.c, kb);
#pragma unroll
        for (int r = 0; r < DH; ++r) dS[r] += kb[r] * g;
        broadcast<DH>(k, p.slot, p.c, kb);
        float dv = 0;
#pragma unroll
        for (int r = 0; r < DH; ++r) dv += dS[r] * kb[r];
#pragma unroll
        for (int r = 0; r < DH; ++r) w[r] = t > 0 ? dS[r] * Sp[r * DH] : 0.0f;
        const float da = transpose_reduce<DH>(w, p.c);
#pragma unroll
        for (int r = 0; r < DH; ++r) w[r] = dS[r] * v;
        const float dk = transpose_reduce<DH>(w, p.c);
        broadcast<DH>(gate.a, p.slot, p.c, kb);
#pragma unroll
        for (int r = 0; r < DH; ++r) dS[r] *= kb[r];
        const float common = da * (s.signed_range ? 2.0f : 1.0f) * gate.decay;
        dwlog -= common * gate.delta * gate.ew;
        if (p.valid) {
            drow[ch] = dq;
            drow[d + ch] = dk;
            drow[2 * d + ch] = dv;
            dzdt[n * d + ch] = -common * gate.ew * sigmoidf(z);
        }
    }
    if (p.valid) atomicAdd(&ddecay_log[ch], dwlog);
}

// Launches the kernel that `pick` returns for this head dimension (pick(std::integral_constant<int,
// DH>)) over one DH-lane group per (word, head), and checks the launch.
template <class Pick, class... Args>
void launch_groups(const char* name, std::size_t dh, std::size_t groups, cudaStream_t stream, Pick&& pick,
                   Args... args) {
    auto launch = [&](auto head_dim) {
        constexpr int DH = decltype(head_dim)::value;
        const unsigned blocks = unsigned((groups * DH + block_threads - 1) / block_threads);
        pick(head_dim)<<<blocks, block_threads, 0, stream>>>(args...);
    };
    switch (dh) {
        case 4: launch(std::integral_constant<int, 4>{}); break;
        case 8: launch(std::integral_constant<int, 8>{}); break;
        case 16: launch(std::integral_constant<int, 16>{}); break;
        case 32: launch(std::integral_constant<int, 32>{}); break;
        default: throw std::invalid_argument("no CUDA recurrence kernel for this head dimension");
    }
    check(cudaGetLastError(), name);
}

}  // namespace

void delta_forward(const DeltaShape& s, const float* act, const float* zbeta, float* o, float* u, float* final,
                   cudaStream_t stream) {
    launch_groups("delta_forward", s.dh, s.B * s.H, stream, [&](auto dh) {
        constexpr int DH = decltype(dh)::value;
        return u ? delta_forward_kernel<DH, true> : delta_forward_kernel<DH, false>;
    }, s, act, zbeta, o, u, final);
}

void delta_backward(const DeltaShape& s, const float* act, const float* zbeta, const float* u, const float* final,
                    const float* dO, float* dact, float* dzbeta, cudaStream_t stream) {
    launch_groups("delta_backward", s.dh, s.B * s.H, stream,
                  [](auto dh) { return delta_backward_kernel<decltype(dh)::value>; }, s, act, zbeta, u, final, dO, dact,
                  dzbeta);
}

void diagonal_forward(const DiagonalShape& s, const float* act, const float* zdt, const float* decay_log, float* o,
                      float* states, cudaStream_t stream) {
    launch_groups("diagonal_forward", s.dh, s.B * s.H, stream, [&](auto dh) {
        constexpr int DH = decltype(dh)::value;
        return states ? diagonal_forward_kernel<DH, true> : diagonal_forward_kernel<DH, false>;
    }, s, act, zdt, decay_log, o, states);
}

void diagonal_backward(const DiagonalShape& s, const float* act, const float* zdt, const float* decay_log,
                       const float* states, const float* dO, float* dact, float* dzdt, float* ddecay_log,
                       cudaStream_t stream) {
    launch_groups("diagonal_backward", s.dh, s.B * s.H, stream,
                  [](auto dh) { return diagonal_backward_kernel<decltype(dh)::value>; }, s, act, zdt, decay_log, states,
                  dO, dact, dzdt, ddecay_log);
}

}  // namespace statetrack::gpu::cuda
