// The recurrences with the state in registers. A group of DH consecutive lanes owns one (word b,
// head h). The forwards and the diagonal backward hold the state by columns: lane c holds column c
// of S (S[r][c], r = 0..DH-1), the value index; the delta backward holds it by rows. Key-side
// vectors (k, q, the decay) are broadcast to the whole group through shared memory (one store,
// then DH/4 16-byte broadcast loads: shuffles, one per value, made the recurrences 40% of a
// training step in the ncu profile of 2026-11-22). Sums over c that every
// lane needs one entry of (S g, S k, ...) use a transpose-reduction: DH - 1 shuffles, after which
// lane r holds entry r. Each lane also applies the short conv + SiLU to its own input columns
// (staged per chunk of steps in shared memory, below). Formulas and order follow delta_forward /
// delta_backward, diagonal_forward / diagonal_backward and the conv in cpu_backend.cpp.
#include <cuda_pipeline.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "activations.cuh"
#include "conv_taps.cuh"
#include "kernels.cuh"

namespace statetrack::gpu::cuda {

namespace {

constexpr unsigned full_mask = 0xffffffffu;
constexpr int block_threads = 128;


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

// How far a lane's group runs (Batch: the recurrences stop at a word's length): to the longest word
// among the warp's groups, as the shuffles need every lane of the warp at every step. A group whose
// word ends sooner runs on through padding, where zero_past_lengths then writes 0 over its outputs;
// in the backward the padding's output gradient is 0, which leaves the state gradients at 0, so that
// the real steps' gradients are those of a pass that stopped at the word's end.
template <class Shape>
__device__ std::size_t warp_steps(const Shape& s, const Place& p) {
    unsigned most = unsigned(word_steps(s, p.b));
#pragma unroll
    for (int k = 16; k >= 1; k /= 2) most = max(most, __shfl_xor_sync(full_mask, most, k));
    return most;
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

// ---- The short causal conv + SiLU of the recurrences' inputs, staged a chunk of steps ahead ----
// The recurrences read the q, k, v projections before their conv: the conv is per column and a lane
// owns its columns (q, k and v of its head and key index, of every factor), so each lane convolves
// its own columns and the convolved activations never go through global memory (the separate conv
// kernels read and wrote them: 2.5 of 16 ms of a T = 256 step, ncu 2026-11-24). A recurrence step
// is a chain of dependent group reductions, so a memory latency inside a step costs its whole
// length: computing the conv inside each step made the kernels 2-3x slower (H100, 2026-11-25).
// So a lane first convolves its columns for a chunk of steps into shared memory (asynchronous
// copies whose latencies overlap), the recurrence reads them there, and the backward turns them,
// after each chunk, into the projections' gradient and the taps' gradient. Measured on the H100
// (2026-11-25, docs/PERFORMANCE.md): the step as fast as with the separate conv kernels at T = 40
// and 3.5% faster at T = 256, with 18% less device memory (no convolved copy of q, k, v).
struct Conv {
    const float* __restrict__ pre;  // [N][ld] projections, before the conv (their columns first)
    const float* __restrict__ w;    // [columns][K] taps
    std::size_t ld, columns;
    int K;              // taps (at most the kernel's KT)
    std::size_t chunk;  // steps staged at once (conv_chunk)
};
// The kernels take the taps as KT = 4 or 8 (a compile-time length, so that the windows below stay in
// registers and their loads overlap: with the tap count known only at run time the conv phases
// were slower than the whole recurrence), K < KT padded in front with zeros (load_conv_taps).
// A lane's rows of dynamic shared memory, lane-interleaved (no bank conflicts): entry (slot, i) of
// an area of `length` entries per slot. The areas of a lane, one after the other: raw (chunk + KT -
// 1 rows of pre per slot), stage (chunk: the conv sums, then in the backward their gradients), and
// in the backward the carry (KT - 1: the gradients of the first rows of the chunk after) and the
// tap gradients (KT).
struct LaneArea {
    float* first;
    unsigned length;  // 32-bit offsets within the block's shared memory
    __device__ float& at(unsigned slot, unsigned i) const { return first[(slot * length + i) * block_threads]; }
    // Entry (slot, 0); entry (slot, i) is block_threads floats further per i.
    __device__ float* row0(unsigned slot) const { return first + slot * length * block_threads; }
};
// Floats of dynamic shared memory per lane (the launch gives block_threads times this).
std::size_t staged_floats(std::size_t slots, std::size_t chunk, std::size_t KT, bool backward) {
    return slots * (2 * chunk + KT - 1 + (backward ? 2 * KT - 1 : 0));
}
// At most 32 steps, fewer where a block would need more than 64 KiB (three blocks fit in an SM's
// shared memory, as many as the delta backward's registers allow), at least 1; a multiple of
// `multiple` (the diagonal recurrence's state checkpoints, below), which can take it past 64 KiB
// where fewer steps would fit (make_cuda_session checks the same bytes against the GPU's limit).
std::size_t conv_chunk(std::size_t slots, std::size_t KT, std::size_t multiple = 1) {
    const std::size_t per_lane = 64 * 1024 / sizeof(float) / block_threads, fixed = 3 * KT - 2;
    const std::size_t fit = per_lane / slots > fixed ? (per_lane / slots - fixed) / 2 : 0;
    const std::size_t chunk = std::clamp<std::size_t>(fit, 1, 32);
    return std::max(multiple, chunk / multiple * multiple);
}
__device__ LaneArea lane_area(std::size_t offset, std::size_t length) {
    extern __shared__ float lane_shared[];
    return {lane_shared + unsigned(offset) * block_threads + threadIdx.x, unsigned(length)};
}
// The lane's areas for a chunk of cv.chunk steps over `slots` columns.
template <int KT>
struct ConvAreas {
    LaneArea raw, stage, carry, taps;
    __device__ ConvAreas(const Conv& cv, std::size_t slots)
        : raw(lane_area(0, cv.chunk + KT - 1)),
          stage(lane_area(slots * (cv.chunk + KT - 1), cv.chunk)),
          carry(lane_area(slots * (2 * cv.chunk + KT - 1), KT - 1)),
          taps(lane_area(slots * (2 * cv.chunk + 2 * KT - 2), KT)) {}
};

// The stage's conv sums of rows t0 .. t1 - 1 (n0 the word's row 0) for every slot, in the CPU
// reference's order of taps; column(slot) is the slot's column of `pre`. The rows t0 - KT + 1 ..
// t1 - 1 are first copied to `raw` by asynchronous copies, all in flight at once (loads in the
// conv's loop waited one after the other: a memory latency per row).
// The source and destination advance by a stride: computing each row's 64-bit address from its
// index cost ~29 instructions a row (SASS of the delta backward), a quarter of a step's.
template <int KT, class Column>
__device__ void stage_conv(const Conv& cv, const ConvAreas<KT>& a, std::size_t slots, Column column, std::size_t n0,
                           std::size_t t0, std::size_t t1) {
    const unsigned rows = unsigned(t1 - t0) + KT - 1;
    const unsigned before = t0 < KT - 1 ? unsigned(KT - 1 - t0) : 0;  // rows before the word: zeros
    for (std::size_t s = 0; s < slots; ++s) {
        float* dst = a.raw.row0(unsigned(s));
        const float* src = cv.pre + (n0 + t0 + before - (KT - 1)) * cv.ld + column(s);
        for (unsigned i = 0; i < before; ++i) dst[i * block_threads] = 0;
        for (unsigned i = before; i < rows; ++i, src += cv.ld)
            __pipeline_memcpy_async(dst + i * block_threads, src, sizeof(float));
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);
    for (std::size_t s = 0; s < slots; ++s) {
        float w[KT], x[KT];  // x[j]: pre at row t - KT + 1 + j
        load_conv_taps(cv.w, column(s), std::size_t(cv.K), w);
#pragma unroll
        for (int j = 0; j + 1 < KT; ++j) x[j] = a.raw.at(s, std::size_t(j));
        for (std::size_t i = 0; i < t1 - t0; ++i) {
            x[KT - 1] = a.raw.at(s, i + KT - 1);
            float z = 0;
#pragma unroll
            for (int j = 0; j < KT; ++j) z += w[j] * x[j];
            a.stage.at(s, i) = z;
#pragma unroll
            for (int j = 0; j + 1 < KT; ++j) x[j] = x[j + 1];
        }
    }
}

// After the reverse pass over rows t0 .. t1 - 1 the stage holds g_t, the gradients of the conv sums,
// and the carry those of rows t1 .. t1 + KT - 2 (zero past the kernel's last step). Writes dpre_t = sum_i
// w[KT-1-i] g_{t+i} (valid lanes), adds g_t pre_{t-KT+1+j} to tap j's gradient, and leaves in the
// carry the gradients of rows t0 .. t0 + KT - 2 for the chunk before.
template <int KT, class Column>
__device__ void conv_backward_chunk(const Conv& cv, const ConvAreas<KT>& a, std::size_t slots, Column column,
                                    std::size_t n0, std::size_t t0, std::size_t t1, float* dpre, bool valid) {
    const unsigned ld = unsigned(cv.ld);  // a few columns of q, k, v: 32 bits
    for (std::size_t s = 0; s < slots; ++s) {
        const std::size_t col = column(s);
        float* out = dpre + (n0 + t0) * cv.ld + col;  // row t0 of the column
        const float* stage = a.stage.row0(unsigned(s));
        const float* raw = a.raw.row0(unsigned(s));
        float w[KT], g[KT], acc[KT];  // g[i] = g_{t+i}
        load_conv_taps(cv.w, col, std::size_t(cv.K), w);
#pragma unroll
        for (int i = 1; i < KT; ++i) g[i] = a.carry.at(s, std::size_t(i - 1));
#pragma unroll
        for (int j = 0; j < KT; ++j) acc[j] = 0;
        for (unsigned i = unsigned(t1 - t0); i-- > 0;) {  // raw entry i + j is pre at row t0 + i - KT + 1 + j
            g[0] = stage[i * block_threads];
            float dx = 0;
#pragma unroll
            for (int k = 0; k < KT; ++k) dx += w[KT - 1 - k] * g[k];
            if (valid) out[i * ld] = dx;
#pragma unroll
            for (int j = 0; j < KT; ++j) acc[j] += g[0] * raw[(i + j) * block_threads];
#pragma unroll
            for (int k = KT - 1; k > 0; --k) g[k] = g[k - 1];
        }
#pragma unroll
        for (int i = 0; i + 1 < KT; ++i) a.carry.at(s, std::size_t(i)) = g[i + 1];
#pragma unroll
        for (int j = 0; j < KT; ++j) a.taps.at(s, std::size_t(j)) += acc[j];
    }
}
// The backward starts with no gradient past the word and none of the taps.
template <int KT>
__device__ void zero_carry_and_taps(const ConvAreas<KT>& a, std::size_t slots) {
    for (std::size_t s = 0; s < slots; ++s) {
        for (std::size_t i = 0; i + 1 < KT; ++i) a.carry.at(s, i) = 0;
        for (std::size_t j = 0; j < KT; ++j) a.taps.at(s, j) = 0;
    }
}
// The slots' tap gradients (the K real ones of KT) of word b into its partial sums, [b][ld][K], once
// the lane is done: every (word, column, tap) has one writer, and add_partial_sums adds the words in
// order (atomic adds into dconv made runs differ in the last bits).
template <int KT, class Column>
__device__ void write_tap_grads(const Conv& cv, const LaneArea& taps, std::size_t slots, Column column, std::size_t b,
                                float* partials) {
    float* word = partials + b * cv.columns * std::size_t(cv.K);
    for (std::size_t s = 0; s < slots; ++s)
        for (int j = 0; j < cv.K; ++j) word[column(s) * std::size_t(cv.K) + j] = taps.at(s, std::size_t(KT - cv.K + j));
}

// The staged columns per lane: q, and k and v of each factor (delta_slots, kernels.cuh); the diagonal
// recurrence's q, k, v.
constexpr std::size_t diagonal_slots = 3;

// Where one lane's columns are: slot 0 is q, slot 1 + 2 j is k of factor j, 2 + 2 j is v of factor j.
struct DeltaLane {
    std::size_t H, h, c, dh, d, Fd, ld;  // ld: the row stride of zbeta and dzbeta
    __device__ std::size_t q() const { return h * dh + c; }
    __device__ std::size_t k(std::size_t j) const { return d + (j * H + h) * dh + c; }
    __device__ std::size_t kv(std::size_t j) const { return k(j) - d; }  // the factor's column in [N][F d] arrays
    __device__ std::size_t column(std::size_t slot) const {
        return slot == 0 ? q() : k((slot - 1) / 2) + ((slot - 1) % 2) * Fd;
    }
};
template <int DH>
__device__ DeltaLane delta_lane(const DeltaShape& s, const Place& p) {
    const std::size_t d = s.H * DH;
    return {s.H, p.h, std::size_t(p.c), DH, d, s.F * d, s.ld};
}
// The inputs of factor j at step i of the chunk (row n). The kernels read them a substep ahead (the
// next factor, or the next step's first factor), so that a step's chain of group reductions does
// not also wait for memory.
struct FactorInputs {
    float zk, zv, zbeta;  // the conv sums (SiLU inputs) of k and v, the beta logit
    float u;              // backward: the forward's u = v - S^T k
};
__device__ FactorInputs load_factor(const DeltaLane& l, const LaneArea& stage, const float* zbeta,
                                    const float* u_saved, std::size_t n, std::size_t i, std::size_t j) {
    return {stage.at(1 + 2 * j, i), stage.at(2 + 2 * j, i), zbeta[n * l.ld + j * l.H + l.h],
            u_saved ? u_saved[n * l.Fd + l.kv(j)] : 0.0f};
}

// FT: the factor count when known at compile time (1 or 2; 0: s.F), so that the loops over factors
// and over the staged columns unroll.
template <int DH, int KT, int FT, bool TRAIN>
__global__ void __launch_bounds__(block_threads) delta_forward_kernel(DeltaShape s, Conv cv, const float* zbeta,
                                                                      float* o, float* u_out, float* final) {
    const Place p = place<DH>(s.B, s.H);
    const std::size_t H = s.H, F = FT ? FT : s.F, d = H * DH, slots = delta_slots(F);
    const DeltaLane lane = delta_lane<DH>(s, p);
    const ConvAreas<KT> area(cv, slots);
    const LaneArea& stage = area.stage;
    auto column = [lane](std::size_t slot) { return lane.column(slot); };
    float S[DH], kb[DH];
#pragma unroll
    for (int r = 0; r < DH; ++r) S[r] = 0;
    const std::size_t n0 = first_row(s, p.b);
    for (std::size_t t0 = 0; t0 < warp_steps(s, p); t0 += cv.chunk) {  // to the warp's longest word
        const std::size_t t1 = min(warp_steps(s, p), t0 + cv.chunk);
        stage_conv<KT>(cv, area, slots, column, n0, t0, t1);
        FactorInputs next = load_factor(lane, stage, zbeta, nullptr, n0 + t0, 0, 0);
        for (std::size_t t = t0; t < t1; ++t) {
            const std::size_t n = n0 + t, i = t - t0;
            const float q_raw = siluf(stage.at(0, i));
            for (std::size_t j = 0; j < F; ++j) {
                const FactorInputs in = next;
                if (j + 1 < F) next = load_factor(lane, stage, zbeta, nullptr, n, i, j + 1);
                else if (t + 1 < t1) next = load_factor(lane, stage, zbeta, nullptr, n + 1, i + 1, 0);
                float knorm;
                const float k = l2_normalise<DH>(siluf(in.zk), knorm);
                const float beta = s.beta_scale * sigmoidf(in.zbeta);
                float u = siluf(in.zv);
                broadcast<DH>(k, p.slot, p.c, kb);
#pragma unroll
                for (int r = 0; r < DH; ++r) u -= S[r] * kb[r];
#pragma unroll
                for (int r = 0; r < DH; ++r) S[r] += beta * kb[r] * u;
                if (TRAIN && p.valid) u_out[n * lane.Fd + lane.kv(j)] = u;
            }
            float qnorm;
            const float q = l2_normalise<DH>(q_raw, qnorm);
            broadcast<DH>(q, p.slot, p.c, kb);
            float out = 0;
#pragma unroll
            for (int r = 0; r < DH; ++r) out += S[r] * kb[r];
            if (p.valid) o[n * d + lane.q()] = out;
        }
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
// Lane r's columns are q_r, k_{j,r} and v_{j,r}: the stage entry of each, read as a conv sum z,
// is replaced by the gradient of z once the step is done.
template <int DH, int KT, int FT>
__global__ void __launch_bounds__(block_threads, 3) delta_backward_kernel(DeltaShape s, Conv cv, const float* zbeta,
                                                                       const float* u_saved, const float* final,
                                                                       const float* dO, float* dpre, float* partials,
                                                                       float* dzbeta) {
    const Place p = place<DH>(s.B, s.H);
    const std::size_t H = s.H, F = FT ? FT : s.F, d = H * DH, slots = delta_slots(F);
    const DeltaLane lane = delta_lane<DH>(s, p);
    const ConvAreas<KT> area(cv, slots);
    const LaneArea& stage = area.stage;
    zero_carry_and_taps(area, slots);
    auto column = [lane](std::size_t slot) { return lane.column(slot); };
    float S[DH], dS[DH], w[DH], vb[DH];
    load_row<DH>(final + ((p.b * H + p.h) * DH + std::size_t(p.c)) * DH, S);
#pragma unroll
    for (int c = 0; c < DH; ++c) dS[c] = 0;
    const std::size_t n0 = first_row(s, p.b), qcol = lane.q();
    for (std::size_t t1 = warp_steps(s, p); t1 > 0;) {
        const std::size_t t0 = t1 > cv.chunk ? t1 - cv.chunk : 0;
        stage_conv<KT>(cv, area, slots, column, n0, t0, t1);
        FactorInputs next = load_factor(lane, stage, zbeta, u_saved, n0 + t1 - 1, t1 - 1 - t0, F - 1);
        float g_next = dO[(n0 + t1 - 1) * d + qcol];
        for (std::size_t t = t1; t-- > t0;) {
            const std::size_t n = n0 + t, i = t - t0;
            // o = S_t^T q: dq = S_t g, dS += q g^T; then back through the L2 norm of q
            const float zq = stage.at(0, i);
            float qnorm;
            const float q = l2_normalise<DH>(siluf(zq), qnorm);
            broadcast<DH>(g_next, p.slot, p.c, vb);
            const float dq = dot<DH>(S, vb);
#pragma unroll
            for (int c = 0; c < DH; ++c) dS[c] += q * vb[c];
            const float dq_raw = (dq - q * group_sum<DH>(q * dq)) / qnorm;
            stage.at(0, i) = dq_raw * silu_gradf(zq);
            for (std::size_t j = F; j-- > 0;) {
                const FactorInputs in = next;
                if (j > 0) {
                    next = load_factor(lane, stage, zbeta, u_saved, n, i, j - 1);
                } else if (t > t0) {
                    next = load_factor(lane, stage, zbeta, u_saved, n - 1, i - 1, F - 1);
                    g_next = dO[(n - 1) * d + qcol];
                }
                float knorm;
                const float k = l2_normalise<DH>(siluf(in.zk), knorm);
                const float sg = sigmoidf(in.zbeta);
                const float beta = s.beta_scale * sg;
                const float u = in.u;
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
                stage.at(1 + 2 * j, i) = dk_raw * silu_gradf(in.zk);
                stage.at(2 + 2 * j, i) = du * silu_gradf(in.zv);  // dv = du
                if (p.valid && p.c == 0) dzbeta[n * lane.ld + j * H + p.h] = db * s.beta_scale * sg * (1.0f - sg);
            }
        }
        conv_backward_chunk<KT>(cv, area, slots, column, n0, t0, t1, dpre, p.valid);
        t1 = t0;
    }
    if (p.valid) write_tap_grads<KT>(cv, area.taps, slots, column, p.b, partials);
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

// Training keeps the state after every second step only (a checkpoint: steps 1, 3, 5, ...), and the
// backward recomputes the state between two checkpoints in registers. Keeping every state took N H
// dh^2 floats (4.3 GB a layer at T = 256, batch 1024), written once and read twice: the traffic,
// not the arithmetic, set the time of the mamba step. (Checkpoints every fourth step, the states
// between them recomputed into a per-group scratch in global memory, were slower overall: the
// scratch did not stay in L2, and the backward took 3.15 ms a layer at T = 256 against 2.61 here;
// H100, docs/PERFORMANCE.md, 2026-11-26.)
constexpr std::size_t state_every = 2;
// The checkpoints of a word and head: [B][T / 2][H][dh][dh], the state after step 2 j + 1 at j
// (F: float, or const float for the backward, which only reads them).
template <class F>
__device__ F* diagonal_checkpoint(const DiagonalShape& s, F* saved, std::size_t b, std::size_t h, std::size_t j) {
    return saved + ((b * (s.T / state_every) + j) * s.H + h) * s.dh * s.dh;
}
// S <- Diag(a) S + k v^T for lane c's column, a and k (this lane's key index) broadcast in turn
// through kb: one function, so that the backward's recomputed states are the forward's bit for bit,
// and one broadcast buffer, so that the backward's recomputation fits its registers.
template <int DH>
__device__ void diagonal_update(float (&S)[DH], float (&kb)[DH], float a, float k, float v, float* slot, int c) {
    broadcast<DH>(a, slot, c, kb);
#pragma unroll
    for (int r = 0; r < DH; ++r) S[r] *= kb[r];
    broadcast<DH>(k, slot, c, kb);
#pragma unroll
    for (int r = 0; r < DH; ++r) S[r] = fmaf(kb[r], v, S[r]);
}
// Lane c's column of a [DH][DH] state into memory.
template <int DH>
__device__ void store_column(float* state, int c, const float (&S)[DH]) {
#pragma unroll
    for (int r = 0; r < DH; ++r) state[r * DH + c] = S[r];
}

// Lane (h, c) of the diagonal recurrence has the columns q, k, v of channel h dh + c (slots 0, 1, 2).
template <int DH, int KT, bool TRAIN>
__global__ void __launch_bounds__(block_threads) diagonal_forward_kernel(DiagonalShape s, Conv cv, const float* zdt,
                                                                         const float* bias, const float* decay_log,
                                                                         float* o, float* saved) {
    const Place p = place<DH>(s.B, s.H);
    const std::size_t H = s.H, d = H * DH, ch = p.h * DH + p.c;
    const ConvAreas<KT> area(cv, diagonal_slots);
    const LaneArea& stage = area.stage;
    auto column = [d, ch](std::size_t slot) { return slot * d + ch; };
    float S[DH], kb[DH];
#pragma unroll
    for (int r = 0; r < DH; ++r) S[r] = 0;
    const float wlog = decay_log[ch], zb = bias[ch];
    const std::size_t n0 = first_row(s, p.b);
    for (std::size_t t0 = 0; t0 < warp_steps(s, p); t0 += cv.chunk) {  // to the warp's longest word
        const std::size_t t1 = min(warp_steps(s, p), t0 + cv.chunk);
        stage_conv<KT>(cv, area, diagonal_slots, column, n0, t0, t1);
        for (std::size_t t = t0; t < t1; ++t) {
            const std::size_t n = n0 + t, i = t - t0;
            const float a = diagonal_gate(zdt[n * s.ld + ch] + zb, wlog, s.signed_range).a;  // lane c holds a[c] (key index c)
            const float q = siluf(stage.at(0, i)), k = siluf(stage.at(1, i)), v = siluf(stage.at(2, i));
            diagonal_update<DH>(S, kb, a, k, v, p.slot, p.c);
            broadcast<DH>(q, p.slot, p.c, kb);
            float out = 0;
#pragma unroll
            for (int r = 0; r < DH; ++r) out += S[r] * kb[r];
            if (p.valid) {
                o[n * d + ch] = out;
                if (TRAIN && (t + 1) % state_every == 0)
                    store_column<DH>(diagonal_checkpoint(s, saved, p.b, p.h, (t + 1) / state_every - 1), p.c, S);
            }
        }
    }
}

template <int DH, int KT>
__global__ void __launch_bounds__(block_threads, 3) diagonal_backward_kernel(DiagonalShape s, Conv cv, const float* zdt,
                                                                          const float* bias, const float* decay_log,
                                                                          const float* saved,
                                                                          const float* dO, float* dpre, float* partials,
                                                                          float* dzdt) {
    const Place p = place<DH>(s.B, s.H);
    const std::size_t H = s.H, d = H * DH, ch = p.h * DH + p.c;
    const ConvAreas<KT> area(cv, diagonal_slots);
    const LaneArea& stage = area.stage;
    zero_carry_and_taps(area, diagonal_slots);
    auto column = [d, ch](std::size_t slot) { return slot * d + ch; };
    float dS[DH], w[DH], kb[DH];
#pragma unroll
    for (int r = 0; r < DH; ++r) dS[r] = 0;
    const float wlog = decay_log[ch], zb = bias[ch];
    float dwlog = 0, dbias = 0;  // this word's sums of the decay's and the logits' bias gradients
    const std::size_t n0 = first_row(s, p.b);
    // The gate of step t, from its logit z (the pair's first step needs it for the recomputation too).
    auto gate_of = [&](std::size_t t, float& z) {
        z = zdt[(n0 + t) * s.ld + ch] + zb;
        return diagonal_gate(z, wlog, s.signed_range);
    };
    // One step back: lane c's column of S_t (St) and S_{t-1} (Sp), by index r, read from memory or
    // from registers; at the word's first step (first) there is no S_{t-1}.
    auto step = [&](std::size_t t, std::size_t i, float z, const Gate& gate, auto St, auto Sp, bool first) {
        const std::size_t n = n0 + t;
        const float zq = stage.at(0, i), zk = stage.at(1, i), zv = stage.at(2, i);
        const float q = siluf(zq), k = siluf(zk), v = siluf(zv);
        const float g = dO[n * d + ch];
        // dq = S_t g; dS += q g^T
#pragma unroll
        for (int r = 0; r < DH; ++r) w[r] = St(r) * g;
        const float dq = transpose_reduce<DH>(w, p.c);
        broadcast<DH>(q, p.slot, p.c, kb);
#pragma unroll
        for (int r = 0; r < DH; ++r) dS[r] += kb[r] * g;
        broadcast<DH>(k, p.slot, p.c, kb);
        float dv = 0;
#pragma unroll
        for (int r = 0; r < DH; ++r) dv += dS[r] * kb[r];
#pragma unroll
        for (int r = 0; r < DH; ++r) w[r] = first ? 0.0f : dS[r] * Sp(r);
        const float da = transpose_reduce<DH>(w, p.c);
#pragma unroll
        for (int r = 0; r < DH; ++r) w[r] = dS[r] * v;
        const float dk = transpose_reduce<DH>(w, p.c);
        broadcast<DH>(gate.a, p.slot, p.c, kb);
#pragma unroll
        for (int r = 0; r < DH; ++r) dS[r] *= kb[r];
        const float common = da * (s.signed_range ? 2.0f : 1.0f) * gate.decay;
        dwlog -= common * gate.delta * gate.ew;
        stage.at(0, i) = dq * silu_gradf(zq), stage.at(1, i) = dk * silu_gradf(zk), stage.at(2, i) = dv * silu_gradf(zv);
        const float dz = -common * gate.ew * sigmoidf(z);
        dbias += dz;
        if (p.valid) dzdt[n * s.ld + ch] = dz;
    };
    auto in_memory = [&](std::size_t j) {  // checkpoint j: the state after step 2 j + 1
        const float* column = diagonal_checkpoint(s, saved, p.b, p.h, j) + p.c;
        return [column](int r) { return column[r * DH]; };
    };
    float S[DH];  // the state after the pair's first step, recomputed
    for (std::size_t t1 = warp_steps(s, p); t1 > 0;) {
        const std::size_t t0 = (t1 - 1) / cv.chunk * cv.chunk;  // even: the chunk's length is
        stage_conv<KT>(cv, area, diagonal_slots, column, n0, t0, t1);
        // pairs of steps c0, c0 + 1 (c0 even; the word's last may be alone), last pair first
        for (std::size_t c1 = t1; c1 > t0;) {
            const std::size_t c0 = (c1 - 1) / state_every * state_every, i0 = c0 - t0;
            // S_{c0} from the checkpoint before it (zero before the word); the stage still holds this
            // step's conv sums (the steps done so far overwrote later ones only)
            if (c0 > 0) {
                const auto before = in_memory(c0 / state_every - 1);
#pragma unroll
                for (int r = 0; r < DH; ++r) S[r] = before(r);
            } else {
#pragma unroll
                for (int r = 0; r < DH; ++r) S[r] = 0;
            }
            float z0;
            const Gate gate0 = gate_of(c0, z0);
            diagonal_update<DH>(S, kb, gate0.a, siluf(stage.at(1, i0)), siluf(stage.at(2, i0)), p.slot, p.c);
            auto recomputed = [&S](int r) { return S[r]; };
            if (c1 - c0 == 2) {
                float z1;
                const Gate gate1 = gate_of(c0 + 1, z1);
                step(c0 + 1, i0 + 1, z1, gate1, in_memory(c0 / state_every), recomputed, false);
            }
            // (checkpoint 0 is not read at c0 = 0)
            step(c0, i0, z0, gate0, recomputed, in_memory(c0 > 0 ? c0 / state_every - 1 : 0), c0 == 0);
            c1 = c0;
        }
        conv_backward_chunk<KT>(cv, area, diagonal_slots, column, n0, t0, t1, dpre, p.valid);
        t1 = t0;
    }
    if (p.valid) {
        write_tap_grads<KT>(cv, area.taps, diagonal_slots, column, p.b, partials);
        partials[s.B * cv.columns * std::size_t(cv.K) + p.b * d + ch] = dwlog;  // after the taps' [B][3 d][K]
        partials[s.B * cv.columns * std::size_t(cv.K) + (s.B + p.b) * d + ch] = dbias;  // after dwlog's [B][d]
    }
}

// Launches the kernel that `pick` returns for this head dimension and tap length KT = conv_tap_length(K)
// (pick(std::integral_constant<int, DH>, std::integral_constant<int, KT>)) over one DH-lane group per
// (word, head), with `shared_bytes` of dynamic shared memory per block (near the default 48 KiB,
// which the static broadcast slots share, the kernel is allowed more first), and checks the launch.
template <class Pick, class... Args>
void launch_groups(const char* name, std::size_t dh, std::size_t K, std::size_t groups, std::size_t shared_bytes,
                   cudaStream_t stream, Pick&& pick, Args... args) {
    auto launch = [&](auto head_dim, auto taps) {
        constexpr int DH = decltype(head_dim)::value;
        const unsigned blocks = unsigned((groups * DH + block_threads - 1) / block_threads);
        const auto kernel = pick(head_dim, taps);
        if (shared_bytes > 32 * 1024)
            check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)), name);
        kernel<<<blocks, block_threads, shared_bytes, stream>>>(args...);
    };
    auto with_taps = [&](auto head_dim) {
        if (conv_tap_length(K) == 4) launch(head_dim, std::integral_constant<int, 4>{});
        else launch(head_dim, std::integral_constant<int, 8>{});
    };
    switch (dh) {
        case 4: with_taps(std::integral_constant<int, 4>{}); break;
        case 8: with_taps(std::integral_constant<int, 8>{}); break;
        case 16: with_taps(std::integral_constant<int, 16>{}); break;
        case 32: with_taps(std::integral_constant<int, 32>{}); break;
        default: throw std::invalid_argument("no CUDA recurrence kernel for this head dimension");
    }
    check(cudaGetLastError(), name);
}

// The conv of a recurrence's inputs (`slots` columns per lane, K taps) and its kernels' dynamic
// shared memory.
struct ConvLaunch {
    const float* pre;
    const float* w;
    std::size_t columns, ld, K, slots;
    bool backward;
    std::size_t multiple = 1;  // of the chunk's length
    std::size_t KT() const { return conv_tap_length(K); }
    std::size_t chunk() const { return conv_chunk(slots, KT(), multiple); }
    Conv conv() const { return {pre, w, ld, columns, int(K), chunk()}; }
    std::size_t bytes() const { return staged_floats(slots, chunk(), KT(), backward) * block_threads * sizeof(float); }
};

// The backward stages the most (carry and tap gradients), plus place()'s broadcast slots.
std::size_t recurrence_shared_bytes(std::size_t slots, std::size_t K, std::size_t multiple) {
    const ConvLaunch backward{nullptr, nullptr, 0, 0, K, slots, true, multiple};
    return backward.bytes() + block_threads * sizeof(float);
}

}  // namespace

std::size_t delta_shared_bytes(std::size_t F, std::size_t K) { return recurrence_shared_bytes(delta_slots(F), K, 1); }
std::size_t diagonal_shared_bytes(std::size_t K) { return recurrence_shared_bytes(diagonal_slots, K, state_every); }

// Packed words (offsets) only where a warp's groups are one word's (recurrences_pack, first_row).
void check_packing(const std::int32_t* offsets, std::size_t dh, std::size_t H, const char* kernel) {
    if (offsets && !recurrences_pack(dh, H))
        throw std::logic_error(std::string(kernel) + ": packed words need a warp's groups to be one word's heads");
}

void delta_forward(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta, float* o, float* u,
                   float* final, cudaStream_t stream) {
    if (delta_forward_in_chunks(s, pre, conv, zbeta, o, u, final, stream)) return;
    if (s.tokens) throw std::logic_error("delta_forward: pre by token where the chunked kernels do not run");
    check_packing(s.offsets, s.dh, s.H, "delta_forward");
    const std::size_t slots = delta_slots(s.F);
    const ConvLaunch cl{pre, conv, s.H * s.dh * slots, s.ld, s.K, slots, false};
    launch_groups("delta_forward", s.dh, s.K, s.B * s.H, cl.bytes(), stream,
                  [&](auto dh, auto kt) {
                      constexpr int DH = decltype(dh)::value, KT = decltype(kt)::value;
                      if (s.F == 1) return u ? delta_forward_kernel<DH, KT, 1, true> : delta_forward_kernel<DH, KT, 1, false>;
                      if (s.F == 2) return u ? delta_forward_kernel<DH, KT, 2, true> : delta_forward_kernel<DH, KT, 2, false>;
                      return u ? delta_forward_kernel<DH, KT, 0, true> : delta_forward_kernel<DH, KT, 0, false>;
                  }, s, cl.conv(), zbeta, o, u, final);
}

std::size_t delta_backward_partials(const DeltaShape& s) { return s.B * s.H * s.dh * delta_slots(s.F) * s.K; }
void delta_backward(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta, const float* u,
                    const float* final, const float* dO, float* dpre, float* dconv, float* dzbeta,
                    const Partials& partials, cudaStream_t stream) {
    if (s.tokens) throw std::logic_error("delta_backward: pre by token takes the chunked kernels");
    check_packing(s.offsets, s.dh, s.H, "delta_backward");
    const std::size_t slots = delta_slots(s.F);
    const ConvLaunch cl{pre, conv, s.H * s.dh * slots, s.ld, s.K, slots, true};
    launch_groups("delta_backward", s.dh, s.K, s.B * s.H, cl.bytes(), stream,
                  [&](auto dh, auto kt) {
                      constexpr int DH = decltype(dh)::value, KT = decltype(kt)::value;
                      if (s.F == 1) return delta_backward_kernel<DH, KT, 1>;
                      if (s.F == 2) return delta_backward_kernel<DH, KT, 2>;
                      return delta_backward_kernel<DH, KT, 0>;
                  }, s, cl.conv(), zbeta, u, final, dO, dpre, partials.scratch, dzbeta);
    partials.sums->push_back({partials.scratch, s.B, cl.columns * s.K, dconv});
}

std::size_t diagonal_saved_floats(const DiagonalShape& s) { return s.B * (s.T / state_every) * s.H * s.dh * s.dh; }
void diagonal_forward(const DiagonalShape& s, const float* pre, const float* conv, const float* zdt, const float* bias,
                      const float* decay_log, float* o, float* saved, cudaStream_t stream) {
    check_packing(s.offsets, s.dh, s.H, "diagonal_forward");
    const ConvLaunch cl{pre, conv, diagonal_slots * s.H * s.dh, s.ld, s.K, diagonal_slots, false, state_every};
    launch_groups("diagonal_forward", s.dh, s.K, s.B * s.H, cl.bytes(), stream,
                  [&](auto dh, auto kt) {
                      constexpr int DH = decltype(dh)::value, KT = decltype(kt)::value;
                      return saved ? diagonal_forward_kernel<DH, KT, true> : diagonal_forward_kernel<DH, KT, false>;
                  }, s, cl.conv(), zdt, bias, decay_log, o, saved);
}

std::size_t diagonal_backward_partials(const DiagonalShape& s) {
    return s.B * s.H * s.dh * (diagonal_slots * s.K + 2);
}
void diagonal_backward(const DiagonalShape& s, const float* pre, const float* conv, const float* zdt, const float* bias,
                       const float* decay_log, const float* saved, const float* dO, float* dpre, float* dconv,
                       float* dzdt, float* dbias, float* ddecay_log, const Partials& partials, cudaStream_t stream) {
    check_packing(s.offsets, s.dh, s.H, "diagonal_backward");
    const ConvLaunch cl{pre, conv, diagonal_slots * s.H * s.dh, s.ld, s.K, diagonal_slots, true, state_every};
    launch_groups("diagonal_backward", s.dh, s.K, s.B * s.H, cl.bytes(), stream,
                  [](auto dh, auto kt) { return diagonal_backward_kernel<decltype(dh)::value, decltype(kt)::value>; }, s,
                  cl.conv(), zdt, bias, decay_log, saved, dO, dpre, partials.scratch, dzdt);
    partials.sums->push_back({partials.scratch, s.B, cl.columns * s.K, dconv});
    partials.sums->push_back({partials.scratch + s.B * cl.columns * s.K, s.B, s.H * s.dh, ddecay_log});
    partials.sums->push_back({partials.scratch + s.B * cl.columns * s.K + s.B * s.H * s.dh, s.B, s.H * s.dh, dbias});
}

}  // namespace statetrack::gpu::cuda
