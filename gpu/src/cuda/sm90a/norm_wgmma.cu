// The products beside an RMSNorm on Hopper's warpgroup products (mlp.cuh): the mixer's output product
// with the MLP's norm after it (residual_norm_wgmma, residual_norm_forward's work at d 128, k 128), and
// the projections' input gradient into the first norm where dx is bf16, at d 128 and K 385 to 448
// (norm_backward_wgmma, norm_backward_product's). Built for sm_90a only, as the folder's other kernels.
#include "norm_backward_rows.cuh"

namespace statetrack::gpu::cuda {

namespace {

// ---- The projections' input gradient into the first norm on warpgroups (norm_backward_product's
// work where dx is bf16, d 128 and K is the delta rule's 385-448 projection columns): dxn = dy W for dy
// [rows][ld] with K columns summed and W [K][d], then norm_backward_rows. W lies in shared memory
// N-major as [Wg; Wu] does for the dxn product above (K rows of 128-byte rows of 64 columns, zero rows
// up to KS 16-deep steps); each warp's dy rows are staged by cp.async (zeros past K) and held as KS
// steps of A fragments, the next tile's rows arriving during this one's products and norm. In the
// first layer (LV > 0) x's rows are the embedding's by token, read from its table (L1-resident), and
// dx, for the embedding only, is summed per letter instead of written: of the mma.sync kernel's bytes
// (dy, x, before) x's 67 MB a launch at T = 256 are gone. ----
template <unsigned P>  // 16-byte pieces a staged row
__device__ inline void start_rows_zero_past(uint4* tile, const bf16* src, unsigned ld, unsigned K, unsigned rows,
                                            unsigned row0, unsigned lane) {
#pragma unroll 4
    for (unsigned i = lane; i < mlp_rows * P; i += 32) {
        const unsigned rr = i / P, j = i % P, row = row0 + rr;
        const bool valid = row < rows && 8 * j < K;
        copy16(tile + rr * P + swizzled(rr, j), src + (valid ? std::size_t(row) * ld + 8 * j : 0), valid);
    }
    commit_copies();
}

template <unsigned S, unsigned KS, unsigned LV>  // LV: 0, or the letters' sums a lane keeps (vocab <= LV)
__global__ void __launch_bounds__(mlp_threads, 1)
    norm_backward_wgmma_kernel(const bf16* __restrict__ dy, unsigned ld, unsigned K, const bf16* __restrict__ w,
                               unsigned rows, NormBackwardRows nb, LetterRows letters) {
    extern __shared__ __align__(16) unsigned char wgmma_shared[];
    constexpr unsigned d = 16 * S, ND = 2 * S, Kp = 16 * KS, P = Kp / 8;
    static_assert(ND == 16, "the lanes' shares of the gain's gradient take d 128");
    const WarpPlace<Kp> wp(wgmma_shared, std::size_t(Kp) * d * 2, rows);  // the warps' tiles after W
    const unsigned g = wp.g, q = wp.q;
    if (wp.first < wp.tiles) start_rows_zero_past<P>(wp.row_tile, dy, ld, K, rows, wp.first_row(wp.first), wp.lane);
    for (unsigned i = threadIdx.x; i < Kp * (d / 8); i += mlp_threads) {
        const unsigned k = i / (d / 8), j = i % (d / 8);
        const bool valid = k < K;
        copy16(wp.shared + (j / 8) * Kp * 128 + k * 128 + 16 * swizzled(k, j % 8),
               w + (valid ? std::size_t(k) * d + 8 * j : 0), valid);
    }
    commit_copies();
    wait_copies<0>();
    operands_ready();

    float dgain[4] = {}, by_letter[LV > 0 ? LV : 1][4] = {};
    for (unsigned tile = wp.first; tile < wp.tiles; tile += wp.stride) {
        const unsigned row_g = wp.first_row(tile) + g;
        std::uint32_t a[KS][4];
        load_row_fragments(a, wp.row_tile, wp.lane);
        if (tile + wp.stride < wp.tiles)
            start_rows_zero_past<P>(wp.row_tile, dy, ld, K, rows, wp.first_row(tile + wp.stride), wp.lane);
        float dxn[ND][4];
        wgmma_fence();
#pragma unroll
        for (unsigned st = 0; st < KS; ++st)
            wgmma_64x128<1>(dxn, a[st], swizzle128_n_major_descriptor(wp.base + st * 2048, Kp * 128), st > 0);
        wgmma_commit();
        wgmma_wait<0>();
        settled(dxn);
        norm_backward_rows<ND, LV>(nb, letters, dxn, row_g, rows, g, q, dgain, by_letter);
    }
    wait_copies<0>();  // no copy outlives the block
    store_gain_partials<d>(nb, dgain, wp.shared, g, q);
    if constexpr (LV > 0) store_block_sums<d>(by_letter, letters.vocab, letters.partials, wp.shared, g, q);
}

// ---- The mixer's output product and the MLP's norm on warpgroups (residual_norm_forward's work at d
// 128): y = r + x W^T for x [rows][K] and W [d][K] as the parameters hold it, then y's RMSNorm. W lies
// in shared memory K-major (K / 64 column blocks of d 128-byte rows); each warp's x rows are staged by
// cp.async, the next tile's during this one's product and norm, as in the MLP's forward. y's
// accumulators start from r, so that the residual stream's fp32 sum is the product's own. Two blocks
// an SM (64 KB each): the product is short, and the other block's loads and stores run beside it. The
// mma.sync kernel (fused_products.cu) kept 16-row tiles of y in shared memory between its product and
// its norm, with block barriers between the phases: 82-85 us a launch at T = 256 on an H200 for 201 MB
// (2.4 TB/s); this kernel 74-78 (docs/PERFORMANCE.md, twenty-seventh session). ----
template <unsigned S>  // K = 16 S
__global__ void __launch_bounds__(mlp_threads, 2)
    residual_norm_wgmma_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, const float* __restrict__ r,
                               float* __restrict__ y, const float* __restrict__ gain, bf16* __restrict__ xn,
                               float* __restrict__ rinv, unsigned rows, const std::int32_t* __restrict__ r_tokens) {
    extern __shared__ __align__(16) unsigned char wgmma_shared[];
    constexpr unsigned d = 128, ND = d / 8, K = 16 * S, P = K / 8;
    const WarpPlace<K> wp(wgmma_shared, std::size_t(K) * d * 2, rows);  // the warps' tiles after W
    const unsigned g = wp.g, q = wp.q;
    wp.stage(x, rows, wp.first);
    for (unsigned i = threadIdx.x; i < d * P; i += mlp_threads) {
        const unsigned n = i / P, j = i % P;
        copy16(wp.shared + (j / 8) * d * 128 + n * 128 + 16 * swizzled(n, j % 8), w + std::size_t(n) * K + 8 * j, true);
    }
    commit_copies();
    wait_copies<0>();
    operands_ready();

    for (unsigned tile = wp.first; tile < wp.tiles; tile += wp.stride) {
        const unsigned row_g = wp.first_row(tile) + g;
        float acc[ND][4];
        load_residual(acc, r, rows, row_g, q, r_tokens);
        std::uint32_t a[S][4];
        load_row_fragments(a, wp.row_tile, wp.lane);
        wp.stage(x, rows, tile + wp.stride);
        wgmma_fence();
#pragma unroll
        for (unsigned st = 0; st < S; ++st)
            wgmma_64x128(acc, a[st], swizzle128_descriptor(wp.base + (st / 4) * d * 128 + (st % 4) * 32), 1);
        wgmma_commit();
        wgmma_wait<0>();
        settled(acc);

        // Each row's columns lie in the four lanes q of its group: two shuffles give its sum of
        // squares. Then rmsnorm_forward's formulas (its sum in another order).
        float ri[2];
#pragma unroll
        for (unsigned hi = 0; hi < 2; ++hi) {
            float squares = 0;
#pragma unroll
            for (unsigned nt = 0; nt < ND; ++nt)
                squares += acc[nt][2 * hi] * acc[nt][2 * hi] + acc[nt][2 * hi + 1] * acc[nt][2 * hi + 1];
            squares += __shfl_xor_sync(0xffffffffu, squares, 1);
            squares += __shfl_xor_sync(0xffffffffu, squares, 2);
            ri[hi] = 1.0f / sqrtf(squares / float(d) + norm_eps);
        }
#pragma unroll
        for (unsigned hi = 0; hi < 2; ++hi) {
            const unsigned row = row_g + 8 * hi;
            if (row >= rows) continue;
            if (q == 0) rinv[row] = ri[hi];
#pragma unroll
            for (unsigned nt = 0; nt < ND; ++nt) {
                const unsigned col = 8 * nt + 2 * q;
                const float2 v = make_float2(acc[nt][2 * hi], acc[nt][2 * hi + 1]);
                *reinterpret_cast<float2*>(y + std::size_t(row) * d + col) = v;
                *reinterpret_cast<__nv_bfloat162*>(xn + std::size_t(row) * d + col) =
                    __floats2bfloat162_rn(__ldg(gain + col) * v.x * ri[hi], __ldg(gain + col + 1) * v.y * ri[hi]);
            }
        }
    }
    wait_copies<0>();  // no copy outlives the block
}

constexpr unsigned residual_steps = 8;  // k 128: the delta rule's output at d 128
constexpr unsigned norm_steps = 28;     // 448 columns: the delta rule's projections at d 128 (ldp 392)
// W, the warps' tiles (as wide), alignment
constexpr std::size_t residual_bytes = std::size_t(16 * residual_steps) * 128 * 2 * 2 + 1024;
constexpr std::size_t norm_bytes = std::size_t(16 * norm_steps) * 128 * 2 * 2 + 1024;
// The norm backward's kernel with or without letters, or null where the lanes' sums do not take vocab.
auto norm_backward_kernel(bool by_letters, unsigned vocab) -> decltype(&norm_backward_wgmma_kernel<8, norm_steps, 0>) {
    if (!by_letters) return norm_backward_wgmma_kernel<8, norm_steps, 0>;
    if (vocab == 0 || vocab > 8) return nullptr;
    return vocab <= 2 ? norm_backward_wgmma_kernel<8, norm_steps, 2> : norm_backward_wgmma_kernel<8, norm_steps, 8>;
}
bool norm_backward_fits(unsigned ld, unsigned K, unsigned d) {
    return d == 128 && K > 16 * (norm_steps - 4) && K <= 16 * norm_steps && K % 8 == 0 && ld >= K && ld % 8 == 0;
}
}  // namespace

bool residual_norm_wgmma(const bf16* x, const bf16* w, const float* r, float* y, const float* gain, bf16* xn,
                         float* rinv, unsigned rows, unsigned k, unsigned d, cudaStream_t stream,
                         const std::int32_t* r_tokens) {
    if (d != 128 || k != 16 * residual_steps) return false;
    return launch_warpgroups(residual_norm_wgmma_kernel<residual_steps>, residual_bytes, rows, ~0u, "residual_norm_wgmma",
                             stream, x, w, r, y, gain, xn, rinv, rows, r_tokens) > 0;
}

bool first_layer_by_token_wgmma(unsigned d, unsigned K, unsigned vocab, bool training) {
    auto runs = [](auto kernel, std::size_t bytes, const char* what) {
        return persistent_blocks_per_sm(reinterpret_cast<const void*>(kernel), mlp_threads, bytes, what) > 0;
    };
    if (d != 128 || !runs(residual_norm_wgmma_kernel<residual_steps>, residual_bytes, "residual_norm_wgmma")) return false;
    if (!training) return true;
    const auto kernel = norm_backward_kernel(true, vocab);
    return norm_backward_fits(K, K, d) && kernel && runs(kernel, norm_bytes, "norm_backward_wgmma");
}

unsigned norm_backward_wgmma(const bf16* dy, unsigned ld, unsigned K, const bf16* w, const NormBackwardRows& nb,
                             const LetterRows& letters, unsigned rows, unsigned d, unsigned most_blocks,
                             cudaStream_t stream) {
    const bool by_letters = letters.tokens != nullptr;
    const auto kernel = norm_backward_kernel(by_letters, letters.vocab);
    if (!norm_backward_fits(ld, K, d) || !kernel || (by_letters && (!letters.embedding || !letters.partials))) return 0;
    // (the letters' sums of the block's warps, [mlp_warps][vocab][d] floats at most 32 KB, take W's bytes at the end)
    return launch_warpgroups(kernel, norm_bytes, rows, most_blocks, "norm_backward_wgmma", stream, dy, ld, K, w, rows,
                             nb, letters);
}

}  // namespace statetrack::gpu::cuda
