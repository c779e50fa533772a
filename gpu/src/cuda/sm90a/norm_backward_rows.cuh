#pragma once
// The RMSNorm's backward on a warpgroup's product rows (mlp_backward_through_norm's and
// norm_backward_wgmma's epilogue): dxn in the accumulators' layout, each row's dot product by two
// shuffles, dx = before + r g dxn - x r^3 sum(g dxn x) / d in bf16 as norm_backward_product computes
// it (its sums in another order), and the gain's gradient dxn x r summed over the warp's rows (a
// reduce-scatter over the 8 lanes that hold the same columns) and over the block's warps, in a fixed
// order, into the block's partial sums.
#include "wgmma.cuh"

namespace statetrack::gpu::cuda {

namespace {

// The MLP norm's backward on a warp's rows row_g and row_g + 8 of a tile, dxn in the accumulator
// layout (lane q's columns 8 nt + 2 q and + 1), into nb.dx; the lane's 4 columns of the gain's
// gradient (columns 8 (2 g + j / 2) + 2 q + j % 2) added to dgain.
template <unsigned ND>
__device__ inline void norm_backward_rows(const NormBackwardRows& nb, const float (&dxn)[ND][4], unsigned row_g,
                                          unsigned rows, unsigned g, unsigned q, float (&dgain)[4]) {
    constexpr unsigned d = 8 * ND;
    float part[2 * ND] = {};  // dxn x r of the lane's columns (2 nt + e), over its two rows
#pragma unroll
    for (unsigned hi = 0; hi < 2; ++hi) {
        const unsigned row = row_g + 8 * hi;
        const bool in = row < rows;
        const std::size_t at = std::size_t(in ? row : 0) * d + 2 * q;
        // the loads first (read-only for the kernel: __ldg, which the compiler need not order after
        // the stores below)
        float2 xv[ND], bv[ND], gv[ND];
#pragma unroll
        for (unsigned nt = 0; nt < ND; ++nt) {
            xv[nt] = __ldg(reinterpret_cast<const float2*>(nb.x + at + 8 * nt));
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
            if (in) *reinterpret_cast<__nv_bfloat162*>(nb.dx + at + 8 * nt) = __floats2bfloat162_rn(out0, out1);
        }
    }
    // the 8 lanes g of a column set: 32 sums -> 16 -> 8 -> 4 a lane (lane bits 4, 3, 2 are g's)
    float half16[ND], half8[ND / 2];
#pragma unroll
    for (unsigned j = 0; j < ND; ++j) {
        const bool upper = g & 4;
        const float send = upper ? part[j] : part[ND + j], keep = upper ? part[ND + j] : part[j];
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
        dgain[j] += keep + __shfl_xor_sync(0xffffffffu, send, 4);
    }
}

// The block's partial sums of the gain's gradient (the lanes' 4 columns each, norm_backward_rows):
// the warps' in order through `shared`, whose weights no product reads any more.
template <unsigned d>
__device__ inline void store_gain_partials(const NormBackwardRows& nb, const float (&dgain)[4], unsigned char* shared,
                                           unsigned g, unsigned q) {
    __syncthreads();  // every warp is done with the weights: their bytes take the warps' sums
    float* sums = reinterpret_cast<float*>(shared);  // [mlp_warps][d]
    const unsigned warp = threadIdx.x / 32;
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
        const unsigned i = 4 * g + j;
        sums[warp * d + 8 * (i / 2) + 2 * q + i % 2] = dgain[j];
    }
    __syncthreads();
    for (unsigned col = threadIdx.x; col < d; col += mlp_threads) {
        float v = sums[col];
        for (unsigned k = 1; k < mlp_warps; ++k) v += sums[k * d + col];
        nb.partials[std::size_t(blockIdx.x) * d + col] = v;
    }
}

}  // namespace

}  // namespace statetrack::gpu::cuda
