// The element-wise, normalisation, loss and optimizer kernels of the CUDA backend. Each mirrors
// one building block of cpu_backend.cpp; the formulas are the same, only the loops are threads.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "activations.cuh"
#include "four_values.cuh"
#include "kernels.cuh"
#include "warp_sums.cuh"

namespace statetrack::gpu::cuda {

void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}

namespace {

constexpr int threads = 256;
constexpr unsigned full_mask = 0xffffffffu;

unsigned blocks_for(std::size_t work, int per_block = threads) {
    return unsigned((work + std::size_t(per_block) - 1) / std::size_t(per_block));
}
void launched(const char* name) { check(cudaGetLastError(), name); }

__device__ float warp_sum(float x) {
    for (int s = 16; s >= 1; s /= 2) x += __shfl_xor_sync(full_mask, x, s);
    return x;
}
__device__ double warp_sum(double x) {
    for (int s = 16; s >= 1; s /= 2) x += __shfl_xor_sync(full_mask, x, s);
    return x;
}
// Sum over the block (blockDim.x a multiple of 32, at most 1024); the result is valid in thread 0.
__device__ double block_sum(double x) {
    __shared__ double partial[32];
    x = warp_sum(x);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) partial[warp] = x;
    __syncthreads();
    x = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0;
    if (warp == 0) x = warp_sum(x);
    return x;
}

// ---- Fixed-order sums. A kernel that sums over blocks (or words) writes one partial sum per block
// to `partials`, and the kernels below add those in block order: atomic adds would add them in the
// order the blocks finish, so two runs of one step (or a graph replay and the same calls one by one)
// differed in the last bits and their trajectories drifted apart. A block takes cw <= 32 columns with
// partial_threads threads, i.e. R = partial_threads / cw rows of threads: thread (r, c) adds the parts
// r, r + R, r + 2 R, ... of column c, and the R sums are added by a fixed tree, so the order depends
// on the shape alone. The launcher narrows cw until a thread adds at most partial_loads parts, all in
// flight at once: with one warp per 32 columns the head bias's 2 columns of 8192 parts (T = 256) took
// 99 us and each gain's 128 columns 8.7 us on 4 SMs; the step's sums 122 / 229 us at T = 40 / 256
// (ncu, H100, 2026-11-25). A kernel of this size takes ~4 us, so one launch, not two levels.
constexpr unsigned partial_threads = 1024, partial_loads = 8;
// Block `block` of the sum: columns block * cw .. + cw - 1.
__device__ void add_partial_sums_block(const float* __restrict__ partials, std::size_t parts, std::size_t width,
                                       unsigned cw, float* __restrict__ out, unsigned block) {
    __shared__ float sums[partial_threads];
    const unsigned t = threadIdx.x, rows = partial_threads / cw, r = t / cw;
    const std::size_t c = std::size_t(block) * cw + t % cw;
    float acc = 0;
    if (c < width) {
#pragma unroll partial_loads
        for (std::size_t part = r; part < parts; part += rows) acc += partials[part * width + c];
    }
    sums[t] = acc;
    __syncthreads();
    for (unsigned half = rows / 2; half > 0; half /= 2) {  // rows is a power of two
        if (r < half) sums[t] += sums[t + half * cw];
        __syncthreads();
    }
    if (r == 0 && c < width) out[c] += sums[t];
}
// Up to batched_sums sums in one grid: block b is block b - first[i] of sum i.
constexpr int batched_sums = 32;
struct SumBatch {
    PartialSum sum[batched_sums];
    unsigned cw[batched_sums];
    unsigned first[batched_sums + 1];  // first[count]: the grid
    int count;
};
__global__ void __launch_bounds__(partial_threads) add_partial_sums_batch_kernel(const SumBatch batch) {
    int i = 0;
    while (i + 1 < batch.count && blockIdx.x >= batch.first[i + 1]) ++i;
    const PartialSum& s = batch.sum[i];
    add_partial_sums_block(s.partials, s.parts, s.width, batch.cw[i], s.out, blockIdx.x - batch.first[i]);
}
// *out += the sum of count doubles, by one warp (lane l takes every 32nd from l; the shuffle tree
// is the same every time).
__global__ void add_double_sum_kernel(const double* __restrict__ partials, std::size_t count, double* out) {
    double acc = 0;
    for (std::size_t i = threadIdx.x; i < count; i += 32) acc += partials[i];
    acc = warp_sum(acc);
    if (threadIdx.x == 0) *out += acc;
}

// A warp per row, float4 columns where d allows (a thread per element with a 64-bit division by d
// took 19 / 107 us at T = 40 / 256, twice the bytes' time).
__global__ void embed_forward_kernel(const std::int32_t* tokens, const float* table, float* x, std::size_t rows,
                                     std::size_t d) {
    const std::size_t n = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const unsigned lane = threadIdx.x % 32;
    if (n >= rows) return;
    const float* src = table + std::size_t(tokens[n]) * d;
    float* dst = x + n * d;
    if (d % 4 == 0) {
        for (std::size_t c = lane; c < d / 4; c += 32)
            reinterpret_cast<float4*>(dst)[c] = reinterpret_cast<const float4*>(src)[c];
    } else {
        for (std::size_t c = lane; c < d; c += 32) dst[c] = src[c];
    }
}

// Block (x, y) sums the rows of chunk y for the letters of slice x (as many as fit in 32 KiB of
// shared memory) into its partial table gradient (slices on x: a large vocabulary has more than the
// 65535 blocks a grid's y dimension allows; the row chunks are capped at that). Each thread owns whole columns c, so its
// shared-memory adds need no atomics (with 2 letters, atomics from every thread to 2 x d addresses
// made this 3% of a training step, 144 GB/s).
template <class D>
__global__ void embed_backward_kernel(const std::int32_t* tokens, const D* dx, float* partials, std::size_t rows,
                                      std::size_t d, std::size_t vocab, std::size_t chunk, std::size_t slice) {
    extern __shared__ float acc[];
    const std::size_t v0 = std::size_t(blockIdx.x) * slice, v1 = min(vocab, v0 + slice), width = (v1 - v0) * d;
    for (std::size_t i = threadIdx.x; i < width; i += blockDim.x) acc[i] = 0;
    __syncthreads();
    const std::size_t begin = std::size_t(blockIdx.y) * chunk, end = min(rows, begin + chunk);
    // dx is read whether or not the row's letter is in the slice: a load behind the letter's test
    // waited for the letter's load first, one row after the other (59 us of a T = 40 step, ncu).
    for (std::size_t c = threadIdx.x; c < d; c += blockDim.x) {
#pragma unroll 8
        for (std::size_t n = begin; n < end; ++n) {
            const std::size_t t = std::size_t(tokens[n]);
            const float g = as_float(dx[n * d + c]);
            if (t >= v0 && t < v1) acc[(t - v0) * d + c] += g;
        }
    }
    __syncthreads();
    float* out = partials + std::size_t(blockIdx.y) * vocab * d + v0 * d;
    for (std::size_t i = threadIdx.x; i < width; i += blockDim.x) out[i] = acc[i];
}

// ---- RMSNorm, vectorised: one warp per row, lane l holds the float4 columns 4 (l + 32 k), k < CH
// (d_model 128: one float4 per lane). A group is either the whole row or a run of `seg` lanes (a
// power of two dividing 32), summed by shuffles with strides < seg. The per-element index work
// of the warp-per-(row, group) kernels below (64-bit divisions, scalar loads) kept them at 82-88%
// SM busy, far from the bandwidth floor (ncu, 2026-11-22). ----
constexpr int row_warps = 8;            // warps per block
constexpr unsigned max_row_chunks = 4;  // float4 per lane: rows up to 512 columns
constexpr int norm_blocks_per_sm = 3;   // the backward's blocks per SM (registers capped to fit)

struct RowShape {
    unsigned quads;  // float4 per row
    unsigned seg;    // lanes per group, or 0: one group per row
    unsigned group;  // columns per group
    unsigned groups; // groups per row
};

// The gain lies in the parameter buffer, whose tensors are not 16-byte aligned.
__device__ float4 load4_unaligned(const float* p) { return make_float4(p[0], p[1], p[2], p[3]); }

// part[k]: this lane's term of chunk k's group; afterwards the group's sum.
template <int CH>
__device__ void group_sums(float (&part)[CH], unsigned seg) {
    if (seg == 0) {
        float s = part[0];
#pragma unroll
        for (int k = 1; k < CH; ++k) s += part[k];
        s = warp_sum(s);
#pragma unroll
        for (int k = 0; k < CH; ++k) part[k] = s;
    } else {
#pragma unroll
        for (int k = 0; k < CH; ++k)
            for (unsigned st = seg / 2; st >= 1; st /= 2) part[k] += __shfl_xor_sync(full_mask, part[k], st);
    }
}
__device__ unsigned group_of(unsigned quad, const RowShape& s) { return s.seg ? quad / s.seg : 0; }

// With tokens, the rows are the embedding's: row n is x's row tokens[n] (x the table), written to
// embedded too unless it is null (the first layer's input and residual, as embed_forward writes it).
template <int CH, class Out>
__global__ void rmsnorm_forward_rows_kernel(const float* __restrict__ x, const float* __restrict__ g,
                                            Out* __restrict__ y, float* __restrict__ rinv, unsigned rows,
                                            RowShape s, const std::int32_t* __restrict__ tokens,
                                            float* __restrict__ embedded) {
    const unsigned row = blockIdx.x * row_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;  // the whole warp
    const std::size_t at = std::size_t(row) * s.quads * 4;
    const float* src = tokens ? x + std::size_t(tokens[row]) * s.quads * 4 : x + at;
    float4 v[CH];
    float part[CH];
#pragma unroll
    for (int k = 0; k < CH; ++k) {
        const unsigned i = lane + 32 * k;
        v[k] = i < s.quads ? load4(src + 4 * i) : make_float4(0, 0, 0, 0);
        if (embedded && i < s.quads) store4(embedded + at + 4 * i, v[k]);
        part[k] = v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    }
    group_sums(part, s.seg);
#pragma unroll
    for (int k = 0; k < CH; ++k) {
        const unsigned i = lane + 32 * k;
        if (i >= s.quads) break;
        const float r = 1.0f / sqrtf(part[k] / float(s.group) + norm_eps);
        if (s.seg ? lane % s.seg == 0 : i == 0) rinv[std::size_t(row) * s.groups + group_of(i, s)] = r;
        const float4 gk = load4_unaligned(g + 4 * i), xk = v[k];
        store4(y + at + 4 * i, make_float4(gk.x * xk.x * r, gk.y * xk.y * r, gk.z * xk.z * r, gk.w * xk.w * r));
    }
}

// dx (+)= r g dy - x r^3 sum(g dy x) / group, and the gain gradient dy x r summed over the block's
// rows in registers and shared memory into the block's partial sums (the separate column-sum
// kernel read x and dy a second time). One wave of blocks (as many as fit at once), warps striding
// over the rows: no tail wave, and few partial sums.
// With e.tokens (the first layer's norm, whose dx only the embedding reads), dx is not written: each
// row's is added to its letter's row of the warp's table in shared memory, and the block's tables
// become its partial sums of the embedding's gradient (embed_backward read dx back: 29 / 84 us at
// T = 40 / 256, ncu, H100).
struct EmbedRows {
    const std::int32_t* tokens;  // null: write dx
    float* partials;             // [blocks][vocab][width]
    unsigned vocab;
};
template <int CH, class D>
__global__ void __launch_bounds__(row_warps * 32, norm_blocks_per_sm)
    rmsnorm_backward_rows_kernel(const float* __restrict__ x, const float* __restrict__ g,
                                 const float* __restrict__ rinv, const float* __restrict__ dy, D* dx, const D* before,
                                 bf16* __restrict__ dx16, float* __restrict__ partials, unsigned rows, RowShape s,
                                 bool accumulate, const EmbedRows e) {
    __shared__ float4 partial[row_warps][32 * CH];
    extern __shared__ float4 table[];  // e.tokens: [row_warps][vocab][quads]
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float4* mine = table + std::size_t(warp) * e.vocab * s.quads;
    if (e.tokens) {
        for (unsigned i = lane; i < e.vocab * s.quads; i += 32) mine[i] = make_float4(0, 0, 0, 0);
        __syncwarp();
    }
    float4 gain[CH], acc[CH];
#pragma unroll
    for (int k = 0; k < CH; ++k) {
        const unsigned i = lane + 32 * k;
        gain[k] = i < s.quads ? load4_unaligned(g + 4 * i) : make_float4(0, 0, 0, 0);
        acc[k] = make_float4(0, 0, 0, 0);
    }
    for (unsigned row = blockIdx.x * row_warps + warp; row < rows; row += gridDim.x * row_warps) {
        const std::size_t at = std::size_t(row) * s.quads * 4;
        float4 xv[CH], dv[CH];
        float part[CH], r[CH];
#pragma unroll
        for (int k = 0; k < CH; ++k) {
            const unsigned i = lane + 32 * k;
            const bool in = i < s.quads;
            xv[k] = in ? load4(x + at + 4 * i) : make_float4(0, 0, 0, 0);
            dv[k] = in ? load4(dy + at + 4 * i) : make_float4(0, 0, 0, 0);
            r[k] = in ? rinv[std::size_t(row) * s.groups + group_of(i, s)] : 0.0f;
            const float4 gk = gain[k];
            part[k] = gk.x * dv[k].x * xv[k].x + gk.y * dv[k].y * xv[k].y + gk.z * dv[k].z * xv[k].z +
                      gk.w * dv[k].w * xv[k].w;
        }
        group_sums(part, s.seg);
#pragma unroll
        for (int k = 0; k < CH; ++k) {
            const unsigned i = lane + 32 * k;
            if (i >= s.quads) break;
            const float rk = r[k], dot = part[k], n = float(s.group);
            const float4 gk = gain[k], xk = xv[k], dk = dv[k];
            float4 out = make_float4(rk * gk.x * dk.x - xk.x * rk * rk * rk * dot / n,
                                     rk * gk.y * dk.y - xk.y * rk * rk * rk * dot / n,
                                     rk * gk.z * dk.z - xk.z * rk * rk * rk * dot / n,
                                     rk * gk.w * dk.w - xk.w * rk * rk * rk * dot / n);
            if (accumulate) out = add4(load4(before + at + 4 * i), out);
            if (e.tokens) {  // each lane its own columns of the letter's row: no two lanes add to one
                float4& t = mine[std::size_t(e.tokens[row]) * s.quads + i];
                t = add4(t, out);
            } else {
                store4(dx + at + 4 * i, out);
                if (dx16) store4(dx16 + at + 4 * i, out);
            }
            acc[k].x += dk.x * xk.x * rk, acc[k].y += dk.y * xk.y * rk;
            acc[k].z += dk.z * xk.z * rk, acc[k].w += dk.w * xk.w * rk;
        }
    }
#pragma unroll
    for (int k = 0; k < CH; ++k) partial[warp][lane + 32 * k] = acc[k];
    __syncthreads();
    for (unsigned i = threadIdx.x; i < s.quads; i += blockDim.x) {
        float4 sum = partial[0][i];
        for (int w = 1; w < row_warps; ++w) sum = add4(sum, partial[w][i]);
        store4(partials + (std::size_t(blockIdx.x) * s.quads + i) * 4, sum);
    }
    if (e.tokens)  // the warps' tables added in order (the __syncthreads above covers them)
        for (unsigned i = threadIdx.x; i < e.vocab * s.quads; i += blockDim.x) {
            float4 sum = table[i];
            for (int w = 1; w < row_warps; ++w) sum = add4(sum, table[std::size_t(w) * e.vocab * s.quads + i]);
            store4(e.partials + (std::size_t(blockIdx.x) * e.vocab * s.quads + i) * 4, sum);
        }
}

// The general layouts (a width or group that is not a multiple of 4, as an LSTM's odd d_model,
// or rows wider than 512): one warp per (row, group).
__global__ void rmsnorm_forward_kernel(const float* x, const float* g, float* y, float* rinv, std::size_t rows,
                                       std::size_t width, std::size_t group) {
    const std::size_t groups = width / group;
    const std::size_t w = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const unsigned lane = threadIdx.x % 32;
    if (w >= rows * groups) return;
    const std::size_t n = w / groups, h = w % groups, at = n * width + h * group;
    float ss = 0;
    for (std::size_t i = lane; i < group; i += 32) ss += x[at + i] * x[at + i];
    ss = warp_sum(ss);
    const float r = 1.0f / sqrtf(ss / float(group) + norm_eps);
    if (lane == 0) rinv[w] = r;
    for (std::size_t i = lane; i < group; i += 32) y[at + i] = g[h * group + i] * x[at + i] * r;
}

__global__ void rmsnorm_backward_kernel(const float* x, const float* g, const float* rinv, const float* dy, float* dx,
                                        const float* before, std::size_t rows, std::size_t width, std::size_t group,
                                        bool accumulate) {
    const std::size_t groups = width / group;
    const std::size_t w = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const unsigned lane = threadIdx.x % 32;
    if (w >= rows * groups) return;
    const std::size_t n = w / groups, h = w % groups, at = n * width + h * group;
    const float r = rinv[w];
    float dot = 0;
    for (std::size_t i = lane; i < group; i += 32) dot += g[h * group + i] * dy[at + i] * x[at + i];
    dot = warp_sum(dot);
    for (std::size_t i = lane; i < group; i += 32) {
        const float v = r * g[h * group + i] * dy[at + i] - x[at + i] * r * r * r * dot / float(group);
        dx[at + i] = accumulate ? before[at + i] + v : v;
    }
}

// Column reductions: block row y sums `chunk` rows for every column into partial row y.
// Short chunks: many blocks in flight and short serial chains (256-row chunks measured 6.3 ms/step).
__global__ void rmsnorm_gain_kernel(const float* x, const float* rinv, const float* dy, float* partials,
                                    std::size_t rows, std::size_t width, std::size_t group, std::size_t chunk) {
    const std::size_t groups = width / group;
    const std::size_t begin = std::size_t(blockIdx.y) * chunk, end = min(rows, begin + chunk);
    for (std::size_t c = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; c < width; c += std::size_t(gridDim.x) * blockDim.x) {
        float acc = 0;
        for (std::size_t n = begin; n < end; ++n) acc += dy[n * width + c] * x[n * width + c] * rinv[n * groups + c / group];
        partials[std::size_t(blockIdx.y) * width + c] = acc;
    }
}

__global__ void column_sums_kernel(const float* y, std::size_t ld, float* partials, std::size_t rows, std::size_t cols,
                                   std::size_t chunk) {
    const std::size_t begin = std::size_t(blockIdx.y) * chunk, end = min(rows, begin + chunk);
    for (std::size_t c = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += std::size_t(gridDim.x) * blockDim.x) {
        float acc = 0;
        for (std::size_t n = begin; n < end; ++n) acc += y[n * ld + c];
        partials[std::size_t(blockIdx.y) * cols + c] = acc;
    }
}

__global__ void add_bias_kernel(float* y, std::size_t ld, const float* bias, std::size_t rows, std::size_t cols) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < rows * cols) y[i / cols * ld + i % cols] += bias[i % cols];
}

// One block per word, a warp per row: rows lengths[b] .. T - 1 of word b, columns 0 .. cols - 1.
__global__ void zero_past_lengths_kernel(float* a, std::size_t ld, std::size_t cols, std::size_t T,
                                         const std::int32_t* lengths) {
    const std::size_t b = blockIdx.x, warps = blockDim.x / 32, lane = threadIdx.x % 32;
    for (std::size_t t = std::size_t(lengths[b]) + threadIdx.x / 32; t < T; t += warps) {
        float* row = a + (b * T + t) * ld;
        for (std::size_t c = lane; c < cols; c += 32) row[c] = 0.0f;
    }
}

// Rows from the end of the last of B packed words to N, a warp per row.
template <class T>
__global__ void zero_past_packed_words_kernel(T* a, std::size_t ld, std::size_t cols, std::size_t N, std::size_t B,
                                              const std::int32_t* offsets, const std::int32_t* lengths) {
    const std::size_t first = std::size_t(offsets[B - 1]) + std::size_t(lengths[B - 1]);
    const std::size_t warps = std::size_t(gridDim.x) * blockDim.x / 32, lane = threadIdx.x % 32;
    for (std::size_t n = first + (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; n < N; n += warps)
        for (std::size_t c = lane; c < cols; c += 32) a[n * ld + c] = T(0.0f);
}

// SwiGLU, a thread per float4 of h (m a multiple of 4): the row from one 32-bit division per
// thread, not two 64-bit ones per element.
struct SwigluShape {
    unsigned quads;  // rows * m / 4
    unsigned mq;     // m / 4
};
template <class T>
__global__ void swiglu_forward_kernel(const T* __restrict__ gu, T* __restrict__ h, SwigluShape s) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= s.quads) return;
    const unsigned n = i / s.mq, q = i - n * s.mq;
    const T* row = gu + std::size_t(n) * s.mq * 8 + 4 * q;
    const float4 a = load4(row), u = load4(row + 4 * s.mq);
    store4(h + 4 * std::size_t(i), make_float4(siluf(a.x) * u.x, siluf(a.y) * u.y, siluf(a.z) * u.z, siluf(a.w) * u.w));
}
template <class T>
__global__ void swiglu_backward_kernel(const T* __restrict__ gu, const T* __restrict__ dh, T* __restrict__ dgu,
                                       SwigluShape s) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= s.quads) return;
    const unsigned n = i / s.mq, q = i - n * s.mq;
    const std::size_t at = std::size_t(n) * s.mq * 8 + 4 * q;
    const float4 a = load4(gu + at), u = load4(gu + at + 4 * s.mq), d = load4(dh + 4 * std::size_t(i));
    store4(dgu + at, make_float4(d.x * u.x * silu_gradf(a.x), d.y * u.y * silu_gradf(a.y), d.z * u.z * silu_gradf(a.z),
                                 d.w * u.w * silu_gradf(a.w)));
    store4(dgu + at + 4 * s.mq, make_float4(d.x * siluf(a.x), d.y * siluf(a.y), d.z * siluf(a.z), d.w * siluf(a.w)));
}
// Any m (not a multiple of 4): a thread per element.
__global__ void swiglu_forward_scalar_kernel(const float* gu, float* h, std::size_t rows, std::size_t m) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * m) return;
    const std::size_t n = i / m, c = i % m;
    h[i] = siluf(gu[n * 2 * m + c]) * gu[n * 2 * m + m + c];
}
__global__ void swiglu_backward_scalar_kernel(const float* gu, const float* dh, float* dgu, std::size_t rows, std::size_t m) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * m) return;
    const std::size_t n = i / m, c = i % m;
    const float a = gu[n * 2 * m + c], u = gu[n * 2 * m + m + c];
    dgu[n * 2 * m + c] = dh[i] * u * silu_gradf(a);
    dgu[n * 2 * m + m + c] = dh[i] * siluf(a);
}

__global__ void to_bf16_kernel(const float* __restrict__ x, bf16* __restrict__ y, std::size_t count) {
    for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += std::size_t(gridDim.x) * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}
// The same for rows, a warp per row (cols not a multiple of anything), and zeros in the columns
// cols .. ldy - 1 (the rows' padding).
__global__ void to_bf16_rows_kernel(const float* __restrict__ x, std::size_t ldx, bf16* __restrict__ y,
                                    std::size_t ldy, std::size_t rows, std::size_t cols) {
    const std::size_t warps = std::size_t(gridDim.x) * blockDim.x / 32, lane = threadIdx.x % 32;
    for (std::size_t n = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; n < rows; n += warps)
        for (std::size_t c = lane; c < ldy; c += 32)
            y[n * ldy + c] = c < cols ? __float2bfloat16_rn(x[n * ldx + c]) : __float2bfloat16_rn(0.0f);
}

// The rows of the cross-entropy, G threads a row (G = 1 or 32), grid-stride: loss and correct
// receive this thread's share.
template <unsigned G>
__device__ void cross_entropy_rows(const float* logits, const std::int32_t* targets, float* dlogits, float count,
                                   std::size_t rows, std::size_t classes, double& loss, double& correct) {
    const unsigned lane = threadIdx.x % G;
    const std::size_t stride = std::size_t(gridDim.x) * blockDim.x / G;
    for (std::size_t n = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / G; n < rows; n += stride) {
        const float* z = logits + n * classes;
        float* dz = dlogits + n * classes;
        const int target = targets[n];
        if (target < 0) {
            for (std::size_t k = lane; k < classes; k += G) dz[k] = 0;
            continue;
        }
        // the maximum and its first index (as std::max_element on the CPU)
        float zmax = -INFINITY;
        unsigned at = unsigned(classes);
        for (std::size_t k = lane; k < classes; k += G)
            if (z[k] > zmax || at == unsigned(classes)) zmax = z[k], at = unsigned(k);
        float sum = 0;
        if constexpr (G > 1) {
            for (int s = G / 2; s >= 1; s /= 2) {
                const float other = __shfl_xor_sync(full_mask, zmax, s);
                const unsigned other_at = __shfl_xor_sync(full_mask, at, s);
                if (other > zmax || (other == zmax && other_at < at)) zmax = other, at = other_at;
            }
        }
        for (std::size_t k = lane; k < classes; k += G) sum += expf(z[k] - zmax);
        if constexpr (G > 1) sum = warp_sum(sum);
        if (lane == 0) loss += double(logf(sum) + zmax - z[target]), correct += at == unsigned(target) ? 1.0 : 0.0;
        for (std::size_t k = lane; k < classes; k += G) {
            float p = expf(z[k] - zmax) / sum / count;
            if (k == std::size_t(target)) p -= 1.0f / count;
            dz[k] = p;
        }
    }
}
// A thread per row up to thread_row_classes classes (with a warp per row of 2-5 classes each row was
// a chain of shuffles: 24 / 127 us at T = 40 / 256, ncu, H100), else a warp per row; the block's loss
// and correct count go to partials[block] and partials[blocks + block].
constexpr std::size_t thread_row_classes = 16;
__global__ void cross_entropy_kernel(const float* logits, const std::int32_t* targets, float* dlogits,
                                     const StepParams* params, double* partials, std::size_t rows,
                                     std::size_t classes) {
    double loss = 0, correct = 0;
    if (classes <= thread_row_classes)
        cross_entropy_rows<1>(logits, targets, dlogits, params->count, rows, classes, loss, correct);
    else
        cross_entropy_rows<32>(logits, targets, dlogits, params->count, rows, classes, loss, correct);
    loss = block_sum(loss);
    __syncthreads();  // block_sum's shared partials are reused
    correct = block_sum(correct);
    if (threadIdx.x == 0) partials[blockIdx.x] = loss, partials[gridDim.x + blockIdx.x] = correct;
}

// ---- The head of a training step in one pass over the rows: the final RMSNorm, the logits, the
// cross-entropy and their backward, for up to NC classes and rows of up to 128 columns (d_model
// 128: one float4 per lane). Separately these were seven kernels and three cuBLAS products that
// wrote and read back xn, the logits, their gradient and dxn: ~120 / ~470 us at T = 40 / 256 (ncu,
// H100). Each formula is the separate kernel's, in its order (rmsnorm_forward_rows_kernel,
// cross_entropy_rows, rmsnorm_backward_rows_kernel); the products over the classes are warp sums
// here where cuBLAS summed in its own order, and in fp32 whatever --matmul says (cuBLAS ran the
// logits and dxn, a few columns wide, in fp32 anyway, and the head's weight gradient in TF32). ----
template <class D>
struct HeadStep {
    const float *x, *g, *w, *bias;  // x: [rows][d], the last layer's output; w: [classes][d]
    const std::int32_t* targets;
    const StepParams* params;
    D* dx;                              // [rows][d]: the gradient of x, overwritten
    bf16* dx16;                         // optional bf16 copy of dx (--matmul bf16)
    float *part_w, *part_bias, *part_g;  // per block: [classes][d], [classes], [d]
    double* part_loss;                  // per block: the loss, then (gridDim.x on) the correct count
    unsigned rows, quads, classes;
};
constexpr unsigned head_rows_most = 128, head_classes_most = 8, head_blocks_per_sm = 2;

// A warp takes R consecutive rows at a time (R loads and R chains of sums in flight: one row at a
// time, the kernel waited on each row's chain of shuffles, 244 us at T = 256, 1 TB/s), and loads the
// next R rows before it works on these, so that their latency passes during this work. The gradient
// of w is summed in the warp's slots of shared memory, which leaves registers for the rows. No
// division a column: ncu counted ~410 instructions a row (the kernel issue-bound at 1 TB/s, 85 us
// for half a batch at T = 256, H100), a fifth of them in the divisions' and the exponentials' code;
// without them 58 us.
template <int NC, int R, class D>
__global__ void __launch_bounds__(row_warps * 32, head_blocks_per_sm) head_step_kernel(const HeadStep<D> a) {
    __shared__ float4 red_w[row_warps][NC][32];
    __shared__ float4 red_g[row_warps][32];
    __shared__ float red_bias[row_warps][NC];
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, d = 4 * a.quads;
    const bool in = lane < a.quads;
    const float n = float(d), count = a.params->count;
    // x * inv_n is x / n to the bit where n is a power of two (d 128 at the paper's sizes), within an ulp elsewhere
    const float inv_n = 1.0f / n, inv_count = 1.0f / count;
    const float4 zero = make_float4(0, 0, 0, 0);
    const float4 gk = in ? load4_unaligned(a.g + 4 * lane) : zero;
    float4 wk[NC];
    float acc_bias[NC], bias[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) {
        wk[c] = in && unsigned(c) < a.classes ? load4_unaligned(a.w + std::size_t(c) * d + 4 * lane) : zero;
        bias[c] = unsigned(c) < a.classes ? a.bias[c] : 0.0f;
        red_w[warp][c][lane] = zero, acc_bias[c] = 0;
    }
    float4 acc_g = zero;
    double loss = 0, correct = 0;
    const std::size_t stride = std::size_t(gridDim.x) * row_warps * R;
    // a negative target: unlabelled, no loss and a zero gradient; its row still goes through the
    // products (0 times x), so that a non-finite x spreads as on the CPU
    int next_target[R];
    float4 next_x[R];
    auto load_rows = [&](std::size_t row0) {
#pragma unroll
        for (int k = 0; k < R; ++k) {
            const std::size_t row = row0 + k;
            next_target[k] = row < a.rows ? a.targets[row] : -1;
            next_x[k] = in && row < a.rows ? load4(a.x + row * d + 4 * lane) : zero;
        }
    };
    std::size_t row0 = (std::size_t(blockIdx.x) * row_warps + warp) * R;
    load_rows(row0);
    for (; row0 < a.rows; row0 += stride) {
        int target[R];
        float4 xk[R];
        float ss[R], v[R * NC];  // the rows' sums of squares, then their logits' sums
#pragma unroll
        for (int k = 0; k < R; ++k) {
            target[k] = next_target[k], xk[k] = next_x[k];
            ss[k] = xk[k].x * xk[k].x + xk[k].y * xk[k].y + xk[k].z * xk[k].z + xk[k].w * xk[k].w;
        }
        load_rows(row0 + stride);
        warp_sums(ss);
        float r[R];
        float4 xn[R];
#pragma unroll
        for (int k = 0; k < R; ++k) {
            r[k] = 1.0f / sqrtf(ss[k] * inv_n + norm_eps);
            xn[k] = make_float4(gk.x * xk[k].x * r[k], gk.y * xk[k].y * r[k], gk.z * xk[k].z * r[k], gk.w * xk[k].w * r[k]);
        }
#pragma unroll
        for (int k = 0; k < R; ++k)
#pragma unroll
            for (int c = 0; c < NC; ++c)
                v[k * NC + c] = xn[k].x * wk[c].x + xn[k].y * wk[c].y + xn[k].z * wk[c].z + xn[k].w * wk[c].w;
        warp_sums(v);
        float dot[R];
        float4 dxn[R];
#pragma unroll
        for (int k = 0; k < R; ++k) {
            float z[NC];
#pragma unroll
            for (int c = 0; c < NC; ++c) z[c] = v[k * NC + c] + bias[c];
            // the maximum and its first index, as std::max_element on the CPU
            float zmax = -INFINITY, sum = 0;
            unsigned first = a.classes;
#pragma unroll
            for (int c = 0; c < NC; ++c)
                if (unsigned(c) < a.classes && (z[c] > zmax || first == a.classes)) zmax = z[c], first = unsigned(c);
            float e[NC];  // each class's exponential once
#pragma unroll
            for (int c = 0; c < NC; ++c) {
                e[c] = unsigned(c) < a.classes ? expf(z[c] - zmax) : 0.0f;
                sum += e[c];
            }
            const bool labelled = target[k] >= 0;
            float z_target = 0;  // z[target[k]] by selects: an indexed register array would live in memory
#pragma unroll
            for (int c = 0; c < NC; ++c) z_target = c == target[k] ? z[c] : z_target;
            if (labelled && lane == 0)
                loss += double(logf(sum) + zmax - z_target), correct += first == unsigned(target[k]) ? 1.0 : 0.0;
            const float scale = labelled ? inv_count / sum : 0.0f;  // p = e / sum / count
            dxn[k] = zero;
#pragma unroll
            for (int c = 0; c < NC; ++c) {
                float p = e[c] * scale;
                if (c == target[k]) p -= inv_count;
                dxn[k].x += p * wk[c].x, dxn[k].y += p * wk[c].y, dxn[k].z += p * wk[c].z, dxn[k].w += p * wk[c].w;
                float4& acc = red_w[warp][c][lane];
                acc.x += p * xn[k].x, acc.y += p * xn[k].y, acc.z += p * xn[k].z, acc.w += p * xn[k].w;
                acc_bias[c] += p;
            }
            dot[k] = gk.x * dxn[k].x * xk[k].x + gk.y * dxn[k].y * xk[k].y + gk.z * dxn[k].z * xk[k].z +
                     gk.w * dxn[k].w * xk[k].w;
        }
        warp_sums(dot);
#pragma unroll
        for (int k = 0; k < R; ++k) {
            const std::size_t row = row0 + k;
            if (row >= a.rows || !in) continue;
            const float rk = r[k], c3 = rk * rk * rk * dot[k] * inv_n;
            const float4 x4 = xk[k], g4 = dxn[k];
            const float4 out = make_float4(rk * gk.x * g4.x - x4.x * c3, rk * gk.y * g4.y - x4.y * c3,
                                           rk * gk.z * g4.z - x4.z * c3, rk * gk.w * g4.w - x4.w * c3);
            store4(a.dx + row * d + 4 * lane, out);
            if (a.dx16) store4(a.dx16 + row * d + 4 * lane, out);
            acc_g.x += g4.x * x4.x * rk, acc_g.y += g4.y * x4.y * rk;
            acc_g.z += g4.z * x4.z * rk, acc_g.w += g4.w * x4.w * rk;
        }
    }
    // the block's sums, its warps added in order
    red_g[warp][lane] = acc_g;
    if (lane == 0)  // every lane holds the same sums
#pragma unroll
        for (int c = 0; c < NC; ++c) red_bias[warp][c] = acc_bias[c];
    __syncthreads();
    const unsigned t = threadIdx.x;
    if (t < a.classes * a.quads) {
        const unsigned c = t / a.quads, i = t % a.quads;
        float4 s = red_w[0][c][i];
        for (int w = 1; w < row_warps; ++w) s = add4(s, red_w[w][c][i]);
        store4(a.part_w + (std::size_t(blockIdx.x) * a.classes + c) * d + 4 * i, s);
    }
    if (t < a.quads) {
        float4 s = red_g[0][t];
        for (int w = 1; w < row_warps; ++w) s = add4(s, red_g[w][t]);
        store4(a.part_g + std::size_t(blockIdx.x) * d + 4 * t, s);
    }
    if (t < a.classes) {
        float s = red_bias[0][t];
        for (int w = 1; w < row_warps; ++w) s += red_bias[w][t];
        a.part_bias[std::size_t(blockIdx.x) * a.classes + t] = s;
    }
    loss = block_sum(loss);
    __syncthreads();  // block_sum's shared partials are reused
    correct = block_sum(correct);
    if (threadIdx.x == 0) a.part_loss[blockIdx.x] = loss, a.part_loss[gridDim.x + blockIdx.x] = correct;
}

__global__ void square_sum_kernel(const float* g, double* partials, std::size_t count) {
    double acc = 0;
    for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x)
        acc += double(g[i]) * double(g[i]);
    acc = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void add_half_step_kernel(float* g, const float* half_g, std::size_t count, StepResults* results,
                                     const StepResults* half_results) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i == 0) results->loss_sum += half_results->loss_sum, results->correct += half_results->correct;
    if (i < count) g[i] += half_g[i];
}

// As adamw_step in optimizer.cpp, with the clipping scale from the norm computed on the device.
__global__ void adamw_kernel(const StepParams* params, const StepResults* results, const std::uint8_t* decay_mask,
                             float* w, float* g, float* m, float* v, std::size_t count, StepResults* to_host,
                             bf16* w16) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i == 0 && to_host) *to_host = *results;
    if (i >= count) return;
    const StepParams p = *params;
    const double norm = sqrt(results->grad_sq);
    const float scale = p.clip > 0 && norm > p.clip ? float(p.clip / norm) : 1.0f;
    const float decay = decay_mask[i] ? p.decay : 1.0f;
    const float gi = g[i] * scale;
    g[i] = gi;
    const float mi = p.beta1 * m[i] + (1.0f - p.beta1) * gi;
    const float vi = p.beta2 * v[i] + (1.0f - p.beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float wi = w[i] * decay - p.lr * (mi / p.c1) / (sqrtf(vi / p.c2) + p.eps);
    w[i] = wi;
    if (w16) w16[i] = __float2bfloat16_rn(wi);
}

__global__ void lstm_cell_forward_kernel(float* z, float* c, float* h, float* hprev, std::size_t B, std::size_t T,
                                         std::size_t t, std::size_t d) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= B * d) return;
    const std::size_t b = i / d, k = i % d, n = b * T + t;
    float* zn = z + n * 4 * d;
    const float gi = sigmoidf(zn[k]), gf = sigmoidf(zn[d + k]), gg = tanhf(zn[2 * d + k]), go = sigmoidf(zn[3 * d + k]);
    zn[k] = gi, zn[d + k] = gf, zn[2 * d + k] = gg, zn[3 * d + k] = go;
    const float c_prev = t > 0 ? c[(n - 1) * d + k] : 0.0f;
    const float cn = gf * c_prev + gi * gg;
    c[n * d + k] = cn;
    const float hn = go * tanhf(cn);
    h[n * d + k] = hn;
    if (t == 0) hprev[n * d + k] = 0;
    if (t + 1 < T) hprev[(n + 1) * d + k] = hn;
}

__global__ void lstm_cell_backward_kernel(const float* z, const float* c, const float* dH, const float* dh_next,
                                          float* dc_next, float* dz, std::size_t B, std::size_t T, std::size_t t,
                                          std::size_t d) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= B * d) return;
    const std::size_t b = i / d, k = i % d, n = b * T + t;
    const float* zn = z + n * 4 * d;
    const float gi = zn[k], gf = zn[d + k], gg = zn[2 * d + k], go = zn[3 * d + k];
    const float tc = tanhf(c[n * d + k]);
    const float c_prev = t > 0 ? c[(n - 1) * d + k] : 0.0f;
    const bool last = t + 1 == T;
    const float dh = dH[n * d + k] + (last ? 0.0f : dh_next[i]);
    const float dc = dh * go * (1.0f - tc * tc) + (last ? 0.0f : dc_next[i]);
    float* dzn = dz + n * 4 * d;
    dzn[k] = dc * gg * gi * (1.0f - gi);
    dzn[d + k] = dc * c_prev * gf * (1.0f - gf);
    dzn[2 * d + k] = dc * gi * (1.0f - gg * gg);
    dzn[3 * d + k] = dh * tc * go * (1.0f - go);
    dc_next[i] = dc * gf;
}

// Partial sums are kept to about 4 M floats (16 MiB) per reduction: rows per chunk at least
// `shortest`, more where rows / shortest chunks of `width` partials each would exceed that, and
// never more than 65535 chunks (a grid's y dimension; the column reductions put chunks there).
constexpr std::size_t partials_budget = std::size_t(1) << 22, most_chunks = 65535;
std::size_t rows_per_chunk(std::size_t rows, std::size_t width, std::size_t shortest) {
    return std::max({shortest, (rows * width + partials_budget - 1) / partials_budget,
                     (rows + most_chunks - 1) / most_chunks});
}
std::size_t chunks_of(std::size_t rows, std::size_t chunk) { return (rows + chunk - 1) / chunk; }
// The column reductions (RMSNorm gains of the general layouts, column sums): chunks of at least 32
// rows, one row of `cols` partials each; the grid's y runs over the chunks.
struct ColumnChunks {
    std::size_t rows_each, count, cols;
    std::size_t partials() const { return count * cols; }
    dim3 grid() const { return dim3(blocks_for(cols), unsigned(count)); }
};
ColumnChunks column_chunks(std::size_t rows, std::size_t cols) {
    const std::size_t each = rows_per_chunk(rows, cols, 32);
    return {each, chunks_of(rows, each), cols};
}
// The embedding gradient: chunks of at least 128 rows, letters in slices of 32 KiB of columns.
constexpr std::size_t embed_chunk = 128;
std::size_t embed_slice(std::size_t d, std::size_t vocab) {
    return std::min(vocab, std::max<std::size_t>(1, 32 * 1024 / sizeof(float) / d));
}
// The grid of the kernels whose threads stride over their elements: four blocks an SM.
unsigned persistent_blocks() {
    return sm_count() * 4;
}

}  // namespace

// The current device's SMs, asked once per device (no occupancy query, which could load a module
// during graph capture). Every session call makes its device current before it plans or launches
// (cuda_backend.cu, on_device), so the partial sums' regions a plan sizes by it and the grids the
// launches take from it agree.
unsigned sm_count() {
    static std::array<std::atomic<unsigned>, 64> known{};  // 0: not asked yet (devices past 64: asked each time)
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) (void)cudaGetLastError();
    const bool cached = device >= 0 && device < int(known.size());
    unsigned sms = cached ? known[std::size_t(device)].load() : 0;
    if (sms == 0) {
        int count = 0;
        if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) (void)cudaGetLastError();
        sms = unsigned(std::max(1, count));
        if (cached) known[std::size_t(device)].store(sms);
    }
    return sms;
}

void embed_forward(const std::int32_t* tokens, const float* table, float* x, std::size_t rows, std::size_t d,
                   cudaStream_t stream) {
    embed_forward_kernel<<<blocks_for(rows * 32), threads, 0, stream>>>(tokens, table, x, rows, d);
    launched("embed_forward");
}

// Columns per block: a power of two, at most width, and parts / R <= partial_loads where that allows.
unsigned partial_columns(std::size_t parts, std::size_t width) {
    unsigned cw = 32;
    while (cw > 1 && (cw > width || cw * parts > std::size_t(partial_loads) * partial_threads)) cw /= 2;
    return cw;
}
void add_partial_sums(const std::vector<PartialSum>& sums, cudaStream_t stream) {
    SumBatch batch{};
    auto launch = [&] {
        if (batch.count == 0) return;
        add_partial_sums_batch_kernel<<<batch.first[batch.count], partial_threads, 0, stream>>>(batch);
        launched("add_partial_sums");
        batch = SumBatch{};
    };
    for (const PartialSum& s : sums) {
        if (s.width == 0) continue;
        if (batch.count == batched_sums) launch();
        const int i = batch.count++;
        batch.sum[i] = s, batch.cw[i] = partial_columns(s.parts, s.width);
        batch.first[i + 1] = batch.first[i] + blocks_for(s.width, int(batch.cw[i]));
    }
    launch();
}
void add_double_sum(const double* partials, std::size_t count, double* out, cudaStream_t stream) {
    add_double_sum_kernel<<<1, 32, 0, stream>>>(partials, count, out);
    launched("add_double_sum");
}

std::size_t embed_backward_partials(std::size_t rows, std::size_t d, std::size_t vocab) {
    return chunks_of(rows, rows_per_chunk(rows, vocab * d, embed_chunk)) * vocab * d;
}
template <class D>
void embed_backward(const std::int32_t* tokens, const D* dx, float* dtable, std::size_t rows, std::size_t d,
                    std::size_t vocab, const Partials& partials, cudaStream_t stream) {
    const std::size_t chunk = rows_per_chunk(rows, vocab * d, embed_chunk), chunks = chunks_of(rows, chunk);
    const std::size_t slice = embed_slice(d, vocab);
    const dim3 grid(unsigned(chunks_of(vocab, slice)), unsigned(chunks));
    embed_backward_kernel<<<grid, threads, slice * d * sizeof(float), stream>>>(tokens, dx, partials.scratch, rows, d,
                                                                               vocab, chunk, slice);
    launched("embed_backward");
    partials.sums->push_back({partials.scratch, chunks, vocab * d, dtable});
}

// Blocks of the RMSNorm backward that the device holds at once (its launch bounds guarantee
// norm_blocks_per_sm; no occupancy query, which could load a module during graph capture).
unsigned norm_backward_blocks() {
    return sm_count() * norm_blocks_per_sm;
}
// The grid of a kernel whose warps stride over the rows: one wave of `most` blocks, or fewer where
// the rows (row_warps a block) do not fill it.
unsigned row_blocks(std::size_t rows, unsigned most) {
    return unsigned(std::max<std::size_t>(1, std::min<std::size_t>(most, (rows + row_warps - 1) / row_warps)));
}

int persistent_blocks_per_sm(const void* kernel, unsigned threads, std::size_t bytes, const char* what) {
    struct Known {
        int device;
        const void* kernel;
        unsigned threads;
        std::size_t bytes;
        int per_sm;
    };
    static std::mutex lock;
    static std::vector<Known> known;  // a few entries: one per kernel, shape and device
    int device = 0;
    check(cudaGetDevice(&device), what);
    const std::lock_guard<std::mutex> hold(lock);
    for (const Known& k : known)
        if (k.device == device && k.kernel == kernel && k.threads == threads && k.bytes == bytes) return k.per_sm;
    // the kernel's shared-memory limit stays at the largest shape asked so far: a smaller one set
    // after it would fail the larger one's next launch (served from `known` without a new limit)
    std::size_t limit = bytes;
    for (const Known& k : known)
        if (k.device == device && k.kernel == kernel && k.per_sm > 0) limit = std::max(limit, k.bytes);
    int per_sm = 0;
    // the code the device runs must come from sm_80 or later (a build of older PTX only, compiled for
    // the device at load time, has binaryVersion 80+ and the kernels' __traps)
    cudaFuncAttributes a{};
    if (cudaFuncGetAttributes(&a, kernel) != cudaSuccess) (void)cudaGetLastError();
    else if (a.binaryVersion >= 80 && a.ptxVersion >= 80) {
        int max_shared = 0;
        check(cudaDeviceGetAttribute(&max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), what);
        if (bytes <= std::size_t(max_shared)) {
            check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(limit)), what);
            check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, int(threads), bytes), what);
        }
    }
    known.push_back({device, kernel, threads, bytes, per_sm});
    return per_sm;
}

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
constexpr std::size_t below_2_32 = std::size_t(1) << 32;

// The layout the vectorised RMSNorm kernels take, if these rows have it (chunks: float4 per lane).
bool vector_rows(std::size_t rows, std::size_t width, std::size_t group, std::initializer_list<const float*> arrays,
                 RowShape& shape, unsigned& chunks) {
    if (width % 4 || group % 4 || width / 4 > 32 * max_row_chunks || rows >= below_2_32 / 8) return false;
    for (const float* p : arrays)
        if (!aligned16(p)) return false;
    const std::size_t group_quads = group / 4;
    const bool whole = group == width;
    if (!whole && (group_quads > 32 || (group_quads & (group_quads - 1)) != 0)) return false;
    shape = {unsigned(width / 4), whole ? 0u : unsigned(group_quads), unsigned(group), unsigned(width / group)};
    chunks = shape.quads <= 32 ? 1 : shape.quads <= 64 ? 2 : 4;
    return true;
}
// Calls f(std::integral_constant<int, CH>) for chunks in 1, 2, 4.
template <class F>
void with_chunks(unsigned chunks, F&& f) {
    if (chunks == 1) f(std::integral_constant<int, 1>{});
    else if (chunks == 2) f(std::integral_constant<int, 2>{});
    else f(std::integral_constant<int, 4>{});
}
// The vectorised RMSNorm forward over the rows (tokens: the embedding's rows, as the kernel says).
template <class Out>
void norm_rows(const float* x, const float* g, Out* y, float* rinv, std::size_t rows, const RowShape& shape,
               unsigned chunks, const std::int32_t* tokens, float* embedded, cudaStream_t stream) {
    const unsigned blocks = unsigned((rows + row_warps - 1) / row_warps);
    with_chunks(chunks, [&](auto ch) {
        rmsnorm_forward_rows_kernel<decltype(ch)::value, Out>
            <<<blocks, row_warps * 32, 0, stream>>>(x, g, y, rinv, unsigned(rows), shape, tokens, embedded);
    });
}

void rmsnorm_forward(const float* x, const float* g, float* y, float* rinv, std::size_t rows, std::size_t width,
                     std::size_t group, cudaStream_t stream, bf16* y16) {
    RowShape shape{};
    unsigned chunks = 0;
    const bool vector = vector_rows(rows, width, group, {x, y, reinterpret_cast<const float*>(y16)}, shape, chunks);
    if (y16 && !vector) throw std::invalid_argument("rmsnorm_forward: a bf16 output needs the row kernel's layout");
    if (vector) {
        if (y16) norm_rows(x, g, y16, rinv, rows, shape, chunks, nullptr, nullptr, stream);
        else norm_rows(x, g, y, rinv, rows, shape, chunks, nullptr, nullptr, stream);
    } else {
        rmsnorm_forward_kernel<<<blocks_for(rows * (width / group) * 32), threads, 0, stream>>>(x, g, y, rinv, rows,
                                                                                               width, group);
    }
    launched("rmsnorm_forward");
}

bool embed_and_norm(const std::int32_t* tokens, const float* table, float* x, const float* g, float* y, float* rinv,
                    std::size_t rows, std::size_t d, cudaStream_t stream, bf16* y16) {
    RowShape shape{};
    unsigned chunks = 0;
    if (!vector_rows(rows, d, d, {table, x, y, reinterpret_cast<const float*>(y16)}, shape, chunks)) return false;
    if (y16) norm_rows(table, g, y16, rinv, rows, shape, chunks, tokens, x, stream);
    else norm_rows(table, g, y, rinv, rows, shape, chunks, tokens, x, stream);
    launched("embed_and_norm");
    return true;
}

std::size_t rmsnorm_backward_partials(std::size_t rows, std::size_t width) {
    return std::max(std::size_t(norm_backward_blocks()) * width, column_chunks(rows, width).partials());
}
template <class D>
void rmsnorm_backward(const float* x, const float* g, const float* rinv, const float* dy, D* dx, float* dg,
                      std::size_t rows, std::size_t width, std::size_t group, bool accumulate,
                      const Partials& partials, cudaStream_t stream, bf16* dx16, const D* before) {
    RowShape shape{};
    unsigned chunks = 0;
    if (!before) before = dx;
    if (std::is_same_v<D, bf16> && dx16) throw std::invalid_argument("rmsnorm_backward: a bf16 dx takes no bf16 copy");
    if (aligned16(partials.scratch) &&
        vector_rows(rows, width, group, {x, dy, reinterpret_cast<const float*>(dx), reinterpret_cast<const float*>(dx16)},
                    shape, chunks)) {
        const unsigned blocks = row_blocks(rows, norm_backward_blocks());
        with_chunks(chunks, [&](auto ch) {
            constexpr int CH = decltype(ch)::value;
            rmsnorm_backward_rows_kernel<CH, D><<<blocks, row_warps * 32, 0, stream>>>(
                x, g, rinv, dy, dx, before, dx16, partials.scratch, unsigned(rows), shape, accumulate, EmbedRows{});
        });
        launched("rmsnorm_backward");
        partials.sums->push_back({partials.scratch, blocks, width, dg});
        return;
    }
    if constexpr (std::is_same_v<D, bf16>) {
        throw std::invalid_argument("rmsnorm_backward: a bf16 dx needs the row kernel's layout");
    } else {
        if (dx16) throw std::invalid_argument("rmsnorm_backward: a bf16 copy needs the row kernel's layout");
        rmsnorm_backward_kernel<<<blocks_for(rows * (width / group) * 32), threads, 0, stream>>>(
            x, g, rinv, dy, dx, before, rows, width, group, accumulate);
        launched("rmsnorm_backward");
        const ColumnChunks gain = column_chunks(rows, width);
        rmsnorm_gain_kernel<<<gain.grid(), threads, 0, stream>>>(x, rinv, dy, partials.scratch, rows, width, group,
                                                                 gain.rows_each);
        launched("rmsnorm_gain");
        partials.sums->push_back({partials.scratch, gain.count, width, dg});
    }
}

namespace {
// The shared memory of the first layer's norm backward with the embedding's gradient, or 0 where it
// does not fit (the general layouts, or the warps' tables over 48 KiB with the static arrays).
std::size_t embed_rows_bytes(std::size_t rows, std::size_t width, std::size_t vocab) {
    RowShape shape{};
    unsigned chunks = 0;
    if (vocab == 0 || !vector_rows(rows, width, width, {}, shape, chunks)) return 0;
    const std::size_t table = std::size_t(row_warps) * vocab * shape.quads * sizeof(float4);
    const std::size_t fixed = std::size_t(row_warps) * 32 * chunks * sizeof(float4);
    return table + fixed <= 48 * 1024 ? table : 0;
}
}  // namespace

bool rmsnorm_backward_embeds(std::size_t rows, std::size_t width, std::size_t vocab) {
    return embed_rows_bytes(rows, width, vocab) > 0;
}
std::size_t rmsnorm_backward_embed_partials(std::size_t rows, std::size_t width, std::size_t vocab) {
    return std::size_t(row_blocks(rows, norm_backward_blocks())) * vocab * width;
}
template <class D>
void rmsnorm_backward_into_embedding(const float* x, const float* g, const float* rinv, const float* dy, const D* dx,
                                     float* dg, const std::int32_t* tokens, float* dtable, std::size_t rows,
                                     std::size_t width, std::size_t vocab, bool accumulate, const Partials& partials,
                                     const Partials& embed_partials, cudaStream_t stream) {
    RowShape shape{};
    unsigned chunks = 0;
    const std::size_t bytes = embed_rows_bytes(rows, width, vocab);
    if (!bytes || !aligned16(partials.scratch) || !aligned16(embed_partials.scratch) ||
        !vector_rows(rows, width, width, {x, dy, reinterpret_cast<const float*>(dx)}, shape, chunks))
        throw std::invalid_argument("rmsnorm_backward_into_embedding: not where rmsnorm_backward_embeds");
    const unsigned blocks = row_blocks(rows, norm_backward_blocks());
    const EmbedRows e{tokens, embed_partials.scratch, unsigned(vocab)};
    with_chunks(chunks, [&](auto ch) {
        constexpr int CH = decltype(ch)::value;
        rmsnorm_backward_rows_kernel<CH, D><<<blocks, row_warps * 32, bytes, stream>>>(
            x, g, rinv, dy, const_cast<D*>(dx), dx, nullptr, partials.scratch, unsigned(rows), shape, accumulate, e);
    });
    launched("rmsnorm_backward_into_embedding");
    partials.sums->push_back({partials.scratch, blocks, width, dg});
    embed_partials.sums->push_back({embed_partials.scratch, blocks, vocab * width, dtable});
}

void zero_past_lengths(float* a, std::size_t ld, std::size_t cols, std::size_t B, std::size_t T,
                       const std::int32_t* lengths, cudaStream_t stream) {
    zero_past_lengths_kernel<<<unsigned(B), threads, 0, stream>>>(a, ld, cols, T, lengths);
    launched("zero_past_lengths");
}

void zero_past_packed_words(float* a, std::size_t ld, std::size_t cols, std::size_t N, std::size_t B,
                            const std::int32_t* offsets, const std::int32_t* lengths, cudaStream_t stream) {
    zero_past_packed_words_kernel<<<32, threads, 0, stream>>>(a, ld, cols, N, B, offsets, lengths);
    launched("zero_past_packed_words");
}
void zero_past_packed_words(bf16* a, std::size_t ld, std::size_t cols, std::size_t N, std::size_t B,
                            const std::int32_t* offsets, const std::int32_t* lengths, cudaStream_t stream) {
    zero_past_packed_words_kernel<<<32, threads, 0, stream>>>(a, ld, cols, N, B, offsets, lengths);
    launched("zero_past_packed_words");
}

void add_bias(float* y, std::size_t ld, const float* bias, std::size_t rows, std::size_t cols, cudaStream_t stream) {
    add_bias_kernel<<<blocks_for(rows * cols), threads, 0, stream>>>(y, ld, bias, rows, cols);
    launched("add_bias");
}

std::size_t column_sums_partials(std::size_t rows, std::size_t cols) { return column_chunks(rows, cols).partials(); }
void column_sums(const float* y, std::size_t ld, float* out, std::size_t rows, std::size_t cols,
                 const Partials& partials, cudaStream_t stream) {
    const ColumnChunks chunks = column_chunks(rows, cols);
    column_sums_kernel<<<chunks.grid(), threads, 0, stream>>>(y, ld, partials.scratch, rows, cols, chunks.rows_each);
    launched("column_sums");
    partials.sums->push_back({partials.scratch, chunks.count, cols, out});
}

// The vectorised SwiGLU's shape, if m and the arrays allow it.
bool swiglu_vector_shape(std::size_t rows, std::size_t m, std::initializer_list<const float*> arrays, SwigluShape& s) {
    if (m % 4 || rows * m / 4 >= below_2_32) return false;
    for (const float* p : arrays)
        if (!aligned16(p)) return false;
    s = {unsigned(rows * m / 4), unsigned(m / 4)};
    return true;
}

void swiglu_forward(const float* gu, float* h, std::size_t rows, std::size_t m, cudaStream_t stream) {
    SwigluShape s{};
    if (swiglu_vector_shape(rows, m, {gu, h}, s))
        swiglu_forward_kernel<float><<<blocks_for(s.quads), threads, 0, stream>>>(gu, h, s);
    else
        swiglu_forward_scalar_kernel<<<blocks_for(rows * m), threads, 0, stream>>>(gu, h, rows, m);
    launched("swiglu_forward");
}

void swiglu_backward(const float* gu, const float* dh, float* dgu, std::size_t rows, std::size_t m,
                     cudaStream_t stream) {
    SwigluShape s{};
    if (swiglu_vector_shape(rows, m, {gu, dh, dgu}, s))
        swiglu_backward_kernel<float><<<blocks_for(s.quads), threads, 0, stream>>>(gu, dh, dgu, s);
    else
        swiglu_backward_scalar_kernel<<<blocks_for(rows * m), threads, 0, stream>>>(gu, dh, dgu, rows, m);
    launched("swiglu_backward");
}

void swiglu_forward(const bf16* gu, bf16* h, std::size_t rows, std::size_t m, cudaStream_t stream) {
    SwigluShape s{};
    if (!swiglu_vector_shape(rows, m, {reinterpret_cast<const float*>(gu), reinterpret_cast<const float*>(h)}, s))
        throw std::invalid_argument("swiglu_forward: bf16 needs m a multiple of 4 and aligned rows");
    swiglu_forward_kernel<bf16><<<blocks_for(s.quads), threads, 0, stream>>>(gu, h, s);
    launched("swiglu_forward (bf16)");
}
void swiglu_backward(const bf16* gu, const bf16* dh, bf16* dgu, std::size_t rows, std::size_t m, cudaStream_t stream) {
    SwigluShape s{};
    if (!swiglu_vector_shape(rows, m, {reinterpret_cast<const float*>(gu), reinterpret_cast<const float*>(dh),
                                       reinterpret_cast<const float*>(dgu)}, s))
        throw std::invalid_argument("swiglu_backward: bf16 needs m a multiple of 4 and aligned rows");
    swiglu_backward_kernel<bf16><<<blocks_for(s.quads), threads, 0, stream>>>(gu, dh, dgu, s);
    launched("swiglu_backward (bf16)");
}

void to_bf16(const float* x, bf16* y, std::size_t count, cudaStream_t stream) {
    to_bf16_kernel<<<std::min<unsigned>(persistent_blocks(), std::max(1u, blocks_for(count))), threads, 0, stream>>>(
        x, y, count);
    launched("to_bf16");
}
void to_bf16(const float* x, std::size_t ldx, bf16* y, std::size_t ldy, std::size_t rows, std::size_t cols,
             cudaStream_t stream) {
    to_bf16_rows_kernel<<<std::min<unsigned>(persistent_blocks(), std::max(1u, blocks_for(rows * 32))), threads, 0,
                          stream>>>(x, ldx, y, ldy, rows, cols);
    launched("to_bf16");
}

// Doubles of partial sums, counted in floats.
std::size_t step_results_partials() { return 2 * 2 * std::size_t(persistent_blocks()); }
void cross_entropy(const float* logits, const std::int32_t* targets, float* dlogits, const StepParams* params,
                   StepResults* results, std::size_t rows, std::size_t classes, float* partials, cudaStream_t stream) {
    const std::size_t per_row = classes <= thread_row_classes ? 1 : 32;  // threads
    const unsigned blocks = std::min<unsigned>(persistent_blocks(), std::max(1u, blocks_for(rows * per_row)));
    double* parts = reinterpret_cast<double*>(partials);
    cross_entropy_kernel<<<blocks, threads, 0, stream>>>(logits, targets, dlogits, params, parts, rows, classes);
    launched("cross_entropy");
    add_double_sum(parts, blocks, &results->loss_sum, stream);
    add_double_sum(parts + blocks, blocks, &results->correct, stream);
}

namespace {
// Blocks of head_step: one wave (its launch bounds guarantee head_blocks_per_sm), rows striding.
unsigned head_step_blocks(std::size_t rows) { return row_blocks(rows, sm_count() * head_blocks_per_sm); }
// The three partial-sum arrays of head_step, each from a 256-byte boundary.
struct HeadPartials {
    std::size_t w, bias, g, total;
};
HeadPartials head_partials(std::size_t rows, std::size_t d, std::size_t classes) {
    const std::size_t blocks = head_step_blocks(rows);
    HeadPartials h{};
    h.w = 0, h.bias = partials_region(blocks * classes * d), h.g = h.bias + partials_region(blocks * classes);
    h.total = h.g + partials_region(blocks * d);
    return h;
}
}  // namespace

bool head_step_fits(std::size_t d, std::size_t classes) {
    return d % 4 == 0 && d <= head_rows_most && classes >= 1 && classes <= head_classes_most;
}
std::size_t head_step_partials(std::size_t rows, std::size_t d, std::size_t classes) {
    return head_partials(rows, d, classes).total;
}
template <class D>
void head_step(const float* x, const float* g, const float* w, const float* bias, const std::int32_t* targets,
               const StepParams* params, StepResults* results, D* dx, bf16* dx16, float* dw, float* dbias,
               float* dg, std::size_t rows, std::size_t d, std::size_t classes, const Partials& partials,
               double* loss_partials, cudaStream_t stream) {
    if (!head_step_fits(d, classes) || rows >= below_2_32 / 8 || !aligned16(x) || !aligned16(dx) || !aligned16(dx16) ||
        !aligned16(partials.scratch) || (std::is_same_v<D, bf16> && dx16))
        throw std::invalid_argument("head_step: rows of at most 128 columns (a multiple of 4), 1 to 8 classes, aligned"
                                    " (and no bf16 copy of a bf16 dx)");
    const unsigned blocks = head_step_blocks(rows);
    const HeadPartials at = head_partials(rows, d, classes);
    const HeadStep<D> a{x, g, w, bias, targets, params, dx, dx16, partials.scratch + at.w, partials.scratch + at.bias,
                     partials.scratch + at.g, loss_partials, unsigned(rows), unsigned(d / 4), unsigned(classes)};
    // the classes rounded up to 2, 4 or 8 (the loops over them unroll), and as many rows at a time as
    // fit in 128 registers without spills (ptxas)
    if (classes <= 2) head_step_kernel<2, 4, D><<<blocks, row_warps * 32, 0, stream>>>(a);
    else if (classes <= 4) head_step_kernel<4, 2, D><<<blocks, row_warps * 32, 0, stream>>>(a);
    else head_step_kernel<8, 1, D><<<blocks, row_warps * 32, 0, stream>>>(a);
    launched("head_step");
    partials.sums->push_back({a.part_w, blocks, classes * d, dw});
    partials.sums->push_back({a.part_bias, blocks, classes, dbias});
    partials.sums->push_back({a.part_g, blocks, d, dg});
    add_double_sum(loss_partials, blocks, &results->loss_sum, stream);
    add_double_sum(loss_partials + blocks, blocks, &results->correct, stream);
}

void gradient_square_sum(const float* grads, StepResults* results, std::size_t count, float* partials,
                         cudaStream_t stream) {
    const unsigned blocks = std::min<unsigned>(persistent_blocks(), std::max(1u, blocks_for(count)));
    double* parts = reinterpret_cast<double*>(partials);
    square_sum_kernel<<<blocks, threads, 0, stream>>>(grads, parts, count);
    launched("gradient_square_sum");
    add_double_sum(parts, blocks, &results->grad_sq, stream);
}

void add_half_step(float* grads, const float* half_grads, std::size_t count, StepResults* results,
                   const StepResults* half_results, cudaStream_t stream) {
    add_half_step_kernel<<<blocks_for(count), threads, 0, stream>>>(grads, half_grads, count, results, half_results);
    launched("add_half_step");
}

void adamw(const StepParams* params, const StepResults* results, const std::uint8_t* decay_mask, float* w, float* g,
           float* m, float* v, std::size_t count, cudaStream_t stream, StepResults* to_host, bf16* w16) {
    adamw_kernel<<<blocks_for(count), threads, 0, stream>>>(params, results, decay_mask, w, g, m, v, count, to_host,
                                                            w16);
    launched("adamw");
}

void lstm_cell_forward(float* z, float* c, float* h, float* hprev, std::size_t B, std::size_t T, std::size_t t,
                       std::size_t d, cudaStream_t stream) {
    lstm_cell_forward_kernel<<<blocks_for(B * d), threads, 0, stream>>>(z, c, h, hprev, B, T, t, d);
    launched("lstm_cell_forward");
}

void lstm_cell_backward(const float* z, const float* c, const float* dH, const float* dh_next, float* dc_next,
                        float* dz, std::size_t B, std::size_t T, std::size_t t, std::size_t d, cudaStream_t stream) {
    lstm_cell_backward_kernel<<<blocks_for(B * d), threads, 0, stream>>>(z, c, dH, dh_next, dc_next, dz, B, T, t, d);
    launched("lstm_cell_backward");
}

// The residual stream's gradient in its two types (kernels.cuh).
#define STATETRACK_GRADIENT_KERNELS(D)                                                                                \
    template void embed_backward(const std::int32_t*, const D*, float*, std::size_t, std::size_t, std::size_t,        \
                                 const Partials&, cudaStream_t);                                                      \
    template void rmsnorm_backward(const float*, const float*, const float*, const float*, D*, float*, std::size_t,   \
                                   std::size_t, std::size_t, bool, const Partials&, cudaStream_t, bf16*, const D*);   \
    template void rmsnorm_backward_into_embedding(const float*, const float*, const float*, const float*, const D*,   \
                                                  float*, const std::int32_t*, float*, std::size_t, std::size_t,      \
                                                  std::size_t, bool, const Partials&, const Partials&, cudaStream_t); \
    template void head_step(const float*, const float*, const float*, const float*, const std::int32_t*,              \
                            const StepParams*, StepResults*, D*, bf16*, float*, float*, float*, std::size_t,          \
                            std::size_t, std::size_t, const Partials&, double*, cudaStream_t);
STATETRACK_GRADIENT_KERNELS(float)
STATETRACK_GRADIENT_KERNELS(bf16)
#undef STATETRACK_GRADIENT_KERNELS

}  // namespace statetrack::gpu::cuda
