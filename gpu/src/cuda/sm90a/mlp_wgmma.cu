// The MLP's kernels (mlp.cuh) on Hopper's warpgroup products, wgmma: the forward, and the backward
// from dy to [gate | up]'s gradient. A warpgroup (4 warps) takes 64 rows at a time, and the tensor
// cores read each B operand (a chunk of [Wg; Wu], or Wdown's columns for it) from shared memory
// once for all 64, where mma.sync's ldmatrix read it once for each warp's 16: with mma.sync the
// forward spent its time on shared-memory traffic (ldmatrix 85% of the L1's wavefronts, the L1 80%
// busy, 140 us a launch at T = 256 on an H200; 117 us here). The A operands stay in registers as in
// mma.sync's kernels: the rows' fragments by ldmatrix, and h's, made from the first product's
// accumulators. Built for sm_90a only (its own target in gpu/CMakeLists.txt): on other devices the
// launchers find no code for the device and say no, and fused_products.cu's kernels run.
//
// The weights lie in the layout wgmma reads with a 128-byte swizzle (K-major, 8-row atoms of 128-byte
// rows): for each 64 columns (k) of a matrix, its rows 128 bytes apart, 16-byte piece j of row r at j
// ^ (r % 8), the 8-row groups 1024 bytes apart, from a 1024-byte-aligned base. A 16-deep step k0
// starts at 2 (k0 % 64) bytes into the row: the swizzle applies to the address bits, as the copies
// placed them.
#include <cstdint>

#include "../mlp.cuh"

// Built for sm_90a only (gpu/CMakeLists.txt): compiled for another target, the helpers below would
// trap while the launchers, which find code for the device, said yes.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "sm90a/mlp_wgmma.cu is for sm_90a only (CUDA_ARCHITECTURES 90a-real)"
#endif

namespace statetrack::gpu::cuda {

namespace {

constexpr unsigned wg_rows = 64;  // a warpgroup's rows a tile
struct WgmmaLayout {  // bytes from the 1024-aligned base
    std::size_t down, tiles, total;
    __host__ __device__ WgmmaLayout(unsigned d, unsigned m)
        : down(2 * std::size_t(m) * d * 2), tiles(down + std::size_t(d) * m * 2),
          total(tiles + std::size_t(mlp_warps) * mlp_rows * d * 2) {}
};

// A shared-memory matrix descriptor: the start address, the leading byte offset (unused with this
// swizzle: 1), the 8-row groups' stride (1024 bytes), the 128-byte swizzle (mode 1 in bits 62-63).
__device__ inline std::uint64_t swizzle128_descriptor(std::uint32_t address) {
    return std::uint64_t((address & 0x3FFFF) >> 4) | std::uint64_t(1) << 16 | std::uint64_t(1024 >> 4) << 32 |
           std::uint64_t(1) << 62;
}
__device__ inline void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ inline void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
__device__ inline void wgmma_wait() {  // until at most N committed groups are pending
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving reads of accumulators above the wait that completes them.
template <unsigned N>
__device__ inline void settled(float (&d)[N][4]) {
#pragma unroll
    for (unsigned j = 0; j < N; ++j)
#pragma unroll
        for (unsigned t = 0; t < 4; ++t) asm volatile("" : "+f"(d[j][t])::"memory");
}

// d (+)= a B for the warpgroup's 64 rows: a this thread's A fragment (registers, as mma.sync's),
// B [64][16] K-major in shared memory at `b` (a 128-byte-swizzle descriptor); d = a B where
// `accumulate` is 0.
__device__ inline void wgmma_64x64(float (&d)[8][4], const std::uint32_t (&a)[4], std::uint64_t b, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
          "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
          "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
          "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
#else
    __trap();
#endif
}

// d (+)= a B for the warpgroup's 64 rows: a this thread's A fragment (registers, as mma.sync's),
// B [128][16] K-major in shared memory at `b` (a 128-byte-swizzle descriptor), or with TransB B^T
// [16][128] (MN-major); d = a B where `accumulate` is 0.
template <int TransB = 0>
__device__ inline void wgmma_64x128(float (&d)[16][4], const std::uint32_t (&a)[4], std::uint64_t b, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
          "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
          "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
          "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]),
          "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
          "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
          "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]),
          "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
          "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),
          "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]),
          "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
          "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(TransB));
#else
    __trap();
#endif
}

// d (+)= a B for the warpgroup's 64 rows, B [32][16] K-major (as wgmma_64x64).
__device__ inline void wgmma_64x32(float (&d)[4][4], const std::uint32_t (&a)[4], std::uint64_t b, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
          "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
#else
    __trap();
#endif
}

template <unsigned N>
__device__ inline void wgmma_64xN(float (&d)[N / 8][4], const std::uint32_t (&a)[4], std::uint64_t b, int accumulate) {
    if constexpr (N == 64) wgmma_64x64(d, a, b, accumulate);
    else wgmma_64x128(d, a, b, accumulate);
}

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
// Makes the block's shared-memory writes visible to the products, which read by the async proxy.
__device__ inline void operands_ready() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
    __syncthreads();
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

// A warp's place in its block (two warpgroups, one block an SM): the block's shared memory from its
// 1024-aligned base (the launch asks for 1 KB more), the warp's own tile of 16 rows `tiles_at` bytes
// and 4 KB a warp further, and its warpgroup's tiles of 64 rows (`first`, then every `stride`-th),
// of which the warp takes rows 16 group_warp .. + 15.
template <unsigned d>
struct WarpPlace {
    unsigned lane, g, q, group_warp, tiles, first, stride;
    std::uint32_t base;
    unsigned char* shared;
    uint4* row_tile;
    __device__ WarpPlace(unsigned char* raw_shared, std::size_t tiles_at, unsigned rows) {
        const unsigned warp = threadIdx.x / 32, group = warp / 4;
        lane = threadIdx.x % 32, g = lane / 4, q = lane % 4, group_warp = warp % 4;
        tiles = (rows + wg_rows - 1) / wg_rows, first = blockIdx.x * (mlp_warps / 4) + group;
        stride = gridDim.x * (mlp_warps / 4);
        const std::uint32_t raw = shared_address(raw_shared);
        base = (raw + 1023) & ~1023u, shared = raw_shared + (base - raw);
        row_tile = reinterpret_cast<uint4*>(shared + tiles_at) + warp * mlp_rows * (d / 8);
    }
    // the warp's first row in tile t
    __device__ unsigned first_row(unsigned t) const { return wg_rows * t + mlp_rows * group_warp; }
    // starts the copies of the warp's rows of src in tile t into its row tile, if there is a tile t
    __device__ void stage(const bf16* src, unsigned rows, unsigned t) const {
        if (t < tiles) start_row_tile<d>(row_tile, src, rows, first_row(t), lane);
    }
};

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
                std::uint32_t out[2][2][4];
                gate_up_gradient(out, chunk_tiles(a, half), ga, ua);
                store_gate_up_gradient(dgu, rows, m, row_g, q, out, 2 * G + half);
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
                std::uint32_t out[2][2][4];
                gate_up_gradient(out, chunk_tiles(dh, half), ga, ua);
                store_gate_up_gradient(dgu, rows, m, row_g, q, out, 2 * G + half);
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

// The N-major descriptor of a B [16 k][d] whose rows (k) are 128-byte rows of 64 of d's columns: 8-row
// groups 1024 bytes apart (SBO), d's 64-column blocks `column_blocks` bytes apart (LBO: 8192 for
// [Wg; Wu]'s 64-row chunks).
__device__ inline std::uint64_t swizzle128_n_major_descriptor(std::uint32_t address, std::uint32_t column_blocks) {
    return std::uint64_t((address & 0x3FFFF) >> 4) | std::uint64_t(column_blocks >> 4) << 16 |
           std::uint64_t(1024 >> 4) << 32 | std::uint64_t(1) << 62;
}

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
            std::uint32_t ga[2][4], ua[2][4], out[2][2][4];
            round_gate_up(ga, ua, acc);
            gate_up_gradient(out, dh, ga, ua);
            store_gate_up_gradient(dgu, rows, m, row_g, q, out, c);
            // dxn += dgu_c [Wg; Wu]_c: step s takes positions 16 s .. 16 s + 15 (the gate's for s < 2, the
            // up's after), whose accumulator tiles 2 (s % 2) and + 1 are the step's A fragment
            wgmma_fence();
#pragma unroll
            for (unsigned s = 0; s < 4; ++s) {
                const unsigned part = s / 2, t = 2 * (s % 2);
                const std::uint32_t a[4] = {out[0][part][t], out[1][part][t], out[0][part][t + 1], out[1][part][t + 1]};
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

namespace {
// The kernel for d and its blocks an SM (0 where it cannot run)
auto wgmma_kernel(unsigned d) { return d == 64 ? mlp_forward_wgmma_kernel<4> : mlp_forward_wgmma_kernel<8>; }
std::size_t wgmma_bytes(unsigned d, unsigned m) { return WgmmaLayout(d, m).total + 1024; }
int wgmma_blocks_per_sm(unsigned d, unsigned m) {
    if ((d != 64 && d != 128) || m == 0 || m % 64) return 0;
    return persistent_blocks_per_sm(reinterpret_cast<const void*>(wgmma_kernel(d)), mlp_threads, wgmma_bytes(d, m),
                                    "mlp_forward_wgmma");
}
// Blocks for `rows`: two tiles of 64 rows a warpgroup where there are that many (the device tests'
// small batches then take a warpgroup through its next tile too), at most per_sm on every SM.
unsigned launch_blocks(unsigned rows, int per_sm) {
    const unsigned tiles = (rows + wg_rows - 1) / wg_rows, per_block = 2 * (mlp_warps / 4);
    return std::max(1u, std::min<unsigned>((tiles + per_block - 1) / per_block, unsigned(per_sm) * sm_count()));
}
}  // namespace

bool mlp_forward_has_warpgroups(std::size_t d, std::size_t m) {
    return d < (1u << 16) && m < (1u << 16) && wgmma_blocks_per_sm(unsigned(d), unsigned(m)) > 0;
}

bool mlp_forward_wgmma(const MlpForwardArgs& s, unsigned d, cudaStream_t stream) {
    const int per_sm = wgmma_blocks_per_sm(d, s.m);
    if (per_sm < 1) return false;
    const auto kernel = wgmma_kernel(d);
    const std::size_t bytes = wgmma_bytes(d, s.m);
    const unsigned blocks = launch_blocks(s.rows, per_sm);
    kernel<<<blocks, mlp_threads, bytes, stream>>>(s);
    check(cudaGetLastError(), "mlp_forward_wgmma");
    return true;
}

bool mlp_down_backward_wgmma(const bf16* dy, const bf16* w_down, const bf16* gu, bf16* dgu, unsigned rows, unsigned d,
                             unsigned m, cudaStream_t stream) {
    if ((d != 64 && d != 128) || m == 0 || m % 128) return false;
    const auto kernel = d == 64 ? mlp_down_backward_wgmma_kernel<4> : mlp_down_backward_wgmma_kernel<8>;
    const std::size_t bytes = BackwardLayout(d, m).total + 1024;
    const int per_sm =
        persistent_blocks_per_sm(reinterpret_cast<const void*>(kernel), mlp_threads, bytes, "mlp_down_backward_wgmma");
    if (per_sm < 1) return false;
    const unsigned blocks = launch_blocks(rows, per_sm);
    kernel<<<blocks, mlp_threads, bytes, stream>>>(dy, w_down, gu, dgu, rows, m);
    check(cudaGetLastError(), "mlp_down_backward_wgmma");
    return true;
}

namespace {
auto from_xn_kernel(unsigned d) {
    return d == 64 ? mlp_down_backward_from_xn_kernel<4> : mlp_down_backward_from_xn_kernel<8>;
}
int from_xn_blocks_per_sm(unsigned d, unsigned m) {
    if ((d != 64 && d != 128) || m == 0 || m % 64) return 0;
    return persistent_blocks_per_sm(reinterpret_cast<const void*>(from_xn_kernel(d)), mlp_threads, wgmma_bytes(d, m),
                                    "mlp_down_backward_from_xn");
}
}  // namespace

bool mlp_recomputes_gu(std::size_t d, std::size_t m) {
    return mlp_forward_has_warpgroups(d, m) && from_xn_blocks_per_sm(unsigned(d), unsigned(m)) > 0;
}

bool mlp_down_backward_from_xn_wgmma(const bf16* dy, const bf16* xn, const bf16* w_gu, const bf16* w_down, bf16* dgu,
                                     unsigned rows, unsigned d, unsigned m, cudaStream_t stream) {
    const int per_sm = from_xn_blocks_per_sm(d, m);
    if (per_sm < 1) return false;
    const unsigned blocks = launch_blocks(rows, per_sm);
    from_xn_kernel(d)<<<blocks, mlp_threads, wgmma_bytes(d, m), stream>>>(dy, xn, w_gu, w_down, dgu, rows, m);
    check(cudaGetLastError(), "mlp_down_backward_from_xn");
    return true;
}

unsigned mlp_backward_through_norm_wgmma(const bf16* dy, const bf16* xn, const bf16* w_gu, const bf16* w_down,
                                         bf16* dgu, const NormBackwardRows& nb, unsigned rows, unsigned d, unsigned m,
                                         unsigned most_blocks, cudaStream_t stream) {
    if (d != 128 || m == 0 || m % 64) return 0;
    const auto kernel = mlp_backward_through_norm_kernel<8>;
    const int per_sm = persistent_blocks_per_sm(reinterpret_cast<const void*>(kernel), mlp_threads, wgmma_bytes(d, m),
                                                "mlp_backward_through_norm");
    if (per_sm < 1 || !mlp_forward_has_warpgroups(d, m)) return 0;
    const unsigned blocks = std::min(launch_blocks(rows, per_sm), most_blocks);
    if (blocks == 0) return 0;
    kernel<<<blocks, mlp_threads, wgmma_bytes(d, m), stream>>>(dy, xn, w_gu, w_down, dgu, rows, m, nb);
    check(cudaGetLastError(), "mlp_backward_through_norm");
    return blocks;
}

unsigned norm_backward_wgmma(const bf16* dy, unsigned ld, unsigned K, const bf16* w, const NormBackwardRows& nb,
                             unsigned rows, unsigned d, unsigned most_blocks, cudaStream_t stream) {
    constexpr unsigned KS = 28;  // 448 columns: the delta rule's projections at d 128 (ldp 392)
    if (d != 128 || K <= 16 * (KS - 4) || K > 16 * KS || K % 8 || ld < K || ld % 8) return 0;
    const auto kernel = norm_backward_wgmma_kernel<8, KS>;
    const std::size_t bytes = std::size_t(16 * KS) * d * 2 * 2 + 1024;  // W, the warps' tiles (as wide), alignment
    const int per_sm =
        persistent_blocks_per_sm(reinterpret_cast<const void*>(kernel), mlp_threads, bytes, "norm_backward_wgmma");
    if (per_sm < 1) return 0;
    const unsigned blocks = std::min(launch_blocks(rows, per_sm), most_blocks);
    if (blocks == 0) return 0;
    kernel<<<blocks, mlp_threads, bytes, stream>>>(dy, ld, K, w, rows, nb);
    check(cudaGetLastError(), "norm_backward_wgmma");
    return blocks;
}

}  // namespace statetrack::gpu::cuda
