// The element-wise, normalisation, loss and optimizer kernels of the CUDA backend. Each mirrors
// one building block of cpu_backend.cpp; the formulas are the same, only the loops are threads.
#include <stdexcept>
#include <string>

#include "kernels.cuh"

namespace statetrack::gpu::cuda {

void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}

namespace {

constexpr float norm_eps = 1e-6f;
constexpr int threads = 256;
constexpr unsigned full_mask = 0xffffffffu;

unsigned blocks_for(std::size_t work, int per_block = threads) {
    return unsigned((work + std::size_t(per_block) - 1) / std::size_t(per_block));
}
void launched(const char* name) { check(cudaGetLastError(), name); }

__device__ float sigmoidf(float z) { return 1.0f / (1.0f + expf(-z)); }
__device__ float siluf(float z) { return z * sigmoidf(z); }
__device__ float silu_gradf(float z) {
    const float s = sigmoidf(z);
    return s * (1.0f + z * (1.0f - s));
}
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

__global__ void embed_forward_kernel(const std::int32_t* tokens, const float* table, float* x, std::size_t rows,
                                     std::size_t d) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * d) return;
    const std::size_t n = i / d, c = i % d;
    x[i] = table[std::size_t(tokens[n]) * d + c];
}

// One block per chunk of rows; the (small) table gradient accumulates in shared memory first. Each
// thread owns whole columns c, so its shared-memory adds need no atomics (with 2 letters, atomics
// from every thread to 2 x d addresses made this 3% of a training step, 144 GB/s).
__global__ void embed_backward_shared_kernel(const std::int32_t* tokens, const float* dx, float* dtable,
                                             std::size_t rows, std::size_t d, std::size_t vocab, std::size_t chunk) {
    extern __shared__ float acc[];
    for (std::size_t i = threadIdx.x; i < vocab * d; i += blockDim.x) acc[i] = 0;
    __syncthreads();
    const std::size_t begin = std::size_t(blockIdx.x) * chunk, end = min(rows, begin + chunk);
    for (std::size_t c = threadIdx.x; c < d; c += blockDim.x)
        for (std::size_t n = begin; n < end; ++n) acc[std::size_t(tokens[n]) * d + c] += dx[n * d + c];
    __syncthreads();
    for (std::size_t i = threadIdx.x; i < vocab * d; i += blockDim.x) atomicAdd(&dtable[i], acc[i]);
}
__global__ void embed_backward_global_kernel(const std::int32_t* tokens, const float* dx, float* dtable,
                                             std::size_t rows, std::size_t d) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * d) return;
    atomicAdd(&dtable[std::size_t(tokens[i / d]) * d + i % d], dx[i]);
}

// One warp per (row, group).
__global__ void rmsnorm_forward_kernel(const float* x, const float* g, float* y, float* rinv, float* copy,
                                       std::size_t rows, std::size_t width, std::size_t group) {
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
    for (std::size_t i = lane; i < group; i += 32) {
        y[at + i] = g[h * group + i] * x[at + i] * r;
        if (copy) copy[at + i] = x[at + i];
    }
}

__global__ void rmsnorm_backward_kernel(const float* x, const float* g, const float* rinv, const float* dy, float* dx,
                                        std::size_t rows, std::size_t width, std::size_t group, bool accumulate) {
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
        dx[at + i] = accumulate ? dx[at + i] + v : v;
    }
}

// Column reductions: each block sums `chunk` rows for every column, then one atomic per column.
// Short chunks: many blocks in flight and short serial chains (256-row chunks measured 6.3 ms/step).
constexpr std::size_t reduce_chunk = 32;

__global__ void rmsnorm_gain_kernel(const float* x, const float* rinv, const float* dy, float* dg, std::size_t rows,
                                    std::size_t width, std::size_t group) {
    const std::size_t groups = width / group;
    const std::size_t begin = std::size_t(blockIdx.y) * reduce_chunk, end = min(rows, begin + reduce_chunk);
    for (std::size_t c = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; c < width; c += std::size_t(gridDim.x) * blockDim.x) {
        float acc = 0;
        for (std::size_t n = begin; n < end; ++n) acc += dy[n * width + c] * x[n * width + c] * rinv[n * groups + c / group];
        atomicAdd(&dg[c], acc);
    }
}

__global__ void column_sums_kernel(const float* y, float* out, std::size_t rows, std::size_t cols) {
    const std::size_t begin = std::size_t(blockIdx.y) * reduce_chunk, end = min(rows, begin + reduce_chunk);
    for (std::size_t c = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += std::size_t(gridDim.x) * blockDim.x) {
        float acc = 0;
        for (std::size_t n = begin; n < end; ++n) acc += y[n * cols + c];
        atomicAdd(&out[c], acc);
    }
}

__global__ void add_bias_kernel(float* y, const float* bias, std::size_t rows, std::size_t cols) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < rows * cols) y[i] += bias[i % cols];
}

// One block per row n (position t = n mod T of its word), threads over the channels: no 64-bit
// division per element (the thread-per-element versions spent more time on index arithmetic
// than on memory: 86% SM busy at 1.1 TB/s in the ncu profile of 2026-11-22). Taps stay inside
// the word (t - K + 1 + j >= 0).
__device__ float conv_at(const float* x, const float* w, std::size_t n, unsigned t, unsigned c, unsigned C, unsigned K) {
    float acc = 0;
    for (unsigned j = 0; j < K; ++j)
        if (t + j + 1 >= K) acc += w[c * K + j] * x[(n + j + 1 - K) * C + c];
    return acc;
}

__global__ void conv_silu_forward_kernel(const float* x, const float* w, float* y, unsigned T, unsigned C, unsigned K) {
    const std::size_t n = blockIdx.x;
    const unsigned t = unsigned(n % T);
    for (unsigned c = threadIdx.x; c < C; c += blockDim.x) y[n * C + c] = siluf(conv_at(x, w, n, t, c, C, K));
}
__global__ void conv_silu_gate_kernel(const float* x, const float* w, float* dy, unsigned T, unsigned C, unsigned K) {
    const std::size_t n = blockIdx.x;
    const unsigned t = unsigned(n % T);
    for (unsigned c = threadIdx.x; c < C; c += blockDim.x) dy[n * C + c] *= silu_gradf(conv_at(x, w, n, t, c, C, K));
}
// dx[n][c] = sum_j w[c][j] g[n + K - 1 - j][c] for taps inside the word.
__global__ void conv_input_grad_kernel(const float* w, const float* g, float* dx, unsigned T, unsigned C, unsigned K) {
    const std::size_t n = blockIdx.x;
    const unsigned t = unsigned(n % T);
    for (unsigned c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = 0;
        for (unsigned j = 0; j < K; ++j)
            if (t + K - 1 - j < T) acc += w[c * K + j] * g[(n + K - 1 - j) * C + c];
        dx[n * C + c] = acc;
    }
}
// Each block sums reduce_chunk rows for every (channel, tap), the K taps in registers (at most
// max_taps), one pass over the rows; then one atomic per (channel, tap).
constexpr unsigned max_taps = 8;
__global__ void conv_weight_grad_kernel(const float* x, const float* g, float* dw, std::size_t rows, unsigned T,
                                        unsigned C, unsigned K) {
    const std::size_t begin = std::size_t(blockIdx.y) * reduce_chunk, end = min(rows, begin + reduce_chunk);
    const unsigned t0 = unsigned(begin % T);
    for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        float acc[max_taps] = {};
        unsigned t = t0;
        for (std::size_t n = begin; n < end; ++n) {
            const float gn = g[n * C + c];
#pragma unroll
            for (unsigned j = 0; j < max_taps; ++j)
                if (j < K && t + j + 1 >= K) acc[j] += gn * x[(n + j + 1 - K) * C + c];
            t = t + 1 == T ? 0 : t + 1;
        }
#pragma unroll
        for (unsigned j = 0; j < max_taps; ++j)
            if (j < K) atomicAdd(&dw[c * K + j], acc[j]);
    }
}

__global__ void swiglu_forward_kernel(const float* gu, float* h, std::size_t rows, std::size_t m) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * m) return;
    const std::size_t n = i / m, c = i % m;
    h[i] = siluf(gu[n * 2 * m + c]) * gu[n * 2 * m + m + c];
}
__global__ void swiglu_backward_kernel(const float* gu, const float* dh, float* dgu, std::size_t rows, std::size_t m) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * m) return;
    const std::size_t n = i / m, c = i % m;
    const float a = gu[n * 2 * m + c], u = gu[n * 2 * m + m + c];
    dgu[n * 2 * m + c] = dh[i] * u * silu_gradf(a);
    dgu[n * 2 * m + m + c] = dh[i] * siluf(a);
}

// Warp per row, grid-stride; one atomic per block for the loss.
__global__ void cross_entropy_kernel(const float* logits, const std::int32_t* targets, float* dlogits,
                                     const StepParams* params, StepResults* results, std::size_t rows,
                                     std::size_t classes) {
    const unsigned lane = threadIdx.x % 32;
    const std::size_t warps = std::size_t(gridDim.x) * blockDim.x / 32;
    const float count = params->count;
    double loss = 0, correct = 0;
    for (std::size_t n = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; n < rows; n += warps) {
        const float* z = logits + n * classes;
        const int target = targets[n];
        if (target < 0) {
            for (std::size_t k = lane; k < classes; k += 32) dlogits[n * classes + k] = 0;
            continue;
        }
        // the maximum and its first index (as std::max_element on the CPU)
        float zmax = -INFINITY;
        unsigned at = unsigned(classes);
        for (std::size_t k = lane; k < classes; k += 32)
            if (z[k] > zmax || at == unsigned(classes)) zmax = z[k], at = unsigned(k);
        for (int s = 16; s >= 1; s /= 2) {
            const float other = __shfl_xor_sync(full_mask, zmax, s);
            const unsigned other_at = __shfl_xor_sync(full_mask, at, s);
            if (other > zmax || (other == zmax && other_at < at)) zmax = other, at = other_at;
        }
        float sum = 0;
        for (std::size_t k = lane; k < classes; k += 32) sum += expf(z[k] - zmax);
        sum = warp_sum(sum);
        if (lane == 0) loss += double(logf(sum) + zmax - z[target]), correct += at == unsigned(target) ? 1.0 : 0.0;
        for (std::size_t k = lane; k < classes; k += 32) {
            float p = expf(z[k] - zmax) / sum / count;
            if (k == std::size_t(target)) p -= 1.0f / count;
            dlogits[n * classes + k] = p;
        }
    }
    loss = block_sum(loss);
    __syncthreads();  // block_sum's shared partials are reused
    correct = block_sum(correct);
    if (threadIdx.x == 0) atomicAdd(&results->loss_sum, loss), atomicAdd(&results->correct, correct);
}

__global__ void square_sum_kernel(const float* g, StepResults* results, std::size_t count) {
    double acc = 0;
    for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x)
        acc += double(g[i]) * double(g[i]);
    acc = block_sum(acc);
    if (threadIdx.x == 0) atomicAdd(&results->grad_sq, acc);
}

// As adamw_step in optimizer.cpp, with the clipping scale from the norm computed on the device.
__global__ void adamw_kernel(const StepParams* params, const StepResults* results, const std::uint8_t* decay_mask,
                             float* w, float* g, float* m, float* v, std::size_t count) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
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
    w[i] = w[i] * decay - p.lr * (mi / p.c1) / (sqrtf(vi / p.c2) + p.eps);
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

dim3 reduce_grid(std::size_t rows, std::size_t cols) {
    return dim3(blocks_for(cols), unsigned((rows + reduce_chunk - 1) / reduce_chunk));
}
unsigned persistent_blocks() {
    static const unsigned blocks = [] {
        int device = 0, sms = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        return unsigned(std::max(1, sms) * 4);
    }();
    return blocks;
}

}  // namespace

void embed_forward(const std::int32_t* tokens, const float* table, float* x, std::size_t rows, std::size_t d,
                   cudaStream_t stream) {
    embed_forward_kernel<<<blocks_for(rows * d), threads, 0, stream>>>(tokens, table, x, rows, d);
    launched("embed_forward");
}

void embed_backward(const std::int32_t* tokens, const float* dx, float* dtable, std::size_t rows, std::size_t d,
                    std::size_t vocab, cudaStream_t stream) {
    const std::size_t bytes = vocab * d * sizeof(float);
    if (bytes <= 32 * 1024) {
        const std::size_t chunk = 128;
        embed_backward_shared_kernel<<<unsigned((rows + chunk - 1) / chunk), threads, bytes, stream>>>(
            tokens, dx, dtable, rows, d, vocab, chunk);
    } else {
        embed_backward_global_kernel<<<blocks_for(rows * d), threads, 0, stream>>>(tokens, dx, dtable, rows, d);
    }
    launched("embed_backward");
}

void rmsnorm_forward(const float* x, const float* g, float* y, float* rinv, float* copy, std::size_t rows,
                     std::size_t width, std::size_t group, cudaStream_t stream) {
    rmsnorm_forward_kernel<<<blocks_for(rows * (width / group) * 32), threads, 0, stream>>>(x, g, y, rinv, copy, rows,
                                                                                           width, group);
    launched("rmsnorm_forward");
}

void rmsnorm_backward(const float* x, const float* g, const float* rinv, const float* dy, float* dx, float* dg,
                      std::size_t rows, std::size_t width, std::size_t group, bool accumulate, cudaStream_t stream) {
    rmsnorm_backward_kernel<<<blocks_for(rows * (width / group) * 32), threads, 0, stream>>>(x, g, rinv, dy, dx, rows,
                                                                                            width, group, accumulate);
    launched("rmsnorm_backward");
    rmsnorm_gain_kernel<<<reduce_grid(rows, width), threads, 0, stream>>>(x, rinv, dy, dg, rows, width, group);
    launched("rmsnorm_gain");
}

// Rows per launch of the row-per-block kernels: gridDim.x allows 2^31 - 1.
unsigned row_blocks(std::size_t rows) {
    if (rows >= (std::size_t(1) << 31)) throw std::invalid_argument("too many rows for one launch");
    return unsigned(rows);
}
void check_conv(std::size_t C, std::size_t K) {
    if (K > max_taps || C >= (std::size_t(1) << 31) / K) throw std::invalid_argument("convolution too wide for the CUDA kernels");
}

void conv_silu_forward(const float* x, const float* w, float* y, std::size_t B, std::size_t T, std::size_t C,
                       std::size_t K, cudaStream_t stream) {
    check_conv(C, K);
    conv_silu_forward_kernel<<<row_blocks(B * T), 128, 0, stream>>>(x, w, y, unsigned(T), unsigned(C), unsigned(K));
    launched("conv_silu_forward");
}

void conv_silu_backward(const float* x, const float* w, float* dy, float* dx, float* dw, std::size_t B,
                        std::size_t T, std::size_t C, std::size_t K, cudaStream_t stream) {
    check_conv(C, K);
    conv_silu_gate_kernel<<<row_blocks(B * T), 128, 0, stream>>>(x, w, dy, unsigned(T), unsigned(C), unsigned(K));
    launched("conv_silu_gate");
    conv_input_grad_kernel<<<row_blocks(B * T), 128, 0, stream>>>(w, dy, dx, unsigned(T), unsigned(C), unsigned(K));
    launched("conv_input_grad");
    conv_weight_grad_kernel<<<reduce_grid(B * T, C), threads, 0, stream>>>(x, dy, dw, B * T, unsigned(T), unsigned(C),
                                                                          unsigned(K));
    launched("conv_weight_grad");
}

void add_bias(float* y, const float* bias, std::size_t rows, std::size_t cols, cudaStream_t stream) {
    add_bias_kernel<<<blocks_for(rows * cols), threads, 0, stream>>>(y, bias, rows, cols);
    launched("add_bias");
}

void column_sums(const float* y, float* out, std::size_t rows, std::size_t cols, cudaStream_t stream) {
    column_sums_kernel<<<reduce_grid(rows, cols), threads, 0, stream>>>(y, out, rows, cols);
    launched("column_sums");
}

void swiglu_forward(const float* gu, float* h, std::size_t rows, std::size_t m, cudaStream_t stream) {
    swiglu_forward_kernel<<<blocks_for(rows * m), threads, 0, stream>>>(gu, h, rows, m);
    launched("swiglu_forward");
}

void swiglu_backward(const float* gu, const float* dh, float* dgu, std::size_t rows, std::size_t m,
                     cudaStream_t stream) {
    swiglu_backward_kernel<<<blocks_for(rows * m), threads, 0, stream>>>(gu, dh, dgu, rows, m);
    launched("swiglu_backward");
}

void cross_entropy(const float* logits, const std::int32_t* targets, float* dlogits, const StepParams* params,
                   StepResults* results, std::size_t rows, std::size_t classes, cudaStream_t stream) {
    const unsigned blocks = std::min<unsigned>(persistent_blocks(), std::max(1u, blocks_for(rows * 32)));
    cross_entropy_kernel<<<blocks, threads, 0, stream>>>(logits, targets, dlogits, params, results, rows, classes);
    launched("cross_entropy");
}

void gradient_square_sum(const float* grads, StepResults* results, std::size_t count, cudaStream_t stream) {
    const unsigned blocks = std::min<unsigned>(persistent_blocks(), std::max(1u, blocks_for(count)));
    square_sum_kernel<<<blocks, threads, 0, stream>>>(grads, results, count);
    launched("gradient_square_sum");
}

void adamw(const StepParams* params, const StepResults* results, const std::uint8_t* decay_mask, float* w, float* g,
           float* m, float* v, std::size_t count, cudaStream_t stream) {
    adamw_kernel<<<blocks_for(count), threads, 0, stream>>>(params, results, decay_mask, w, g, m, v, count);
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

}  // namespace statetrack::gpu::cuda
