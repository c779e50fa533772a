#pragma once
// What the warpgroup kernels of this folder share (Hopper's wgmma.mma_async; the folder's files are
// built for sm_90a only): the shared-memory matrix descriptors of the 128-byte swizzle (K-major, and
// N-major for B), the products' issue, commit and wait, the accumulators' fence, and a warp's place
// in a block of two warpgroups (one block an SM) with the launch's block count.
//
// Matrices lie in the layout wgmma reads with a 128-byte swizzle: 8-row atoms of 128-byte rows, 16-byte
// piece j of row r at j ^ (r % 8), the 8-row groups 1024 bytes apart, from a 1024-byte-aligned base.
// K-major (a B whose rows are N and whose 128-byte rows hold 64 of K): a 16-deep step k0 starts at
// 2 (k0 % 64) bytes into the row, the swizzle applying to the address bits as the copies placed them.
// N-major (rows are K, 128-byte rows hold 64 of N): a 16-deep step is 16 rows (2048 bytes) on, and
// N's 64-column blocks lie `column_blocks` bytes apart.
#include <algorithm>
#include <cstdint>

#include "../mlp.cuh"

// Built for sm_90a only (gpu/CMakeLists.txt): compiled for another target, the helpers below would
// trap while the launchers, which find code for the device, said yes.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gpu/src/cuda/sm90a/ is for sm_90a only (CUDA_ARCHITECTURES 90a-real)"
#endif

namespace statetrack::gpu::cuda {

namespace {

constexpr unsigned wg_rows = 64;  // a warpgroup's rows a tile

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

// The N-major descriptor of a B [16 k][d] whose rows (k) are 128-byte rows of 64 of d's columns: 8-row
// groups 1024 bytes apart (SBO), d's 64-column blocks `column_blocks` bytes apart (LBO: 8192 for
// [Wg; Wu]'s 64-row chunks).
__device__ inline std::uint64_t swizzle128_n_major_descriptor(std::uint32_t address, std::uint32_t column_blocks) {
    return std::uint64_t((address & 0x3FFFF) >> 4) | std::uint64_t(column_blocks >> 4) << 16 |
           std::uint64_t(1024 >> 4) << 32 | std::uint64_t(1) << 62;
}

// Makes the block's shared-memory writes visible to the products, which read by the async proxy.
__device__ inline void operands_ready() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
    __syncthreads();
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

// Blocks for `rows`: two tiles of 64 rows a warpgroup where there are that many (the device tests'
// small batches then take a warpgroup through its next tile too), at most per_sm on every SM.
inline unsigned launch_blocks(unsigned rows, int per_sm) {
    const unsigned tiles = (rows + wg_rows - 1) / wg_rows, per_block = 2 * (mlp_warps / 4);
    return std::max(1u, std::min<unsigned>((tiles + per_block - 1) / per_block, unsigned(per_sm) * sm_count()));
}

// Launches a warpgroup kernel (mlp_threads threads a block, `bytes` of shared memory) over `rows`:
// launch_blocks' count, at most most_blocks. The blocks launched; 0, nothing launched, where the
// device has no code for it or no room for a block (persistent_blocks_per_sm).
template <class... Params, class... Args>
unsigned launch_warpgroups(void (*kernel)(Params...), std::size_t bytes, unsigned rows, unsigned most_blocks,
                           const char* what, cudaStream_t stream, const Args&... args) {
    const int per_sm = persistent_blocks_per_sm(reinterpret_cast<const void*>(kernel), mlp_threads, bytes, what);
    const unsigned blocks = per_sm < 1 ? 0 : std::min(launch_blocks(rows, per_sm), most_blocks);
    if (blocks == 0) return 0;
    kernel<<<blocks, mlp_threads, bytes, stream>>>(args...);
    check(cudaGetLastError(), what);
    return blocks;
}

}  // namespace

}  // namespace statetrack::gpu::cuda
