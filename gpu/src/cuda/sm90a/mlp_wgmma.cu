// The MLP's kernels (mlp.cuh) on Hopper's warpgroup products, wgmma: the forward, and the backward
// from dy to [gate | up]'s gradient. A warpgroup (4 warps) takes 64 rows at a time, and the tensor
// cores read each B operand (a chunk of [Wg; Wu], or Wdown's columns for it) from shared memory
// once for all 64, where mma.sync's ldmatrix read it once for each warp's 16: with mma.sync the
// forward spent its time on shared-memory traffic (ldmatrix 85% of the L1's wavefronts, the L1 80%
// busy, 140 us a launch at T = 256 on an H200; 117 us here). The A operands stay in registers as in
// mma.sync's kernels: the rows' fragments by ldmatrix, and h's, made from the first product's
// accumulators. Built for sm_90a only (its own target in gpu/CMakeLists.txt): on other devices the
// launchers find no code for the device and say no, and fused_products.cu's kernels run. The
// products' helpers are wgmma.cuh's; the norm's backward after the MLP's, norm_backward_rows.cuh's.
//
// The weights lie in the layout wgmma reads with a 128-byte swizzle (K-major, 8-row atoms of 128-byte
// rows): for each 64 columns (k) of a matrix, its rows 128 bytes apart, 16-byte piece j of row r at j
// ^ (r % 8), the 8-row groups 1024 bytes apart, from a 1024-byte-aligned base. A 16-deep step k0
// starts at 2 (k0 % 64) bytes into the row: the swizzle applies to the address bits, as the copies
// placed them.
#include <cstdint>

#include "norm_backward_rows.cuh"

namespace statetrack::gpu::cuda {

namespace {

struct WgmmaLayout {  // bytes from the 1024-aligned base
    std::size_t down, tiles, total;
    __host__ __device__ WgmmaLayout(unsigned d, unsigned m)
        : down(2 * std::size_t(m) * d * 2), tiles(down + std::size_t(d) * m * 2),
          total(tiles + std::size_t(mlp_warps) * mlp_rows * d * 2) {}
};

// [Wg; Wu] as the gate/up product's B operands at `shared` (once a block, by cp.async, committed):
// chunk c's 64 rows (its gate's positions in mlp_unit's order, then its up's) as one operand of d / 64
// column blocks, 128 d bytes a chunk.
template <unsigned d>
__device__ inline void copy_gate_up_operands(unsigned char* shared, const bf16* w_gu, unsigned m) {
    constexpr unsigned pieces = d / 8;
    for (unsigned i = threadIdx.x; i < 2 * m * pieces; i += blockDim.x) {
        const unsigned row = i / pieces, j = i % pieces, c = row / 64, rr = row % 64, part = rr / 32;
        unsigned char* dst = shared + std::size_t(c) * 128 * d + (j / 8) * 8192 + rr * 128 + 16 * swizzled(rr, j % 8);
        copy16(dst, w_gu + std::size_t(part * m + mlp_chunk * c + mlp_unit(rr % 32)) * d + 8 * j, true);
    }
    commit_copies();
}
// Wdown^T as the backward product's B operands at `shared` (once a block): operand G's row rr is unit
// 32 (2 G + rr / 32) + mlp_unit(rr % 32), its piece j the column's entries 8 j .. 8 j + 7 (8 of
// Wdown's rows), 128 d bytes an operand.
template <unsigned d>
__device__ inline void copy_down_transposed(unsigned char* shared, const bf16* w_down, unsigned m) {
    constexpr unsigned pieces = d / 8;
    for (unsigned i = threadIdx.x; i < m * pieces; i += blockDim.x) {
        const unsigned row = i / pieces, j = i % pieces, G = row / 64, rr = row % 64;
        const unsigned unit = mlp_chunk * (2 * G + rr / 32) + mlp_unit(rr % 32);
        std::uint32_t w[4];
#pragma unroll
        for (unsigned e = 0; e < 4; ++e) {
            const bf16 lo = w_down[std::size_t(8 * j + 2 * e) * m + unit];
            const bf16 hi = w_down[std::size_t(8 * j + 2 * e + 1) * m + unit];
            const __nv_bfloat162 pair = __halves2bfloat162(lo, hi);
            w[e] = *reinterpret_cast<const std::uint32_t*>(&pair);
        }
        unsigned char* dst = shared + std::size_t(G) * 128 * d + (j / 8) * 8192 + rr * 128 + 16 * swizzled(rr, j % 8);
        *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}
// acc = xa B for the warpgroup's 64 rows, B one of the operands at `operands` (128 d bytes each,
// operand `index`): the product over d = 16 S, committed as one group.
template <unsigned S>
__device__ inline void product_over_d(float (&acc)[8][4], const std::uint32_t (&xa)[S][4], std::uint32_t operands,
                                      unsigned index) {
    constexpr unsigned d = 16 * S;
    wgmma_fence();
#pragma unroll
    for (unsigned st = 0; st < S; ++st)  // the first step overwrites acc
        wgmma_64x64(acc, xa[st], swizzle128_descriptor(operands + index * 128 * d + (st / 4) * 8192 + (st % 4) * 32),
                    st > 0);
    wgmma_commit();
}

// S: the first product's 16-deep steps (d = 16 S: 64 or 128).
template <unsigned S>
__global__ void __launch_bounds__(mlp_threads, 1) mlp_forward_wgmma_kernel(MlpForwardArgs s) {
    extern __shared__ __align__(16) unsigned char wgmma_shared[];
    constexpr unsigned d = 16 * S, ND = 2 * S;
    const WgmmaLayout at(d, s.m);
    const WarpPlace<d> w(wgmma_shared, at.tiles, s.rows);
    const unsigned g = w.g, q = w.q, chunks = s.m / mlp_chunk;
    unsigned char* const shared = w.shared;
    w.stage(s.xn, s.rows, w.first);

    // The weights (once a block): [Wg; Wu]'s chunks, then Wdown [d][m] as m / 64 column blocks of d rows
    copy_gate_up_operands<d>(shared, s.w_gu, s.m);
    for (unsigned i = threadIdx.x; i < d * chunks; i += mlp_threads) {
        const unsigned n = i / chunks, c = i % chunks;
        copy_down_chunk(s, n, c, [&](unsigned nt) {
            const unsigned piece = 4 * c + nt;
            return reinterpret_cast<uint4*>(shared + at.down + std::size_t(piece / 8) * d * 128 + n * 128 +
                                            16 * swizzled(n, piece % 8));
        });
    }
    wait_copies<0>();
    operands_ready();

    const std::uint32_t gu_base = w.base, down_base = w.base + std::uint32_t(at.down);
    for (unsigned tile = w.first; tile < w.tiles; tile += w.stride) {
        const unsigned row_g = w.first_row(tile) + g;
        float y[ND][4];
        load_residual(y, s, row_g, q);
        std::uint32_t xa[S][4];
        load_row_fragments(xa, w.row_tile, w.lane);
        w.stage(s.xn, s.rows, tile + w.stride);

        // Chunks two at a time (chunks is even): both first products start, then each chunk's SwiGLU
        // runs while the other's product does (c's beside c + 1's first product, c + 1's beside c's
        // second). Across the loop's back edge only the second products are in flight (into y, from
        // hq): with a first product's accumulators in flight there, ptxas made every product
        // synchronous (C7514).
        const auto second_product = [&](float (&a)[8][4], std::uint32_t (&hq)[2][4], unsigned c) {
            settled(a);
            swiglu_chunk(hq, a, s, c, row_g, q);
            wgmma_fence();
#pragma unroll
            for (unsigned k2 = 0; k2 < 2; ++k2)
                wgmma_64xN<d>(y, hq[k2],
                              swizzle128_descriptor(down_base + (c / 2) * d * 128 + (c % 2) * 64 + k2 * 32), 1);
            wgmma_commit();
        };
        for (unsigned c = 0; c < chunks; c += 2) {
            float acc[2][8][4];
            std::uint32_t hq[2][2][4];
            product_over_d(acc[0], xa, gu_base, c);
            product_over_d(acc[1], xa, gu_base, c + 1);
            wgmma_wait<1>();  // all but chunk c + 1's first product
            second_product(acc[0], hq[0], c);
            wgmma_wait<1>();  // all but chunk c's second product
            second_product(acc[1], hq[1], c + 1);
        }
        wgmma_wait<0>();
        settled(y);
        store_output(y, s, row_g, q);
    }
    wait_copies<0>();  // no copy outlives the block
}

// ---- The MLP's backward from dy to dgu (mlp_down_backward): dh = dy Wdown, a product over d, and
// SwiGLU's backward on it with gu ----
// A warpgroup takes 64 rows of dy at a time (A fragments in registers, as xn's in the forward) and
// the hidden units 64 at a time: Wdown's columns for them, transposed into rows of d (K-major) in
// the forward's chunk order, are the product's B operand [64][d]; its accumulators give lane 4 g + q
// units 8 q .. 8 q + 7 of each 32-unit chunk (mlp.cuh), which it reads from gu and writes to dgu in
// 16-byte pieces. Both groups of a pair of 64 start before either's SwiGLU, as in the forward.
struct BackwardLayout {  // bytes from the 1024-aligned base: Wdown^T [m][d] as m / 64 operands, the warps' dy tiles
    std::size_t tiles, total;
    __host__ __device__ BackwardLayout(unsigned d, unsigned m)
        : tiles(std::size_t(m) * d * 2), total(tiles + std::size_t(mlp_warps) * mlp_rows * d * 2) {}
};

template <unsigned S>
__global__ void __launch_bounds__(mlp_threads, 1)
    mlp_down_backward_wgmma_kernel(const bf16* __restrict__ dy, const bf16* __restrict__ w_down,
                                   const bf16* __restrict__ gu, bf16* __restrict__ dgu, unsigned rows, unsigned m) {
    extern __shared__ __align__(16) unsigned char wgmma_shared[];
    constexpr unsigned d = 16 * S;
    const BackwardLayout at(d, m);
    const WarpPlace<d> w(wgmma_shared, at.tiles, rows);
    const unsigned g = w.g, q = w.q;
    w.stage(dy, rows, w.first);

    copy_down_transposed<d>(w.shared, w_down, m);
    operands_ready();

    for (unsigned tile = w.first; tile < w.tiles; tile += w.stride) {
        const unsigned row_g = w.first_row(tile) + g;
        std::uint32_t ya[S][4];
        load_row_fragments(ya, w.row_tile, w.lane);
        w.stage(dy, rows, tile + w.stride);
        // gu's pieces for units group G: [hi][half][gate or up], row g + 8 hi, chunk 2 G + half
        const auto load_gu = [&](uint4 (&v)[2][2][2], unsigned G) {
#pragma unroll
            for (int hi = 0; hi < 2; ++hi)
#pragma unroll
                for (int half = 0; half < 2; ++half)
#pragma unroll
                    for (int part = 0; part < 2; ++part) {
                        const unsigned row = row_g + 8 * hi;
                        v[hi][half][part] =
                            row < rows ? *reinterpret_cast<const uint4*>(gu + std::size_t(row) * 2 * m + part * m +
                                                                         mlp_chunk * (2 * G + half) + 8 * q)
                                       : make_uint4(0, 0, 0, 0);
                    }
        };
        // SwiGLU's backward on group G's two chunks, gate and up from gu's pieces
        const auto backward = [&](float (&a)[8][4], const uint4 (&v)[2][2][2], unsigned G) {
            settled(a);
#pragma unroll
            for (unsigned half = 0; half < 2; ++half) {
                std::uint32_t ga[2][4], ua[2][4];
#pragma unroll
                for (unsigned hi = 0; hi < 2; ++hi)
#pragma unroll
                    for (unsigned nt = 0; nt < 4; ++nt)
                        ga[hi][nt] = word(v[hi][half][0], nt), ua[hi][nt] = word(v[hi][half][1], nt);
                std::uint32_t dg[2][4], du[2][4];
                gate_up_gradient(dg, du, chunk_tiles(a, half), ga, ua);
                store_gate_up(dgu, rows, m, row_g, q, dg, du, 2 * G + half);
            }
        };
        for (unsigned G = 0; G < m / 64; G += 2) {
            float acc[2][8][4];
            uint4 v[2][2][2][2];
            product_over_d(acc[0], ya, w.base, G);
            product_over_d(acc[1], ya, w.base, G + 1);
            load_gu(v[0], G);
            load_gu(v[1], G + 1);
            wgmma_wait<1>();
            backward(acc[0], v[0], G);
            wgmma_wait<0>();
            backward(acc[1], v[1], G + 1);
        }
    }
    wait_copies<0>();  // no copy outlives the block
}

// Both weights into the block's shared memory as the kernels that rebuild gu read them ([Wg; Wu] as
// the gate/up product's operands, Wdown^T as dh's), then ready for the products.
template <unsigned d>
__device__ inline void load_both_weights(const WarpPlace<d>& w, const WgmmaLayout& at, const bf16* w_gu,
                                         const bf16* w_down, unsigned m) {
    copy_gate_up_operands<d>(w.shared, w_gu, m);
    copy_down_transposed<d>(w.shared + at.down, w_down, m);
    wait_copies<0>();
    operands_ready();
}

// ---- The same backward with gu recomputed from xn (mlp_down_backward_from_xn) ----
// gate and up are rebuilt by the forward's own gate/up product (its operands in the same layout, the
// same steps in the same order: the same bits as the gu the forward would have written), so that the
// forward writes no gu and this kernel reads none: 134 MB less each way a launch at T = 256 (half a
// batch, d 128, m 256), for xn's 34 MB read and the product's arithmetic. Shared memory holds both
// weights as the forward's does ([Wg; Wu] as its operands, Wdown^T as the backward's) and the warps'
// xn tiles; dy's fragments come straight from global memory (there is no room for a second tile).
// Each group G of 64 units takes three products (dh, then chunk 2 G's gate/up, then 2 G + 1's):
// the first chunk's SwiGLU backward runs while the last product does.
template <unsigned S>
__device__ inline void load_global_fragments(std::uint32_t (&a)[S][4], const bf16* __restrict__ src, unsigned rows,
                                             unsigned row_g, unsigned q) {
    // lane 4 g + q's words in step st: (row g, k 16 st + 2 q), (g + 8, same), (g, + 8), (g + 8, + 8)
#pragma unroll
    for (unsigned hi = 0; hi < 2; ++hi) {
        const unsigned row = row_g + 8 * hi;
        const bool valid = row < rows;
        const std::uint32_t* p = reinterpret_cast<const std::uint32_t*>(src + std::size_t(valid ? row : 0) * 16 * S) + q;
#pragma unroll
        for (unsigned st = 0; st < S; ++st) {
            a[st][hi] = valid ? p[8 * st] : 0u;
            a[st][2 + hi] = valid ? p[8 * st + 4] : 0u;
        }
    }
}

template <unsigned S>
__global__ void __launch_bounds__(mlp_threads, 1)
    mlp_down_backward_from_xn_kernel(const bf16* __restrict__ dy, const bf16* __restrict__ xn,
                                     const bf16* __restrict__ w_gu, const bf16* __restrict__ w_down,
                                     bf16* __restrict__ dgu, unsigned rows, unsigned m) {
    extern __shared__ __align__(16) unsigned char wgmma_shared[];
    constexpr unsigned d = 16 * S;
    const WgmmaLayout at(d, m);
    const WarpPlace<d> w(wgmma_shared, at.tiles, rows);
    const unsigned g = w.g, q = w.q;
    w.stage(xn, rows, w.first);
    load_both_weights(w, at, w_gu, w_down, m);

    const std::uint32_t gu_base = w.base, down_base = w.base + std::uint32_t(at.down);
    for (unsigned tile = w.first; tile < w.tiles; tile += w.stride) {
        const unsigned row_g = w.first_row(tile) + g;
        std::uint32_t ya[S][4], xa[S][4];
        load_global_fragments(ya, dy, rows, row_g, q);
        load_row_fragments(xa, w.row_tile, w.lane);
        w.stage(xn, rows, tile + w.stride);
        for (unsigned G = 0; G < m / 64; ++G) {
            float dh[8][4], acc[2][8][4];
            product_over_d(dh, ya, down_base, G);
            product_over_d(acc[0], xa, gu_base, 2 * G);
            product_over_d(acc[1], xa, gu_base, 2 * G + 1);
            wgmma_wait<1>();  // all but chunk 2 G + 1's gate/up product
            settled(dh);
#pragma unroll
            for (unsigned half = 0; half < 2; ++half) {
                if (half == 1) wgmma_wait<0>();
                settled(acc[half]);
                std::uint32_t ga[2][4], ua[2][4];
                round_gate_up(ga, ua, acc[half]);
                std::uint32_t dg[2][4], du[2][4];
                gate_up_gradient(dg, du, chunk_tiles(dh, half), ga, ua);
                store_gate_up(dgu, rows, m, row_g, q, dg, du, 2 * G + half);
            }
        }
    }
    wait_copies<0>();  // no copy outlives the block
}

// ---- The MLP's backward through its norm (mlp_backward_through_norm): the kernel above, then dxn =
// dgu [Wg; Wu] in registers and the MLP norm's backward on it ----
// dgu's pairs are also the A fragments of a product over a chunk's 64 gate/up positions into dxn
// [64 rows][d]. Its B operand is the chunk's [Wg; Wu] rows as they lie for the gate/up product, read
// N-major (each 128-byte row holds 64 of d's columns at one position), so the weight is not copied
// twice. Chunks go one at a time (dh by m64n32, gate/up by m64n64, then dxn += dgu_c [Wg; Wu]_c), so
// that the registers hold dxn (64), xn's and dy's fragments (32 each) and one chunk's products. After a
// tile's last chunk, each row's norm backward as norm_backward_product computes it (its sums in
// another order): dx = before + r g dxn - x r^3 sum(g dxn x) / d, and the gain's gradient dxn x r summed
// over the warp's rows, each lane keeping 4 of the columns (a reduce-scatter over the 8 lanes of a
// column set), then over the block's warps in order into the block's partial sums. dgu is written
// once, for the weight gradient, and not read back; dxn never goes to memory.

template <unsigned S>
__global__ void __launch_bounds__(mlp_threads, 1)
    mlp_backward_through_norm_kernel(const bf16* __restrict__ dy, const bf16* __restrict__ xn,
                                     const bf16* __restrict__ w_gu, const bf16* __restrict__ w_down,
                                     bf16* __restrict__ dgu, unsigned rows, unsigned m, NormBackwardRows nb) {
    extern __shared__ __align__(16) unsigned char wgmma_shared[];
    constexpr unsigned d = 16 * S, ND = 2 * S;
    static_assert(ND == 16, "the lanes' shares of the gain's gradient take d 128");
    const WgmmaLayout at(d, m);
    const WarpPlace<d> w(wgmma_shared, at.tiles, rows);
    const unsigned g = w.g, q = w.q;
    w.stage(xn, rows, w.first);
    load_both_weights(w, at, w_gu, w_down, m);

    const std::uint32_t gu_base = w.base, down_base = w.base + std::uint32_t(at.down);
    float dgain[4] = {};
    for (unsigned tile = w.first; tile < w.tiles; tile += w.stride) {
        const unsigned row_g = w.first_row(tile) + g;
        std::uint32_t ya[S][4], xa[S][4];
        load_global_fragments(ya, dy, rows, row_g, q);
        load_row_fragments(xa, w.row_tile, w.lane);
        w.stage(xn, rows, tile + w.stride);
        float dxn[ND][4];
        for (unsigned c = 0; c < m / mlp_chunk; ++c) {
            // dh of chunk c: operand c / 2 of Wdown^T, its rows 32 (c % 2) on; gate and up of chunk c
            float dh[4][4], acc[8][4];
            wgmma_fence();
#pragma unroll
            for (unsigned st = 0; st < S; ++st)
                wgmma_64x32(dh, ya[st],
                            swizzle128_descriptor(down_base + (c / 2) * 128 * d + (c % 2) * 4096 + (st / 4) * 8192 +
                                                  (st % 4) * 32),
                            st > 0);
            wgmma_commit();
            product_over_d(acc, xa, gu_base, c);
            wgmma_wait<0>();  // (chunk c - 1's dxn product too: its A fragments may be reused now)
            settled(dh);
            settled(acc);
            std::uint32_t ga[2][4], ua[2][4], dg[2][4], du[2][4];
            round_gate_up(ga, ua, acc);
            gate_up_gradient(dg, du, dh, ga, ua);
            store_gate_up(dgu, rows, m, row_g, q, dg, du, c);
            // dxn += dgu_c [Wg; Wu]_c: step s takes positions 16 s .. 16 s + 15 (the gate's for s < 2, the
            // up's after), whose accumulator tiles 2 (s % 2) and + 1 are the step's A fragment
            wgmma_fence();
#pragma unroll
            for (unsigned s = 0; s < 4; ++s) {
                const std::uint32_t (&pairs)[2][4] = s < 2 ? dg : du;
                const unsigned t = 2 * (s % 2);
                const std::uint32_t a[4] = {pairs[0][t], pairs[1][t], pairs[0][t + 1], pairs[1][t + 1]};
                wgmma_64x128<1>(dxn, a, swizzle128_n_major_descriptor(gu_base + c * 128 * d + s * 2048, 8192),
                                c > 0 || s > 0);
            }
            wgmma_commit();
        }
        wgmma_wait<0>();
        settled(dxn);
        norm_backward_rows(nb, dxn, row_g, rows, g, q, dgain);
    }
    wait_copies<0>();  // no copy outlives the block
    store_gain_partials<d>(nb, dgain, w.shared, g, q);
}

}  // namespace

namespace {
// The forward kernel and the kernel that rebuilds gu, for d
auto forward_kernel(unsigned d) { return d == 64 ? mlp_forward_wgmma_kernel<4> : mlp_forward_wgmma_kernel<8>; }
auto from_xn_kernel(unsigned d) {
    return d == 64 ? mlp_down_backward_from_xn_kernel<4> : mlp_down_backward_from_xn_kernel<8>;
}
std::size_t wgmma_bytes(unsigned d, unsigned m) { return WgmmaLayout(d, m).total + 1024; }
// Whether the shape fits the kernels that hold both weights (d 64 or 128, m a multiple of 64), and
// `kernel`'s blocks an SM at it (0 where it cannot run).
template <class Kernel>
int blocks_per_sm(Kernel kernel, unsigned d, unsigned m, const char* what) {
    if ((d != 64 && d != 128) || m == 0 || m % 64) return 0;
    return persistent_blocks_per_sm(reinterpret_cast<const void*>(kernel), mlp_threads, wgmma_bytes(d, m), what);
}
}  // namespace

bool mlp_forward_has_warpgroups(std::size_t d, std::size_t m) {
    return d < (1u << 16) && m < (1u << 16) &&
           blocks_per_sm(forward_kernel(unsigned(d)), unsigned(d), unsigned(m), "mlp_forward_wgmma") > 0;
}

bool mlp_forward_wgmma(const MlpForwardArgs& s, unsigned d, cudaStream_t stream) {
    return blocks_per_sm(forward_kernel(d), d, s.m, "mlp_forward_wgmma") > 0 &&
           launch_warpgroups(forward_kernel(d), wgmma_bytes(d, s.m), s.rows, ~0u, "mlp_forward_wgmma", stream, s) > 0;
}

bool mlp_down_backward_wgmma(const bf16* dy, const bf16* w_down, const bf16* gu, bf16* dgu, unsigned rows, unsigned d,
                             unsigned m, cudaStream_t stream) {
    if ((d != 64 && d != 128) || m == 0 || m % 128) return false;
    const auto kernel = d == 64 ? mlp_down_backward_wgmma_kernel<4> : mlp_down_backward_wgmma_kernel<8>;
    return launch_warpgroups(kernel, BackwardLayout(d, m).total + 1024, rows, ~0u, "mlp_down_backward_wgmma", stream,
                             dy, w_down, gu, dgu, rows, m) > 0;
}

bool mlp_recomputes_gu(std::size_t d, std::size_t m) {
    return mlp_forward_has_warpgroups(d, m) &&
           blocks_per_sm(from_xn_kernel(unsigned(d)), unsigned(d), unsigned(m), "mlp_down_backward_from_xn") > 0;
}

bool mlp_down_backward_from_xn_wgmma(const bf16* dy, const bf16* xn, const bf16* w_gu, const bf16* w_down, bf16* dgu,
                                     unsigned rows, unsigned d, unsigned m, cudaStream_t stream) {
    return blocks_per_sm(from_xn_kernel(d), d, m, "mlp_down_backward_from_xn") > 0 &&
           launch_warpgroups(from_xn_kernel(d), wgmma_bytes(d, m), rows, ~0u, "mlp_down_backward_from_xn", stream, dy,
                             xn, w_gu, w_down, dgu, rows, m) > 0;
}

unsigned mlp_backward_through_norm_wgmma(const bf16* dy, const bf16* xn, const bf16* w_gu, const bf16* w_down,
                                         bf16* dgu, const NormBackwardRows& nb, unsigned rows, unsigned d, unsigned m,
                                         unsigned most_blocks, cudaStream_t stream) {
    if (d != 128 || m == 0 || m % 64) return 0;
    return launch_warpgroups(mlp_backward_through_norm_kernel<8>, wgmma_bytes(d, m), rows, most_blocks,
                             "mlp_backward_through_norm", stream, dy, xn, w_gu, w_down, dgu, rows, m, nb);
}

}  // namespace statetrack::gpu::cuda
