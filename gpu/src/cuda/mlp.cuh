#pragma once
// What the MLP's kernels share (mlp_forward and mlp_down_backward in kernels.cuh): the arguments, the
// order of the hidden units inside a chunk, the warps' tiles of rows and the steps around the
// products. fused_products.cu's kernels run on mma.sync (sm_80 and later); sm90a/mlp_wgmma.cu's on
// Hopper's warpgroup products, whose B operands the tensor cores read from shared memory once for 64
// rows, where mma.sync's ldmatrix read them once for each warp's 16.
//
// Every warp takes 16 rows at a time: their xn is staged in its own shared tile by cp.async (the
// next tile's while this one computes), then held as the first product's A fragments in registers
// with their y as accumulators (started from r). The hidden units go 32 at a time: a chunk's gate
// and up accumulators become h in registers, and h's 8-column tiles are already the A fragments of
// the second product's 16-deep steps, so h never passes through shared memory.
//
// Within a chunk the gate's and up's rows, and Wdown's columns, lie in a permuted order, so that gu
// and h go out in whole 16-byte pieces without any shuffle: an mma's accumulator gives lane 4 g + q
// the columns 8 nt + 2 q and + 1 of its rows g and g + 8 in each 8-column tile nt, so with chunk
// position L = 8 nt + 2 q + e holding hidden unit 8 q + 2 nt + e (mlp_unit), lane q's four tiles
// hold units 8 q .. 8 q + 7 of the chunk. Shared rows are not padded (the weights and the warps'
// tiles fill 224 of the 227 KB): their 16-byte pieces are XOR-swizzled by the row's last three bits
// (swizzled), which keeps ldmatrix's eight rows on distinct banks, and is the 128-byte swizzle that
// the warpgroup products read.
#include <cstdint>

#include "activations.cuh"
#include "bf16_tiles.cuh"
#include "kernels.cuh"

namespace statetrack::gpu::cuda {

constexpr unsigned mlp_chunk = 32, mlp_rows = 16;  // hidden units a chunk; rows a warp's tile
constexpr unsigned mlp_warps = 8, mlp_threads = 32 * mlp_warps;  // both kernels: one block an SM

struct MlpForwardArgs {
    const bf16* xn;      // [rows][d]: the MLP norm's output
    const bf16* w_gu;    // [2m][d]: Wg's rows, then Wu's
    const bf16* w_down;  // [d][m]
    const float* r;      // [rows][d]: the residual stream
    bf16* gu;            // [rows][2m], or null (inference)
    bf16* h;             // [rows][m], or null
    float* y;            // [rows][d]
    unsigned rows, m, tiles;  // tiles of mlp_rows rows
};

// The warpgroup kernels (sm90a/mlp_wgmma.cu): false where they cannot run (their code is built for
// sm_90a only) or the shape does not fit them; then fused_products.cu's kernels run.
bool mlp_forward_wgmma(const MlpForwardArgs& s, unsigned d, cudaStream_t stream);
// dgu from dy [rows][d], w_down [d][m] and gu [rows][2m] (mlp_down_backward)
bool mlp_down_backward_wgmma(const bf16* dy, const bf16* w_down, const bf16* gu, bf16* dgu, unsigned rows, unsigned d,
                             unsigned m, cudaStream_t stream);
// the same with gu rebuilt from xn [rows][d] and w_gu [2m][d] (mlp_down_backward_from_xn)
bool mlp_down_backward_from_xn_wgmma(const bf16* dy, const bf16* xn, const bf16* w_gu, const bf16* w_down, bf16* dgu,
                                     unsigned rows, unsigned d, unsigned m, cudaStream_t stream);
// The MLP norm's backward after the MLP's (mlp_backward_through_norm): x [rows][d] the norm's input,
// its gain [d] and rinv [rows], dx [rows][d] = before + the norm's backward, partials [blocks][d] the
// gain's gradient summed over each block's rows.
struct NormBackwardRows {
    const float* x;
    const float* gain;
    const float* rinv;
    const bf16* before;
    bf16* dx;
    float* partials;
};
// mlp_down_backward_from_xn with that after it (d 128): the blocks launched (at most most_blocks),
// 0 where it cannot run
unsigned mlp_backward_through_norm_wgmma(const bf16* dy, const bf16* xn, const bf16* w_gu, const bf16* w_down,
                                         bf16* dgu, const NormBackwardRows& nb, unsigned rows, unsigned d, unsigned m,
                                         unsigned most_blocks, cudaStream_t stream);
// The first layer's norm (norm_backward_product's LetterSums): x's row is the embedding's row of the
// row's token, so it is read from the table, and dx, which goes to the embedding only, is summed per
// letter into partials [blocks][vocab][d] instead of written. tokens null: the rows as they are.
struct LetterRows {
    const std::int32_t* tokens = nullptr;  // [rows], each < vocab
    const float* embedding = nullptr;      // [vocab][d]: the first layer's x by token
    float* partials = nullptr;
    unsigned vocab = 0;
};
// norm_backward_product's work on warpgroups (d 128, K 385 to 448, bf16 dx added to before; with
// letters, vocab <= 8, nb.x unread and nb.dx unwritten): the blocks launched, 0 where it cannot run
unsigned norm_backward_wgmma(const bf16* dy, unsigned ld, unsigned K, const bf16* w, const NormBackwardRows& nb,
                             const LetterRows& letters, unsigned rows, unsigned d, unsigned most_blocks,
                             cudaStream_t stream);
// residual_norm_forward's work on warpgroups (d 128, k 128): y = r + x w^T, then y's RMSNorm, xn =
// gain y rinv (bf16) and rinv; false where it cannot run
bool residual_norm_wgmma(const bf16* x, const bf16* w, const float* r, float* y, const float* gain, bf16* xn,
                         float* rinv, unsigned rows, unsigned k, unsigned d, cudaStream_t stream,
                         const std::int32_t* r_tokens);
// Whether both warpgroup kernels that read the first layer's x can take it by token here
// (first_layer_by_token in kernels.cuh).
bool first_layer_by_token_wgmma(unsigned d, unsigned K, unsigned vocab, bool training);

// A bf16 pair's two values.
__device__ inline float2 pair_value(std::uint32_t w) { return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w)); }

// SwiGLU's backward on two units of a row: the gate's and the up's gradients, d u silu'(a) and d
// silu(a), from dh = d, gate a and up u (as swiglu_backward_kernel, with sigmoid_fast).
__device__ inline void swiglu_backward_pair(__nv_bfloat162& dgate, __nv_bfloat162& dup, float2 d, float2 a, float2 u) {
    const float s0 = sigmoid_fast(a.x), s1 = sigmoid_fast(a.y);
    dgate = __floats2bfloat162_rn(d.x * u.x * (s0 * (1.0f + a.x * (1.0f - s0))),
                                  d.y * u.y * (s1 * (1.0f + a.y * (1.0f - s1))));
    dup = __floats2bfloat162_rn(d.x * (a.x * s0), d.y * (a.y * s1));
}

// SwiGLU's backward on a chunk of a warp's rows g and g + 8 (hi): dgu's bf16 pairs, the gate's dg[hi][nt]
// and the up's du[hi][nt] (units 8 q + 2 nt and + 1 of the chunk, mlp_unit's order), from dh's
// accumulator tiles nt and gate's and up's pairs [hi][nt] of the same units.
__device__ inline void gate_up_gradient(std::uint32_t (&dg)[2][4], std::uint32_t (&du)[2][4], const float (&dh)[4][4],
                                        const std::uint32_t (&ga)[2][4], const std::uint32_t (&ua)[2][4]) {
#pragma unroll
    for (unsigned hi = 0; hi < 2; ++hi)
#pragma unroll
        for (unsigned nt = 0; nt < 4; ++nt) {
            __nv_bfloat162 g2, u2;
            swiglu_backward_pair(g2, u2, make_float2(dh[nt][2 * hi], dh[nt][2 * hi + 1]), pair_value(ga[hi][nt]),
                                 pair_value(ua[hi][nt]));
            dg[hi][nt] = *reinterpret_cast<const std::uint32_t*>(&g2);
            du[hi][nt] = *reinterpret_cast<const std::uint32_t*>(&u2);
        }
}
// A chunk's gate and up pairs [hi][nt] (units 8 q .. 8 q + 7 of the chunk for each hi) out to a
// [rows][2m] array (dgu) in 16-byte pieces, rows row_g and row_g + 8.
__device__ inline void store_gate_up(bf16* out, unsigned rows, unsigned m, unsigned row_g, unsigned q,
                                     const std::uint32_t (&gate)[2][4], const std::uint32_t (&up)[2][4],
                                     unsigned chunk) {
#pragma unroll
    for (unsigned hi = 0; hi < 2; ++hi) {
        const unsigned row = row_g + 8 * hi;
        if (row >= rows) continue;
        bf16* dst = out + std::size_t(row) * 2 * m + mlp_chunk * chunk + 8 * q;
        *reinterpret_cast<uint4*>(dst) = make_uint4(gate[hi][0], gate[hi][1], gate[hi][2], gate[hi][3]);
        *reinterpret_cast<uint4*>(dst + m) = make_uint4(up[hi][0], up[hi][1], up[hi][2], up[hi][3]);
    }
}
// Accumulator tiles 4 half .. 4 half + 3 of a 64-column product: one chunk's.
__device__ inline const float (&chunk_tiles(const float (&acc)[8][4], unsigned half))[4][4] {
    return *reinterpret_cast<const float(*)[4][4]>(&acc[4 * half]);
}

// The hidden unit (within its chunk) at chunk position L.
__device__ inline unsigned mlp_unit(unsigned L) { return 8 * ((L % 8) / 2) + 2 * (L / 8) + L % 2; }
// Where 16-byte piece j of shared row `row` lies (rows of a multiple of 8 pieces).
__device__ inline unsigned swizzled(unsigned row, unsigned j) { return j ^ (row % 8); }
__device__ inline std::uint32_t word(const uint4& v, unsigned i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Starts the copies of rows row0 .. row0 + 15 of a bf16 [rows][d] array (zeros past the last row)
// into a warp's tile [16][d] (its pieces swizzled), one group of copies for this lane.
template <unsigned d>
__device__ inline void start_row_tile(uint4* tile, const bf16* src, unsigned rows, unsigned row0, unsigned lane) {
    constexpr unsigned pieces = d / 8;
#pragma unroll
    for (unsigned i = lane; i < mlp_rows * pieces; i += 32) {
        const unsigned rr = i / pieces, j = i % pieces, row = row0 + rr;
        const bool valid = row < rows;
        copy16(tile + rr * pieces + swizzled(rr, j), src + std::size_t(valid ? row : 0) * d + 8 * j, valid);
    }
    commit_copies();
}
// The warp's tile as a product's A fragments, xa[st] for its 16-deep step st; then the tile may take
// the next rows.
template <unsigned S>
__device__ inline void load_row_fragments(std::uint32_t (&xa)[S][4], const uint4* tile, unsigned lane) {
    wait_copies<0>();
    __syncwarp();
    // ldmatrix's lanes on A: row l % 16, k half l / 16
    const uint4* row = tile + (lane % 16) * (2 * S);
#pragma unroll
    for (unsigned st = 0; st < S; ++st) load_matrices(xa[st], row + swizzled(lane % 8, 2 * st + lane / 16));
    __syncwarp();
}

// Rows g and g + 8 of a tile (rows row_g, row_g + 8) of r [rows][d] into y's accumulators: columns 8
// nt + 2 q, + 1 (zeros past the last row).
// With tokens, r is a table and row n's residual its row tokens[n].
template <unsigned ND>
__device__ inline void load_residual(float (&y)[ND][4], const float* r, unsigned rows, unsigned row_g, unsigned q,
                                     const std::int32_t* tokens = nullptr) {
    constexpr unsigned d = 8 * ND;
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
        const unsigned row = row_g + 8 * hi;
        const std::size_t at = row >= rows ? 0 : tokens ? std::size_t(__ldg(tokens + row)) : row;
        const float* rr = r + at * d + 2 * q;
#pragma unroll
        for (unsigned nt = 0; nt < ND; ++nt) {
            const float2 v = row < rows ? *reinterpret_cast<const float2*>(rr + 8 * nt) : make_float2(0.0f, 0.0f);
            y[nt][2 * hi] = v.x, y[nt][2 * hi + 1] = v.y;
        }
    }
}
template <unsigned ND>
__device__ inline void load_residual(float (&y)[ND][4], const MlpForwardArgs& s, unsigned row_g, unsigned q) {
    load_residual(y, s.r, s.rows, row_g, q);
}
template <unsigned ND>
__device__ inline void store_output(const float (&y)[ND][4], const MlpForwardArgs& s, unsigned row_g, unsigned q) {
    constexpr unsigned d = 8 * ND;
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
        const unsigned row = row_g + 8 * hi;
        if (row >= s.rows) continue;
#pragma unroll
        for (unsigned nt = 0; nt < ND; ++nt)
            *reinterpret_cast<float2*>(s.y + std::size_t(row) * d + 8 * nt + 2 * q) =
                make_float2(y[nt][2 * hi], y[nt][2 * hi + 1]);
    }
}

// A chunk's gate/up accumulators (tiles 0-3 the gate's 32 positions, 4-7 the up's) as gu's bf16
// pairs, [hi][nt]: row g + 8 hi, units 8 q + 2 nt and + 1.
__device__ inline void round_gate_up(std::uint32_t (&ga)[2][4], std::uint32_t (&ua)[2][4], const float (&acc)[8][4]) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
            const __nv_bfloat162 av = __floats2bfloat162_rn(acc[nt][2 * hi], acc[nt][2 * hi + 1]);
            const __nv_bfloat162 uv = __floats2bfloat162_rn(acc[4 + nt][2 * hi], acc[4 + nt][2 * hi + 1]);
            ga[hi][nt] = *reinterpret_cast<const std::uint32_t*>(&av);
            ua[hi][nt] = *reinterpret_cast<const std::uint32_t*>(&uv);
        }
}

// SwiGLU on chunk c's accumulators (tiles 0-3 the gate's 32 positions, 4-7 the up's): gu in bf16 and
// h = silu(gate) up from those values (sigmoid_fast), out to gu and h where asked, and h as the
// second product's A fragments, hq[k2] = h's tiles 2 k2 and 2 k2 + 1.
__device__ inline void swiglu_chunk(std::uint32_t (&hq)[2][4], const float (&acc)[8][4], const MlpForwardArgs& s,
                                    unsigned c, unsigned row_g, unsigned q) {
    std::uint32_t ga[2][4], ua[2][4];
    round_gate_up(ga, ua, acc);
#pragma unroll
    for (int hi = 0; hi < 2; ++hi)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
            const float2 a2 = pair_value(ga[hi][nt]), u2 = pair_value(ua[hi][nt]);
            const __nv_bfloat162 hv =
                __floats2bfloat162_rn(a2.x * sigmoid_fast(a2.x) * u2.x, a2.y * sigmoid_fast(a2.y) * u2.y);
            hq[nt / 2][hi + 2 * (nt % 2)] = *reinterpret_cast<const std::uint32_t*>(&hv);
        }
    const unsigned unit = mlp_chunk * c + 8 * q;
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
        const unsigned row = row_g + 8 * hi;
        if (row >= s.rows) continue;
        if (s.gu) {
            bf16* out = s.gu + std::size_t(row) * 2 * s.m + unit;
            *reinterpret_cast<uint4*>(out) = make_uint4(ga[hi][0], ga[hi][1], ga[hi][2], ga[hi][3]);
            *reinterpret_cast<uint4*>(out + s.m) = make_uint4(ua[hi][0], ua[hi][1], ua[hi][2], ua[hi][3]);
        }
        if (s.h)
            *reinterpret_cast<uint4*>(s.h + std::size_t(row) * s.m + unit) =
                make_uint4(hq[0][hi], hq[0][2 + hi], hq[1][hi], hq[1][2 + hi]);
    }
}

// Wdown's row n, chunk c, in the chunk's order: piece nt of the chunk holds positions 8 nt + 2 q + e,
// q = 0 .. 3, which are units 8 q + 2 nt + e: word nt of the chunk's global piece q, a 4 x 4
// transpose in registers. `place(nt)` says where piece nt goes.
template <class Place>
__device__ inline void copy_down_chunk(const MlpForwardArgs& s, unsigned n, unsigned c, Place place) {
    const uint4* src = reinterpret_cast<const uint4*>(s.w_down + std::size_t(n) * s.m + mlp_chunk * c);
    uint4 v[4];
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) v[j] = src[j];
#pragma unroll
    for (unsigned nt = 0; nt < 4; ++nt)
        *place(nt) = make_uint4(word(v[0], nt), word(v[1], nt), word(v[2], nt), word(v[3], nt));
}

}  // namespace statetrack::gpu::cuda
