// norm_backward_product's work on Hopper's warpgroup products (norm_backward_wgmma in mlp.cuh): the
// projections' input gradient into the first norm where dx is bf16, at d 128 and K 385 to 448. Built
// for sm_90a only, as the folder's other kernels.
#include "norm_backward_rows.cuh"

namespace statetrack::gpu::cuda {

namespace {

// ---- The projections' input gradient into the first norm on warpgroups (norm_backward_product's
// work where dx is bf16, d 128 and K is the delta rule's 385-448 projection columns): dxn = dy W for dy
// [rows][ld] with K columns summed and W [K][d], then norm_backward_rows. W lies in shared memory
// N-major as [Wg; Wu] does for the dxn product above (K rows of 128-byte rows of 64 columns, zero rows
// up to KS 16-deep steps); each warp's dy rows are staged by cp.async (zeros past K) and held as KS
// steps of A fragments, the next tile's rows arriving during this one's products and norm. ----
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

template <unsigned S, unsigned KS>
__global__ void __launch_bounds__(mlp_threads, 1)
    norm_backward_wgmma_kernel(const bf16* __restrict__ dy, unsigned ld, unsigned K, const bf16* __restrict__ w,
                               unsigned rows, NormBackwardRows nb) {
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

    float dgain[4] = {};
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
        norm_backward_rows(nb, dxn, row_g, rows, g, q, dgain);
    }
    wait_copies<0>();  // no copy outlives the block
    store_gain_partials<d>(nb, dgain, wp.shared, g, q);
}

}  // namespace

unsigned norm_backward_wgmma(const bf16* dy, unsigned ld, unsigned K, const bf16* w, const NormBackwardRows& nb,
                             unsigned rows, unsigned d, unsigned most_blocks, cudaStream_t stream) {
    constexpr unsigned KS = 28;  // 448 columns: the delta rule's projections at d 128 (ldp 392)
    if (d != 128 || K <= 16 * (KS - 4) || K > 16 * KS || K % 8 || ld < K || ld % 8) return 0;
    const std::size_t bytes = std::size_t(16 * KS) * d * 2 * 2 + 1024;  // W, the warps' tiles (as wide), alignment
    return launch_warpgroups(norm_backward_wgmma_kernel<8, KS>, bytes, rows, most_blocks, "norm_backward_wgmma", stream,
                             dy, ld, K, w, rows, nb);
}

}  // namespace statetrack::gpu::cuda
