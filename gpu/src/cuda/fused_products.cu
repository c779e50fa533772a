// Products of our own on the bf16 tensor cores (mma.m16n8k16, fp32 accumulation) for --matmul bf16,
// with the element-wise work around them fused in: each keeps its weight in shared memory for all of
// a block's tiles, and tiles of 16 rows stream through two buffers (cp.async), the next tile's rows
// in flight while this tile's products run. Two blocks an SM (~110 KB of shared memory each for the
// MLP's at the paper's sizes, d 128, m 256), so that one block's arithmetic runs beside the other's
// copies.
//
// Forward (residual_forward_kernel), y = r + A W^T in two forms: the MLP's down projection, A = h =
// SwiGLU(gu) computed from the tile of gu in shared memory (h goes out for the backward's weight
// gradient, but is not read back: swiglu_forward wrote h and the residual product read it back, 0.5
// KB a row); and the mixer's output product followed by the MLP's RMSNorm of y (rmsnorm_forward read
// y back, 0.5 KB a row). Only from 32 tiles an SM (fused_products_rows): with fewer, the weight's copy
// and the short pipeline cost more than the bytes saved.
//
// Backward: from the MLP's output gradient to the gradient of [gate | up]: dh = dy Wdown (the down
// projection's input gradient, a product over K = d_model) and SwiGLU's backward on it into dgu.
// cuBLAS wrote dh in bf16 for swiglu_backward to read back with gu; here dh stays in registers (fp32,
// one rounding fewer), and a row's bytes go from 2.1 to 1.3 KB at the paper's sizes (dy 0.25, dh 0.5
// written and read back, gu 1, dgu 1). dgu is written in place of gu's tile in shared memory, then
// out in 16-byte rows.
//
// Backward, into a norm (norm_backward_product_kernel): the input gradient of the MLP's gate/up
// product or of the mixer's projections, dxn = dy w, and the RMSNorm's backward that reads it, in one
// kernel; its weight (K x d) streams through shared memory with dy, as in a plain product. In the
// first layer dx is summed by letters into the embedding's gradient (LetterSums) instead of written.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "activations.cuh"
#include "bf16_tiles.cuh"
#include "four_values.cuh"
#include "kernels.cuh"
#include "mlp.cuh"
#include "warp_sums.cuh"

namespace statetrack::gpu::cuda {

namespace {

constexpr unsigned column_block = 32;  // a warp's columns of dh at a time: four 8-column mma tiles
constexpr unsigned pad = 8;  // bf16 elements after each shared row: ldmatrix and the epilogues hit distinct banks

// Shared rows are padded(columns) elements apart.
__host__ __device__ unsigned padded(unsigned columns) { return columns + pad; }
__host__ __device__ unsigned column_blocks(unsigned columns) { return (columns + column_block - 1) / column_block; }

struct MlpShape {
    unsigned rows, d, m;
    unsigned tiles;  // ceil(rows / the kernel's rows a tile)
};

// mlp_down_backward's shared memory, in bf16 elements: the weight [d][ldw] as it lies in the
// parameters (m rounded up to whole column blocks, zeros past m), then two buffers of a tile's dy
// rows [down_rows][d + pad] and gu rows [down_rows][2 m + pad].
constexpr unsigned down_rows = 16, down_warps = 8, down_threads = 32 * down_warps;
struct DownLayout {
    unsigned ldw;
    std::size_t dy, dy_size, gu, gu_size, total;  // buffer b of dy at dy + b dy_size, of gu likewise
    __host__ __device__ explicit DownLayout(unsigned d, unsigned m)
        : ldw(padded(column_blocks(m) * column_block)), dy(std::size_t(d) * ldw), dy_size(down_rows * padded(d)),
          gu(dy + 2 * dy_size), gu_size(down_rows * padded(2 * m)), total(gu + 2 * gu_size) {}
};

// The forward kernel's shared memory, in bf16 elements: the weight [d][ldw] as it lies in the
// parameters ([out][in]: k rounded up to the mma's 16, zeros past k), two buffers of a tile's input
// rows [down_rows][ldi] (gu's 2 k columns, or x's k), then SwiGLU's h [down_rows][ldw] (zeros past
// k), the product's A there; or, with the norm, the tile's y [down_rows][d + 4] in fp32.
constexpr unsigned forward_columns = 16;  // a warp's columns of y at a time: two 8-column mma tiles
__host__ __device__ unsigned y_stride(unsigned d) { return d + 4; }  // floats: 16-byte rows, distinct banks
struct ForwardLayout {
    unsigned ldw, ldi;
    std::size_t in, in_size, tail, total;  // buffer b of the input at in + b in_size; h or y at tail
    __host__ __device__ ForwardLayout(unsigned d, unsigned k, bool swiglu)
        : ldw(padded((k + 15) / 16 * 16)), ldi(padded(swiglu ? 2 * k : k)), in(std::size_t(d) * ldw),
          in_size(down_rows * ldi), tail(in + 2 * in_size),
          total(tail + (swiglu ? down_rows * ldw : 2 * down_rows * y_stride(d))) {}
};

// acc[nt] += A B for the 16 rows of A (at arow, ldmatrix's addressing: row l % 16, k half l / 16)
// and NT 8-column tiles of B over k < K. brow: this lane's ldmatrix address of B's first two tiles at
// k = 0 (matrix l / 8 holds n-tile l / 16, k half (l / 8) % 2); k_step and n_step: the elements from
// there to k = 16 and to the next two tiles. B stored [k][n] (Transposed: lane l gives row k = l % 8
// + 8 ((l / 8) % 2) at the tile's first column), or [n][k] (row n = l % 8 + 8 (l / 16), at k = 8 ((l /
// 8) % 2)).
template <int NT, bool Transposed>
__device__ void product16(float (&acc)[NT][4], const bf16* arow, const bf16* brow, unsigned k_step, unsigned n_step,
                          unsigned K) {
    static_assert(NT % 2 == 0, "B's tiles come two by two");
    for (unsigned k0 = 0; k0 < K; k0 += 16, arow += 16, brow += k_step) {
        std::uint32_t a[4];
        load_matrices(a, arow);
#pragma unroll
        for (int p = 0; p < NT / 2; ++p) {
            std::uint32_t b[4];
            load_matrices<Transposed>(b, brow + p * n_step);
            mma_bf16(acc[2 * p], a, b[0], b[1]);
            mma_bf16(acc[2 * p + 1], a, b[2], b[3]);
        }
    }
}

__global__ void __launch_bounds__(down_threads, 2)
    mlp_down_backward_kernel(MlpShape s, const bf16* __restrict__ dy, const bf16* __restrict__ w,
                             const bf16* __restrict__ gu, bf16* __restrict__ dgu) {
    extern __shared__ __align__(16) bf16 down_shared[];
    const DownLayout at(s.d, s.m);
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const unsigned ldd = padded(s.d), ldw = at.ldw, ldg = padded(2 * s.m), blocks = column_blocks(s.m);

    // the weight (zeros in the columns past m) and the first tile's rows, one group of copies
    start_matrix(down_shared, ldw, w, s.d, s.m, blocks * column_block);
    auto start_tile = [&](unsigned tile, unsigned buffer) {
        start_rows(down_shared + at.dy + buffer * at.dy_size, ldd, dy, s.d, tile * down_rows, down_rows, s.rows, s.d);
        start_rows(down_shared + at.gu + buffer * at.gu_size, ldg, gu, 2 * s.m, tile * down_rows, down_rows, s.rows,
                   2 * s.m);
    };
    unsigned t = blockIdx.x;
    if (t < s.tiles) start_tile(t, 0);
    commit_copies();

    for (unsigned b = 0; t < s.tiles; t += gridDim.x, b ^= 1) {
        const bf16* sdy = down_shared + at.dy + b * at.dy_size;
        bf16* sgu = down_shared + at.gu + b * at.gu_size;
        const unsigned next = t + gridDim.x;
        __syncthreads();  // buffer b ^ 1 (the tile before) is copied out: it takes the next tile
        if (next < s.tiles) start_tile(next, b ^ 1);
        commit_copies();
        wait_copies<1>();  // this tile's group (and the weight's, the first time)
        __syncthreads();

        // dh for the tile's 16 rows and each of the warp's 32-column blocks, then SwiGLU's backward into
        // the gu tile: the gate's and the up's columns j and m + j of a row are this lane's alone.
        const bf16* arow = sdy + (lane % 16) * ldd + 8 * (lane / 16);
        for (unsigned cb = warp; cb < blocks; cb += down_warps) {
            const unsigned n0 = cb * column_block;
            float acc[4][4] = {};
            // B = Wdown stored [k][n]: this lane's row (k) l % 8 + 8 ((l / 8) % 2), columns from n0 + 8 (l / 16)
            const bf16* brow = down_shared + (lane % 8 + 8 * ((lane / 8) % 2)) * ldw + n0 + 8 * (lane / 16);
            product16<4, true>(acc, arow, brow, 16 * ldw, 16, s.d);
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int hi = 0; hi < 2; ++hi) {
                    const unsigned r = g + 8 * hi, j = n0 + 8 * nt + 2 * q;
                    if (j >= s.m) continue;  // the zero columns of the last block (m even: j + 1 < m too)
                    __nv_bfloat162* gate = reinterpret_cast<__nv_bfloat162*>(sgu + r * ldg + j);
                    __nv_bfloat162* up = reinterpret_cast<__nv_bfloat162*>(sgu + r * ldg + s.m + j);
                    swiglu_backward_pair(*gate, *up, make_float2(acc[nt][2 * hi], acc[nt][2 * hi + 1]),
                                         __bfloat1622float2(*gate), __bfloat1622float2(*up));
                }
        }
        __syncthreads();
        store_rows(dgu, 2 * s.m, sgu, ldg, t * down_rows, down_rows, s.rows, 2 * s.m);
    }
    wait_copies<0>();  // no copy outlives the block
}

// The arrays of the forward kernel: y = r + A w^T, A = SwiGLU(in) or in itself; Norm: the RMSNorm
// of y after it, xn = gain y rinv in bf16, as rmsnorm_forward computes it.
struct ForwardArgs {
    const bf16* in;  // [rows][2 k]: [gate | up] (SwiGLU), or [rows][k]
    const bf16* w;   // [d][k]
    const float* r;  // [rows][d]
    bf16* h_out;     // SwiGLU: h [rows][k] for the backward, or null
    float* y;        // [rows][d]
    const float* gain;
    bf16* xn;     // Norm: [rows][d]
    float* rinv;  // Norm: [rows]
    unsigned rows, k, d, tiles;
};

// 16 rows a tile: the input's rows arrive by cp.async (the next tile's while this one computes);
// SwiGLU's h goes into its tile (and out to h_out); each warp takes 16-column blocks of y, r's
// entries loaded before the product so that their latency passes during it.
template <bool Swiglu, bool Norm>
__global__ void __launch_bounds__(down_threads, 2) residual_forward_kernel(ForwardArgs s) {
    static_assert(!(Swiglu && Norm), "h's tile and y's share the shared memory's tail");
    extern __shared__ __align__(16) bf16 down_shared[];
    const ForwardLayout at(s.d, s.k, Swiglu);
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const unsigned ldi = at.ldi, ldw = at.ldw, k_chunks = (ldw - pad) / 8, in_cols = Swiglu ? 2 * s.k : s.k;
    bf16* sh = down_shared + at.tail;
    float* sy = reinterpret_cast<float*>(down_shared + at.tail);
    const unsigned ldy = y_stride(s.d);

    // the weight (zeros in the columns past k) and the first tile's rows, one group of copies
    start_matrix(down_shared, ldw, s.w, s.d, s.k, 8 * k_chunks);
    auto start_tile = [&](unsigned tile, unsigned buffer) {
        start_rows(down_shared + at.in + buffer * at.in_size, ldi, s.in, in_cols, tile * down_rows, down_rows, s.rows,
                   in_cols);
    };
    unsigned t = blockIdx.x;
    if (t < s.tiles) start_tile(t, 0);
    commit_copies();

    for (unsigned b = 0; t < s.tiles; t += gridDim.x, b ^= 1) {
        const bf16* sin = down_shared + at.in + b * at.in_size;
        const unsigned next = t + gridDim.x, row0 = t * down_rows;
        __syncthreads();  // buffer b ^ 1 and the tail (the tile before) are read: they take the next ones
        if (next < s.tiles) start_tile(next, b ^ 1);
        commit_copies();
        wait_copies<1>();  // this tile's group (and the weight's, the first time)
        __syncthreads();

        if constexpr (Swiglu) {
            // h = silu(gate) up, 8 columns a thread, as swiglu_forward computes it: into the h tile, and out
            for (unsigned i = threadIdx.x; i < down_rows * k_chunks; i += down_threads) {
                const unsigned rr = i / k_chunks, j = 8 * (i % k_chunks);
                uint4 out = make_uint4(0, 0, 0, 0);  // the columns past k: zeros
                if (j < s.k) {
                    const uint4 gate4 = *reinterpret_cast<const uint4*>(sin + rr * ldi + j);
                    const uint4 up4 = *reinterpret_cast<const uint4*>(sin + rr * ldi + s.k + j);
                    const __nv_bfloat162* gate = reinterpret_cast<const __nv_bfloat162*>(&gate4);
                    const __nv_bfloat162* up = reinterpret_cast<const __nv_bfloat162*>(&up4);
                    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const float2 a2 = __bfloat1622float2(gate[e]), u2 = __bfloat1622float2(up[e]);
                        h[e] = __floats2bfloat162_rn(siluf(a2.x) * u2.x, siluf(a2.y) * u2.y);
                    }
                    if (s.h_out && row0 + rr < s.rows)
                        *reinterpret_cast<uint4*>(s.h_out + std::size_t(row0 + rr) * s.k + j) = out;
                }
                *reinterpret_cast<uint4*>(sh + rr * ldw + j) = out;
            }
            __syncthreads();
        }

        const bf16* arow = Swiglu ? sh + (lane % 16) * ldw + 8 * (lane / 16) : sin + (lane % 16) * ldi + 8 * (lane / 16);
        for (unsigned n0 = warp * forward_columns; n0 < s.d; n0 += down_warps * forward_columns) {
            float2 res[2][2];
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int hi = 0; hi < 2; ++hi) {
                    const unsigned row = row0 + g + 8 * hi;
                    res[nt][hi] = row < s.rows
                                      ? *reinterpret_cast<const float2*>(s.r + std::size_t(row) * s.d + n0 + 8 * nt + 2 * q)
                                      : make_float2(0.0f, 0.0f);
                }
            float acc[2][4] = {};
            // B = w stored [n][k]: this lane's row (n) n0 + l % 8 + 8 (l / 16), columns from 8 ((l / 8) % 2)
            const bf16* brow = down_shared + (n0 + lane % 8 + 8 * (lane / 16)) * ldw + 8 * ((lane / 8) % 2);
            product16<2, false>(acc, arow, brow, 16, 16 * ldw, ldw - pad);
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int hi = 0; hi < 2; ++hi) {
                    const unsigned rr = g + 8 * hi, col = n0 + 8 * nt + 2 * q;
                    const float2 v = make_float2(acc[nt][2 * hi] + res[nt][hi].x, acc[nt][2 * hi + 1] + res[nt][hi].y);
                    if constexpr (Norm) *reinterpret_cast<float2*>(sy + rr * ldy + col) = v;
                    else if (row0 + rr < s.rows) *reinterpret_cast<float2*>(s.y + std::size_t(row0 + rr) * s.d + col) = v;
                }
        }
        if constexpr (Norm) {
            // a warp a row: y out, and its norm (the sum of squares over the row, then gain y rinv)
            __syncthreads();
            for (unsigned rr = warp; rr < down_rows && row0 + rr < s.rows; rr += down_warps) {
                const std::size_t row = row0 + rr;
                float sum = 0;
                for (unsigned c = 4 * lane; c < s.d; c += 128) {
                    const float4 v = *reinterpret_cast<const float4*>(sy + rr * ldy + c);
                    sum += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
                }
                float total[1] = {sum};
                warp_sums(total);
                const float ri = 1.0f / sqrtf(total[0] / float(s.d) + norm_eps);
                if (lane == 0) s.rinv[row] = ri;
                for (unsigned c = 4 * lane; c < s.d; c += 128) {
                    const float4 v = *reinterpret_cast<const float4*>(sy + rr * ldy + c);
                    *reinterpret_cast<float4*>(s.y + row * s.d + c) = v;
                    const float* gk = s.gain + c;  // the parameters' tensors are 4-byte aligned only
                    __nv_bfloat162 out[2] = {__floats2bfloat162_rn(gk[0] * v.x * ri, gk[1] * v.y * ri),
                                             __floats2bfloat162_rn(gk[2] * v.z * ri, gk[3] * v.w * ri)};
                    *reinterpret_cast<uint2*>(s.xn + row * s.d + c) = *reinterpret_cast<const uint2*>(out);
                }
            }
        }
    }
    wait_copies<0>();  // no copy outlives the block
}

// ---- The MLP's forward in one kernel: both products and SwiGLU between them ----
// gu = xn [Wg; Wu]^T (rounded to bf16, as the gate/up product wrote it), h = SwiGLU(gu), y = r + h
// Wdown^T (mlp.cuh says how). The separate gate/up product wrote gu for
// residual_forward_kernel to read back, 1 KB a row each way at the paper's sizes (a step at T = 256
// ran 0.255 ms faster with that product left out: docs/PERFORMANCE.md, 2026-11-28, twenty-fourth
// session). This kernel is mma.sync's, for where Hopper's warpgroup kernel cannot run: both weights
// stay in shared memory (one block an SM, 192 KB at d 128, m 256), and after they are copied each
// warp runs on its own, with no block barrier. (Earlier cuts that shared a tile among the block's
// warps, with barriers between its phases or its chunks, ran at 266-494 us against the 208 of the
// two kernels.)
struct MlpForwardLayout {
    std::size_t down, tiles, total;  // Wdown's offset [d][m], the warps' xn tiles' [mlp_rows][d], the whole (bf16)
    __host__ __device__ MlpForwardLayout(unsigned d, unsigned m)
        : down(2 * std::size_t(m) * d), tiles(down + std::size_t(d) * m),
          total(tiles + std::size_t(mlp_warps) * mlp_rows * d) {}
};

// S: the first product's 16-deep steps (d = 16 S: 64 or 128).
template <unsigned S>
__global__ void __launch_bounds__(mlp_threads, 1) mlp_forward_kernel(MlpForwardArgs s) {
    extern __shared__ __align__(16) bf16 mlp_shared[];
    constexpr unsigned d = 16 * S, ND = 2 * S, pieces = d / 8;  // y's 8-column tiles; a row of xn's 16-byte pieces
    const MlpForwardLayout at(d, s.m);
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const unsigned chunks = s.m / mlp_chunk, m_pieces = s.m / 8;
    uint4* const shared = reinterpret_cast<uint4*>(mlp_shared);
    uint4* const xn_tile = shared + at.tiles / 8 + warp * mlp_rows * pieces;

    const unsigned warps = gridDim.x * mlp_warps;
    unsigned tile = blockIdx.x * mlp_warps + warp;
    if (tile < s.tiles) start_row_tile<d>(xn_tile, s.xn, s.rows, mlp_rows * tile, lane);

    // The weights (once a block). Shared row c 64 + 32 p + L of [Wg; Wu] is chunk c's position L of
    // the gate (p 0) or the up (p 1), by cp.async.
    for (unsigned i = threadIdx.x; i < 2 * s.m * pieces; i += mlp_threads) {
        const unsigned row = i / pieces, j = i % pieces, c = row / 64, part = (row / 32) % 2;
        copy16(shared + row * pieces + swizzled(row, j),
               s.w_gu + std::size_t(part * s.m + mlp_chunk * c + mlp_unit(row % 32)) * d + 8 * j, true);
    }
    commit_copies();
    for (unsigned i = threadIdx.x; i < d * chunks; i += mlp_threads) {
        const unsigned n = i / chunks, c = i % chunks;
        uint4* row = shared + at.down / 8 + n * m_pieces;
        copy_down_chunk(s, n, c, [&](unsigned nt) { return row + swizzled(n, 4 * c + nt); });
    }
    wait_copies<0>();
    __syncthreads();

    // ldmatrix's lanes on B stored [n][k]: row (n) l % 8 + 8 (l / 16), k half (l / 8) % 2. Every row
    // offset below is a multiple of 8, so a lane's rows all swizzle by l % 8.
    const unsigned l8 = lane % 8, b_half = (lane / 8) % 2;
    const uint4* gu_row = shared + (l8 + 8 * (lane / 16)) * pieces;
    const uint4* down_row = shared + at.down / 8 + (l8 + 8 * (lane / 16)) * m_pieces;
    for (; tile < s.tiles; tile += warps) {
        const unsigned row_g = mlp_rows * tile + g;
        float y[ND][4];
        load_residual(y, s, row_g, q);  // its latency passes in the first chunk
        std::uint32_t xa[S][4];
        load_row_fragments(xa, xn_tile, lane);
        if (tile + warps < s.tiles) start_row_tile<d>(xn_tile, s.xn, s.rows, mlp_rows * (tile + warps), lane);

        for (unsigned c = 0; c < chunks; ++c) {
            float acc[8][4] = {};
            const uint4* bc = gu_row + 64 * c * pieces;
#pragma unroll
            for (unsigned st = 0; st < S; ++st) {
                const unsigned piece = swizzled(l8, 2 * st + b_half);
#pragma unroll
                for (unsigned p = 0; p < 4; ++p) {
                    std::uint32_t b[4];
                    load_matrices(b, bc + 16 * p * pieces + piece);
                    mma_bf16(acc[2 * p], xa[st], b[0], b[1]);
                    mma_bf16(acc[2 * p + 1], xa[st], b[2], b[3]);
                }
            }
            std::uint32_t hq[2][4];
            swiglu_chunk(hq, acc, s, c, row_g, q);
            // y += h Wdown^T over the chunk
#pragma unroll
            for (unsigned k2 = 0; k2 < 2; ++k2) {
                const unsigned piece = swizzled(l8, 4 * c + 2 * k2 + b_half);
#pragma unroll
                for (unsigned p = 0; p < ND / 2; ++p) {
                    std::uint32_t b[4];
                    load_matrices(b, down_row + 16 * p * m_pieces + piece);
                    mma_bf16(y[2 * p], hq[k2], b[0], b[1]);
                    mma_bf16(y[2 * p + 1], hq[k2], b[2], b[3]);
                }
            }
        }
        store_output(y, s, row_g, q);
    }
    wait_copies<0>();  // no copy outlives the block
}

// ---- An input gradient that feeds an RMSNorm's backward, and that backward, in one kernel ----
// dxn = dy w over K (the product's sums in fp32 registers), then rmsnorm_backward_rows_kernel's
// arithmetic on whole rows: the separate norm read dxn back in fp32 (1 KB a row written and read at
// d 128). A warp owns 16 whole rows (all d columns), a block 8 warps; w is too large to stay in
// shared memory beside two blocks (K x d: 128 KB for the MLP's gate/up product at the paper's
// sizes), so w's rows stream with dy's columns, nb_k at a time, through nb_stages buffers
// (cp.async), as a plain product's operands do. The products go through shared memory to the norm,
// which takes a row at a time with whole rows in each load. H100, a launch at T = 256 (ncu): 280 us
// for the gate/up product's 724 MB (2.6 TB/s) against cuBLAS's 141 and the norm's 217. Measured on
// the way: the norm on the products' registers (eight rows' 32-byte pieces a load) 420 us, warps
// waiting on those loads two thirds of the time; 32 columns a slice in four buffers 301 us (dy's rows
// read 64 bytes at a time); 4 warps a block (four blocks an SM) slower.
constexpr unsigned nb_warps = 8, nb_threads = 32 * nb_warps, nb_rows = 16 * nb_warps;
constexpr unsigned nb_k = 64, nb_stages = 3;  // 128-byte pieces of dy's rows; 108 KB, two blocks an SM

template <class D>
struct NormBackwardArgs {
    const bf16* dy;  // [rows][ldy], the first K columns summed
    const bf16* w;   // [K][d]
    const float* x;  // the norm's input [rows][d]
    const float* rinv;
    const float* gain;
    D* dx;            // [rows][d]: written; fp32 or bf16
    const D* before;  // accumulating, what is added to (dx itself, or another array)
    bf16* dx16;       // its bf16 copy (a float dx), or null
    float* partials;  // [gridDim.x][d]: the gain's gradient summed over each block's rows
    unsigned ldy, rows, K, d, tiles;
    bool accumulate;
    // the first layer's norm: dx summed by letters (tokens[row] < vocab) into [gridDim.x][vocab][d]
    // partial sums of the embedding's gradient instead of written (the kernel's LV > 0)
    const std::int32_t* tokens;
    float* letter_partials;
    unsigned vocab;
};

// The shared memory, in bf16 elements: nb_stages buffers, each dy's tile [nb_rows][nb_k + pad] and
// w's rows [nb_k][d + pad]; after a tile's products, the same bytes hold each warp's dxn [16][d + 4]
// in fp32 (the last tile's: then the warps' gain sums [nb_warps][d]).
struct NormBackwardLayout {
    unsigned lda, ldb;
    std::size_t a_size, stage, total;
    __host__ __device__ explicit NormBackwardLayout(unsigned d)
        : lda(padded(nb_k)), ldb(padded(d)), a_size(std::size_t(nb_rows) * lda), stage(a_size + std::size_t(nb_k) * ldb),
          total(nb_stages * stage > 2 * std::size_t(nb_rows) * y_stride(d) ? nb_stages * stage
                                                                           : 2 * std::size_t(nb_rows) * y_stride(d)) {}
};

// V adjacent values (V 1, 2 or 4: V elements aligned) of an fp32 or bf16 array in one access.
template <int V, class T>
__device__ void load_columns(const T* p, float (&v)[V]) {
    if constexpr (V == 4) {
        const float4 f = load4(p);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else if constexpr (V == 2 && std::is_same_v<T, bf16>) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
        v[0] = f.x, v[1] = f.y;
    } else if constexpr (V == 2) {
        const float2 f = *reinterpret_cast<const float2*>(p);
        v[0] = f.x, v[1] = f.y;
    } else {
        v[0] = as_float(*p);
    }
}
template <int V, class T>
__device__ void store_columns(T* p, const float (&v)[V]) {
    if constexpr (V == 4) {
        store4(p, make_float4(v[0], v[1], v[2], v[3]));
    } else if constexpr (V == 2 && std::is_same_v<T, bf16>) {
        *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v[0], v[1]);
    } else if constexpr (V == 2) {
        *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
    } else if constexpr (std::is_same_v<T, bf16>) {
        *p = __float2bfloat16(v[0]);
    } else {
        *p = v[0];
    }
}

// d = 8 NT; LV: 0, or the letters' tables a lane keeps (vocab <= LV; NormBackwardArgs::tokens)
template <int NT, int LV, class D>
__global__ void __launch_bounds__(nb_threads, 2) norm_backward_product_kernel(NormBackwardArgs<D> s) {
    extern __shared__ __align__(16) bf16 nb_shared[];
    const NormBackwardLayout at(s.d);
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const unsigned slices = (s.K + nb_k - 1) / nb_k, d = 8 * NT;

    // slice `slice` of tile `tile` into its buffer: dy's columns and w's rows k0 .. k0 + nb_k - 1,
    // zeros past K (in both: 0 times a stale value could be NaN) and past the rows
    auto start_slice = [&](unsigned tile, unsigned slice) {
        bf16* a = nb_shared + (slice % nb_stages) * at.stage;
        bf16* b = a + at.a_size;
        const unsigned k0 = slice * nb_k;
        for (unsigned i = threadIdx.x; i < nb_rows * (nb_k / 8); i += nb_threads) {
            const unsigned r = i / (nb_k / 8), c = 8 * (i % (nb_k / 8)), row = tile * nb_rows + r;
            const bool valid = row < s.rows && k0 + c < s.K;
            copy16(a + r * at.lda + c, s.dy + (valid ? std::size_t(row) * s.ldy + k0 + c : 0), valid);
        }
        for (unsigned i = threadIdx.x; i < nb_k * (d / 8); i += nb_threads) {
            const unsigned r = i / (d / 8), c = 8 * (i % (d / 8));
            const bool valid = k0 + r < s.K;
            copy16(b + r * at.ldb + c, s.w + (valid ? std::size_t(k0 + r) * d + c : 0), valid);
        }
    };

    float dgain[NT / 4] = {};  // the gain's gradient in the lane's columns, summed over its rows
    // LV > 0: dx of the lane's columns summed per letter over its rows, in registers (the letter's
    // index a compare a table: a dynamic index would put the tables in local memory)
    float letters[LV > 0 ? LV : 1][NT / 4] = {};
    for (unsigned t = blockIdx.x; t < s.tiles; t += gridDim.x) {
        for (unsigned p = 0; p + 1 < nb_stages; ++p) {
            if (p < slices) start_slice(t, p);
            commit_copies();
        }
        float acc[NT][4] = {};
        const unsigned arow_at = (16 * warp + lane % 16) * at.lda + 8 * (lane / 16);
        // B = w stored [k][n]: this lane's row (k) l % 8 + 8 ((l / 8) % 2), columns from 8 (l / 16)
        const unsigned brow_at = at.a_size + (lane % 8 + 8 * ((lane / 8) % 2)) * at.ldb + 8 * (lane / 16);
        for (unsigned ks = 0; ks < slices; ++ks) {
            wait_copies<nb_stages - 2>();  // this thread's copies of slice ks
            __syncthreads();  // everyone's; and every warp is done with slice ks - 1, whose buffer is refilled now
            if (ks + nb_stages - 1 < slices) start_slice(t, ks + nb_stages - 1);
            commit_copies();
            const bf16* stage = nb_shared + (ks % nb_stages) * at.stage;
            product16<NT, true>(acc, stage + arow_at, stage + brow_at, 16 * at.ldb, 16, nb_k);
        }
        wait_copies<0>();  // (the last groups are empty)
        __syncthreads();   // every warp is done with the buffers: they take the warps' dxn tiles

        // dxn through shared memory (the warp's 16 rows, fp32), then the norm's backward a row at a
        // time by rmsnorm_backward_rows_kernel's formula (its products in another order: a few ulp
        // apart), each lane NT / 4 adjacent columns, so that each load takes whole rows of x and dx
        // (in the mma's layout, eight rows' 32-byte pieces a load, the warps waited on those loads two
        // thirds of their time: 420 us a launch at T = 256)
        float* tile = reinterpret_cast<float*>(nb_shared) + warp * 16 * y_stride(d);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi)
                *reinterpret_cast<float2*>(tile + (g + 8 * hi) * y_stride(d) + 8 * nt + 2 * q) =
                    make_float2(acc[nt][2 * hi], acc[nt][2 * hi + 1]);
        __syncwarp();
        constexpr int V = NT / 4, batch = 4;  // columns a lane, rows whose loads are in flight together
        const unsigned c0 = V * lane;
        float gk[V];
        load_columns<V>(s.gain + c0, gk);
        for (unsigned r0 = 0; r0 < 16; r0 += batch) {
            const unsigned first = t * nb_rows + 16 * warp + r0;
            if (first >= s.rows) break;
            float xv[batch][V], dv[batch][V], before[batch][V], dot[batch], ri[batch];
#pragma unroll
            for (int i = 0; i < batch; ++i) {
                const bool in = first + i < s.rows;
                const std::size_t at_row = std::size_t(in ? first + i : first) * d + c0;
                load_columns<V>(s.x + at_row, xv[i]);
                if (s.accumulate) load_columns<V>(s.before + at_row, before[i]);
                ri[i] = s.rinv[in ? first + i : first];
                load_columns<V>(tile + (r0 + i) * y_stride(d) + c0, dv[i]);
                dot[i] = 0;
#pragma unroll
                for (int j = 0; j < V; ++j) dot[i] += gk[j] * dv[i][j] * xv[i][j];
            }
            warp_sums(dot);
#pragma unroll
            for (int i = 0; i < batch; ++i) {
                if (first + i >= s.rows) break;
                const float r = ri[i], scale = r * r * r * dot[i] / float(d);
                float out[V];
#pragma unroll
                for (int j = 0; j < V; ++j) {
                    out[j] = r * gk[j] * dv[i][j] - xv[i][j] * scale;
                    if (s.accumulate) out[j] += before[i][j];
                    dgain[j] += dv[i][j] * xv[i][j] * r;
                }
                if constexpr (LV > 0) {
                    const int letter = s.tokens[first + i];
#pragma unroll
                    for (int l = 0; l < LV; ++l)
#pragma unroll
                        for (int j = 0; j < V; ++j) letters[l][j] += letter == l ? out[j] : 0.0f;
                } else {
                    const std::size_t at_row = std::size_t(first + i) * d + c0;
                    store_columns<V>(s.dx + at_row, out);
                    if (s.dx16) store_columns<V>(s.dx16 + at_row, out);
                }
            }
        }
        __syncthreads();  // every warp is done with its tile before the next tile's first slices
    }

    // the block's partial sums of the gain's gradient: the warps' in order (no atomics: the same bits
    // every run)
    float* sums = reinterpret_cast<float*>(nb_shared);  // [nb_warps][d]
#pragma unroll
    for (int j = 0; j < NT / 4; ++j) sums[warp * d + (NT / 4) * lane + j] = dgain[j];
    __syncthreads();
    for (unsigned c = threadIdx.x; c < d; c += nb_threads) {
        float v = sums[c];
        for (unsigned w = 1; w < nb_warps; ++w) v += sums[w * d + c];
        s.partials[std::size_t(blockIdx.x) * d + c] = v;
    }
    if constexpr (LV > 0) {  // the letters' sums likewise, after the gain's, [nb_warps][vocab][d]
        float* tables = sums + nb_warps * d;
#pragma unroll
        for (int l = 0; l < LV; ++l)
            if (unsigned(l) < s.vocab)
#pragma unroll
                for (int j = 0; j < NT / 4; ++j) tables[(warp * s.vocab + l) * d + (NT / 4) * lane + j] = letters[l][j];
        __syncthreads();
        for (unsigned c = threadIdx.x; c < s.vocab * d; c += nb_threads) {
            float v = tables[c];
            for (unsigned w = 1; w < nb_warps; ++w) v += tables[w * s.vocab * d + c];
            s.letter_partials[std::size_t(blockIdx.x) * s.vocab * d + c] = v;
        }
    }
}

// Where the shapes fit the kernels: d a multiple of 16 (the backward's mma k; the forward's 16-column
// blocks and 4-float rows), m of 8 (16-byte rows of gate and up), 16-byte aligned arrays.
bool fits(std::size_t rows, std::size_t d, std::size_t m, std::initializer_list<const void*> arrays) {
    if (rows == 0 || rows >= (1u << 31) || d == 0 || d % 16 || d > 4096 || m == 0 || m % 8 || m > 4096) return false;
    for (const void* p : arrays)
        if (!aligned16(p)) return false;
    return true;
}

// The kernels' tiles of down_rows rows over `rows` (fits keeps rows below 2^31).
unsigned tiles_of(std::size_t rows) { return unsigned((rows + down_rows - 1) / down_rows); }

}  // namespace

std::size_t fused_products_rows() { return std::size_t(16) * down_rows * 2 * sm_count(); }

bool mlp_down_backward(const bf16* dy, const bf16* w_down, const bf16* gu, bf16* dgu, std::size_t rows, std::size_t d,
                       std::size_t m, cudaStream_t stream, bool warpgroups) {
    if (!fits(rows, d, m, {dy, w_down, gu, dgu})) return false;
    if (warpgroups && mlp_down_backward_wgmma(dy, w_down, gu, dgu, unsigned(rows), unsigned(d), unsigned(m), stream))
        return true;
    const MlpShape s{unsigned(rows), unsigned(d), unsigned(m), tiles_of(rows)};
    const std::size_t bytes = DownLayout(s.d, s.m).total * sizeof(bf16);
    return launch_persistent(mlp_down_backward_kernel, down_threads, bytes, 2, s.tiles, "mlp_down_backward", stream, s,
                             dy, w_down, gu, dgu);
}

bool mlp_down_backward_from_xn(const bf16* dy, const bf16* xn, const bf16* w_gu, const bf16* w_down, bf16* dgu,
                               std::size_t rows, std::size_t d, std::size_t m, cudaStream_t stream) {
    return fits(rows, d, m, {dy, xn, w_gu, w_down, dgu}) &&
           mlp_down_backward_from_xn_wgmma(dy, xn, w_gu, w_down, dgu, unsigned(rows), unsigned(d), unsigned(m), stream);
}

bool mlp_backward_through_norm(const bf16* dy, const bf16* xn, const bf16* w_gu, const bf16* w_down, bf16* dgu,
                               const MlpNormBackward& norm, std::size_t rows, std::size_t d, std::size_t m,
                               const Partials& partials, cudaStream_t stream) {
    if (!fits(rows, d, m, {dy, xn, w_gu, w_down, dgu, norm.x, norm.before, norm.dx, partials.scratch}) || !norm.gain ||
        !norm.rinv || !norm.dg || !partials.sums)
        return false;
    const NormBackwardRows nb{norm.x, norm.gain, norm.rinv, norm.before, norm.dx, partials.scratch};
    // a row of partial sums a block, within what rmsnorm_backward's region holds
    const unsigned blocks = mlp_backward_through_norm_wgmma(dy, xn, w_gu, w_down, dgu, nb, unsigned(rows), unsigned(d),
                                                            unsigned(m), unsigned(rmsnorm_backward_partials(rows, d) / d),
                                                            stream);
    if (blocks == 0) return false;
    partials.sums->push_back({partials.scratch, blocks, d, norm.dg});
    return true;
}

bool mlp_forward(const bf16* xn, const bf16* w_gu, const bf16* w_down, const float* r, bf16* gu, bf16* h, float* y,
                 std::size_t rows, std::size_t d, std::size_t m, std::size_t min_rows, cudaStream_t stream,
                 bool warpgroups) {
    if (rows < min_rows || m % 64 || (d != 64 && d != 128) || !fits(rows, d, m, {xn, w_gu, w_down, r, gu, h, y}))
        return false;
    const unsigned tiles = tiles_of(rows);
    const MlpForwardArgs s{xn, w_gu, w_down, r, gu, h, y, unsigned(rows), unsigned(m), tiles};
    if (warpgroups && mlp_forward_wgmma(s, unsigned(d), stream)) return true;
    const std::size_t bytes = MlpForwardLayout(unsigned(d), unsigned(m)).total * sizeof(bf16);
    const auto kernel = d == 64 ? mlp_forward_kernel<4> : mlp_forward_kernel<8>;
    const int per_sm =
        persistent_blocks_per_sm(reinterpret_cast<const void*>(kernel), mlp_threads, bytes, "mlp_forward");
    if (per_sm < 1) return false;
    // at least two tiles a warp where there are two (the device tests' small batches then take a warp
    // through its next tile too)
    const unsigned blocks =
        std::max(1u, std::min<unsigned>((tiles + 2 * mlp_warps - 1) / (2 * mlp_warps), unsigned(per_sm) * sm_count()));
    kernel<<<blocks, mlp_threads, bytes, stream>>>(s);
    check(cudaGetLastError(), "mlp_forward");
    return true;
}

bool mlp_down_forward(const bf16* gu, const bf16* w_down, const float* r, bf16* h, float* y, std::size_t rows,
                      std::size_t m, std::size_t d, std::size_t min_rows, cudaStream_t stream) {
    if (rows < min_rows || !fits(rows, d, m, {gu, w_down, r, h, y})) return false;
    const ForwardArgs s{gu, w_down, r, h, y, nullptr, nullptr, nullptr,
                        unsigned(rows), unsigned(m), unsigned(d), tiles_of(rows)};
    const std::size_t bytes = ForwardLayout(s.d, s.k, true).total * sizeof(bf16);
    return launch_persistent(residual_forward_kernel<true, false>, down_threads, bytes, 2, s.tiles, "mlp_down_forward",
                             stream, s);
}

bool residual_norm_forward(const bf16* x, const bf16* w, const float* r, float* y, const float* gain, bf16* xn,
                           float* rinv, std::size_t rows, std::size_t k, std::size_t d, std::size_t min_rows,
                           cudaStream_t stream, bool warpgroups, const std::int32_t* r_tokens) {
    if (rows < min_rows || k % 16 || !fits(rows, d, k, {x, w, r, y, xn})) return false;
    if (warpgroups && residual_norm_wgmma(x, w, r, y, gain, xn, rinv, unsigned(rows), unsigned(k), unsigned(d), stream,
                                          r_tokens))
        return true;
    if (r_tokens) return false;  // the rows by token: the warpgroup kernel's only
    const ForwardArgs s{x, w, r, nullptr, y, gain, xn, rinv,
                        unsigned(rows), unsigned(k), unsigned(d), tiles_of(rows)};
    const std::size_t bytes = ForwardLayout(s.d, s.k, false).total * sizeof(bf16);
    return launch_persistent(residual_forward_kernel<false, true>, down_threads, bytes, 2, s.tiles,
                             "residual_norm_forward", stream, s);
}

bool first_layer_by_token(std::size_t d, std::size_t K, std::size_t vocab, bool training) {
    return d <= 4096 && K <= 65536 && vocab <= 8 &&
           first_layer_by_token_wgmma(unsigned(d), unsigned(K), unsigned(vocab), training);
}

namespace {
// The kernel for d and the letters' tables (0: none; else vocab rounded up to 2 or 8), or null.
template <int NT, class D>
auto norm_backward_kernel(std::size_t vocab) -> decltype(&norm_backward_product_kernel<NT, 0, D>) {
    return vocab == 0 ? norm_backward_product_kernel<NT, 0, D>
           : vocab <= 2 ? norm_backward_product_kernel<NT, 2, D>
           : vocab <= 8 ? norm_backward_product_kernel<NT, 8, D>
                        : nullptr;
}
}  // namespace

template <class D>
bool norm_backward_product(const bf16* dy, std::size_t ldy, const bf16* w, const float* x, const float* gain,
                           const float* rinv, D* dx, bf16* dx16, float* dg, std::size_t rows, std::size_t k,
                           std::size_t d, bool accumulate, std::size_t min_rows, const Partials& partials,
                           cudaStream_t stream, const LetterSums& letters, const D* before, bool warpgroups) {
    if (rows == 0 || rows < min_rows || rows >= (1u << 31) || k == 0 || k % 8 || k > 65536 || ldy < k || ldy % 8 ||
        (d != 32 && d != 64 && d != 128) || !aligned16(partials.scratch) || (std::is_same_v<D, bf16> && dx16))
        return false;
    for (const void* p : {static_cast<const void*>(dy), static_cast<const void*>(w), static_cast<const void*>(x),
                          static_cast<const void*>(gain), static_cast<const void*>(dx), static_cast<const void*>(dx16),
                          static_cast<const void*>(before)})
        if (!aligned16(p)) return false;
    // a bf16 dx added to another array: the warpgroup kernel where it runs (Hopper, d 128, the delta
    // rule's projections); by letters where x is the embedding's rows by token (letters.embedding,
    // up to 8 letters: norm_backward_wgmma declines the others)
    if constexpr (std::is_same_v<D, bf16>) {
        const bool by_letters = letters.tokens != nullptr;
        if (warpgroups && accumulate && before && before != dx && partials.sums &&
            (!by_letters || (letters.table && letters.partials.sums && aligned16(letters.embedding) &&
                             aligned16(letters.partials.scratch)))) {
            const NormBackwardRows nb{x, gain, rinv, before, dx, partials.scratch};
            const LetterRows lr{letters.tokens, letters.embedding, letters.partials.scratch, unsigned(letters.vocab)};
            // a row of partial sums a block within rmsnorm_backward's region (and the letters' within
            // rmsnorm_backward_embed_partials')
            unsigned most = unsigned(rmsnorm_backward_partials(rows, d) / d);
            if (by_letters && letters.vocab > 0)
                most = std::min(most, unsigned(rmsnorm_backward_embed_partials(rows, d, letters.vocab) / (letters.vocab * d)));
            const unsigned blocks = norm_backward_wgmma(dy, unsigned(ldy), unsigned(k), w, nb, lr, unsigned(rows),
                                                        unsigned(d), most, stream);
            if (blocks) {
                partials.sums->push_back({partials.scratch, blocks, d, dg});
                if (by_letters)
                    letters.partials.sums->push_back({letters.partials.scratch, blocks, letters.vocab * d, letters.table});
                return true;
            }
        }
    }
    if (!x) return false;  // x's rows by token (letters.embedding): the warpgroup kernel's only
    const std::size_t vocab = letters.tokens ? letters.vocab : 0;
    if (letters.tokens && (vocab == 0 || dx16 || !letters.table || !letters.partials.sums ||
                           !aligned16(letters.partials.scratch)))
        return false;
    auto kernel = d == 32   ? norm_backward_kernel<4, D>(vocab)
                  : d == 64 ? norm_backward_kernel<8, D>(vocab)
                            : norm_backward_kernel<16, D>(vocab);
    if (!kernel) return false;  // more letters than the tables take
    const NormBackwardArgs<D> s{dy, w, x, rinv, gain, dx, before ? before : dx, dx16, partials.scratch, unsigned(ldy),
                                unsigned(rows), unsigned(k), unsigned(d), unsigned((rows + nb_rows - 1) / nb_rows),
                                accumulate, letters.tokens, letters.partials.scratch, unsigned(vocab)};
    const std::size_t bytes = NormBackwardLayout(s.d).total * sizeof(bf16);
    const int per_sm = persistent_blocks_per_sm(reinterpret_cast<const void*>(kernel), nb_threads, bytes,
                                                "norm_backward_product");
    if (per_sm < 2) return false;  // one block's copies beside the other's products and norm
    // a block a tile up to every SM's blocks, and a row of partial sums a block within what
    // rmsnorm_backward's region holds (and the letters' within rmsnorm_backward_embed_partials')
    unsigned blocks = std::min({s.tiles, unsigned(per_sm) * sm_count(), unsigned(rmsnorm_backward_partials(rows, d) / d)});
    if (vocab) blocks = std::min(blocks, unsigned(rmsnorm_backward_embed_partials(rows, d, vocab) / (vocab * d)));
    kernel<<<blocks, nb_threads, bytes, stream>>>(s);
    check(cudaGetLastError(), "norm_backward_product");
    partials.sums->push_back({partials.scratch, blocks, d, dg});
    if (vocab) letters.partials.sums->push_back({letters.partials.scratch, blocks, vocab * d, letters.table});
    return true;
}

// The residual stream's gradient in its two types (kernels.cuh).
template bool norm_backward_product(const bf16*, std::size_t, const bf16*, const float*, const float*, const float*,
                                    float*, bf16*, float*, std::size_t, std::size_t, std::size_t, bool, std::size_t,
                                    const Partials&, cudaStream_t, const LetterSums&, const float*, bool);
template bool norm_backward_product(const bf16*, std::size_t, const bf16*, const float*, const float*, const float*,
                                    bf16*, bf16*, float*, std::size_t, std::size_t, std::size_t, bool, std::size_t,
                                    const Partials&, cudaStream_t, const LetterSums&, const bf16*, bool);

}  // namespace statetrack::gpu::cuda
