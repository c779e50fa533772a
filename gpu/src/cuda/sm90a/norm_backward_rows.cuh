#pragma once
// The RMSNorm's backward on a warpgroup's product rows (mlp_backward_through_norm's and
// norm_backward_wgmma's epilogue): dxn in the accumulators' layout, each row's dot product by two
// shuffles, dx = before + r g dxn - x r^3 sum(g dxn x) / d in bf16 as norm_backward_product computes
// it (its sums in another order), and the gain's gradient dxn x r summed over the warp's rows (a
// reduce-scatter over the 8 lanes that hold the same columns) and over the block's warps, in a fixed
// order, into the block's partial sums. In the first layer (LetterRows) x comes from the embedding by
// token, and dx is summed per letter the same way instead of written.
#include "wgmma.cuh"

namespace statetrack::gpu::cuda {

namespace {

// Adds the sums over a warp's rows of the lane's 2 ND columns (v[2 nt + e]: column 8 nt + 2 q + e, as
// the accumulators hold them) to acc, its 4 of them: a reduce-scatter over the 8 lanes g that hold
// the same columns, 2 ND sums -> ND -> ND / 2 -> 4 a lane (lane bits 4, 3, 2 are g's), lane g keeping
// columns 8 (2 g + j / 2) + 2 q + j % 2.
template <unsigned ND>
__device__ inline void add_row_group_sums(const float (&v)[2 * ND], float (&acc)[4], unsigned g) {
    static_assert(ND == 16, "4 sums a lane at d 128");
    float half16[ND], half8[ND / 2];
#pragma unroll
    for (unsigned j = 0; j < ND; ++j) {
        const bool upper = g & 4;
        const float send = upper ? v[j] : v[ND + j], keep = upper ? v[ND + j] : v[j];
        half16[j] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
    }
#pragma unroll
    for (unsigned j = 0; j < ND / 2; ++j) {
        const bool upper = g & 2;
        const float send = upper ? half16[j] : half16[ND / 2 + j], keep = upper ? half16[ND / 2 + j] : half16[j];
        half8[j] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
    }
#pragma unroll
    for (unsigned j = 0; j < ND / 4; ++j) {
        const bool upper = g & 1;
        const float send = upper ? half8[j] : half8[ND / 4 + j], keep = upper ? half8[ND / 4 + j] : half8[j];
        acc[j] += keep + __shfl_xor_sync(0xffffffffu, send, 4);
    }
}

// The norm's backward on a warp's rows row_g and row_g + 8 of a tile, dxn in the accumulator layout
// (lane q's columns 8 nt + 2 q and + 1), into nb.dx; the lane's 4 columns of the gain's gradient
// (add_row_group_sums' columns) added to dgain. With LV > 0 letters (the first layer's norm,
// LetterRows): x read from the embedding by each row's token, and dx, not written, added per letter
// to by_letter[l] (the same 4 columns a lane).
template <unsigned ND, unsigned LV>
__device__ inline void norm_backward_rows(const NormBackwardRows& nb, const LetterRows& letters,
                                          const float (&dxn)[ND][4], unsigned row_g, unsigned rows, unsigned g,
                                          unsigned q, float (&dgain)[4], float (&by_letter)[LV > 0 ? LV : 1][4]) {
    constexpr unsigned d = 8 * ND;
    float part[2 * ND] = {};  // dxn x r of the lane's columns (2 nt + e), over its two rows
    float out[LV > 0 ? 2 : 1][2 * ND];  // with letters, each row's dx (2 nt + e)
    int letter[2] = {-1, -1};           // and its letter (-1 past the rows: none)
#pragma unroll
    for (unsigned hi = 0; hi < 2; ++hi) {
        const unsigned row = row_g + 8 * hi;
        const bool in = row < rows;
        const std::size_t at = std::size_t(in ? row : 0) * d + 2 * q;
        std::size_t x_at = at;
        if constexpr (LV > 0) {
            const int token = __ldg(letters.tokens + (in ? row : 0));
            letter[hi] = in ? token : -1;
            x_at = std::size_t(token) * d + 2 * q;
        }
        const float* x = LV > 0 ? letters.embedding : nb.x;
        // the loads first (read-only for the kernel: __ldg, which the compiler need not order after
        // the stores below)
        float2 xv[ND], bv[ND], gv[ND];
#pragma unroll
        for (unsigned nt = 0; nt < ND; ++nt) {
            xv[nt] = __ldg(reinterpret_cast<const float2*>(x + x_at + 8 * nt));
            bv[nt] = pair_value(__ldg(reinterpret_cast<const unsigned*>(nb.before + at + 8 * nt)));
            gv[nt] = make_float2(__ldg(nb.gain + 8 * nt + 2 * q), __ldg(nb.gain + 8 * nt + 2 * q + 1));
        }
        const float r = __ldg(nb.rinv + (in ? row : 0));
        float dot = 0;
#pragma unroll
        for (unsigned nt = 0; nt < ND; ++nt)
            dot += gv[nt].x * dxn[nt][2 * hi] * xv[nt].x + gv[nt].y * dxn[nt][2 * hi + 1] * xv[nt].y;
        dot += __shfl_xor_sync(0xffffffffu, dot, 1);
        dot += __shfl_xor_sync(0xffffffffu, dot, 2);
        const float scale = r * r * r * dot / float(d);
#pragma unroll
        for (unsigned nt = 0; nt < ND; ++nt) {
            const float dv0 = dxn[nt][2 * hi], dv1 = dxn[nt][2 * hi + 1];
            const float out0 = r * gv[nt].x * dv0 - xv[nt].x * scale + bv[nt].x;
            const float out1 = r * gv[nt].y * dv1 - xv[nt].y * scale + bv[nt].y;
            part[2 * nt] += dv0 * xv[nt].x * r, part[2 * nt + 1] += dv1 * xv[nt].y * r;
            if constexpr (LV > 0) out[hi][2 * nt] = out0, out[hi][2 * nt + 1] = out1;
            else if (in) *reinterpret_cast<__nv_bfloat162*>(nb.dx + at + 8 * nt) = __floats2bfloat162_rn(out0, out1);
        }
    }
    add_row_group_sums<ND>(part, dgain, g);
    if constexpr (LV > 0) {
        // each letter's sum over the two rows, then over the warp's rows as the gain's (the letter's
        // index a compare a table: a dynamic index would put the sums in local memory)
#pragma unroll
        for (unsigned l = 0; l < LV; ++l) {
            float v[2 * ND];
#pragma unroll
            for (unsigned j = 0; j < 2 * ND; ++j)
                v[j] = (letter[0] == int(l) ? out[0][j] : 0.0f) + (letter[1] == int(l) ? out[1][j] : 0.0f);
            add_row_group_sums<ND>(v, by_letter[l], g);
        }
    }
}
// The rows as they are (no letters).
template <unsigned ND>
__device__ inline void norm_backward_rows(const NormBackwardRows& nb, const float (&dxn)[ND][4], unsigned row_g,
                                          unsigned rows, unsigned g, unsigned q, float (&dgain)[4]) {
    float none[1][4];
    norm_backward_rows<ND, 0>(nb, LetterRows{}, dxn, row_g, rows, g, q, dgain, none);
}

// The block's partial sums of `count` rows of d sums (the gain's gradient, or the letters' sums: the
// lanes' 4 columns each of every row, as add_row_group_sums leaves them) into partials [blocks][count][d]:
// the warps' in order through `shared`, whose weights no product reads any more (no atomics: the same
// bits every run).
template <unsigned d, unsigned N>  // count <= N
__device__ inline void store_block_sums(const float (&sums)[N][4], unsigned count, float* partials,
                                        unsigned char* shared, unsigned g, unsigned q) {
    __syncthreads();  // every warp is done with the weights: their bytes take the warps' sums
    float* table = reinterpret_cast<float*>(shared);  // [mlp_warps][count][d]
    const unsigned warp = threadIdx.x / 32;
#pragma unroll
    for (unsigned k = 0; k < N; ++k)
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) {
            const unsigned i = 4 * g + j;
            if (k < count) table[(warp * count + k) * d + 8 * (i / 2) + 2 * q + i % 2] = sums[k][j];
        }
    __syncthreads();
    for (unsigned c = threadIdx.x; c < count * d; c += mlp_threads) {
        float v = table[c];
        for (unsigned w = 1; w < mlp_warps; ++w) v += table[w * count * d + c];
        partials[std::size_t(blockIdx.x) * count * d + c] = v;
    }
}
template <unsigned d>
__device__ inline void store_gain_partials(const NormBackwardRows& nb, const float (&dgain)[4], unsigned char* shared,
                                           unsigned g, unsigned q) {
    const float sums[1][4] = {{dgain[0], dgain[1], dgain[2], dgain[3]}};
    store_block_sums<d>(sums, 1, nb.partials, shared, g, q);
}

}  // namespace

}  // namespace statetrack::gpu::cuda
