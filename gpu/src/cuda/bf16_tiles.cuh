#pragma once
// What products of our own on the bf16 tensor cores need (fused_products.cu): copies of row tiles
// into shared memory without passing registers (cp.async), ldmatrix (also for delta_chunked.cu's TF32
// fragments) and mma.m16n8k16 with fp32 accumulation, and launching as many blocks as fit on every
// SM, each keeping a weight in shared memory for all its tiles. sm_80 or later.
#include <algorithm>
#include <cstdint>

#include "kernels.cuh"

namespace statetrack::gpu::cuda {

__device__ inline std::uint32_t shared_address(const void* p) { return std::uint32_t(__cvta_generic_to_shared(p)); }

// 16 bytes from global to shared memory without passing registers; zeros where `valid` is false
// (src-size 0 reads nothing).
__device__ inline void copy16(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
#else
    __trap();  // launch_persistent launches only code built for sm_80 or later
#endif
}
// The same for 4 bytes (cp.async.ca: 16-byte copies may bypass L1, these may not).
__device__ inline void copy4(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(shared_address(dst)), "l"(src),
                 "r"(valid ? 4 : 0));
#else
    __trap();
#endif
}
__device__ inline void commit_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ inline void wait_copies() {  // until at most N committed groups are still in flight
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");  // no load moves above the wait
#endif
}

// Four 8x8 bf16 matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8
// (16-byte aligned). Lane 4 g + q receives row g, columns 2 q and 2 q + 1 of each (the mma's A
// fragments); Transposed, rows 2 q and 2 q + 1 of column g (B fragments of a matrix stored [k][n]).
// Read as 8 x 4 matrices of 32-bit words (delta_chunked.cu's TF32 tiles), lane 4 g + q receives word
// q of row g.
template <bool Transposed = false>
__device__ inline void load_matrices(std::uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (Transposed)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(shared_address(row)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(shared_address(row)));
#else
    __trap();  // launch_persistent launches only code built for sm_80 or later
#endif
}
// d += a b for a 16x16 A (row-major fragments) and a 16x8 B (column-major), fp32 accumulation.
__device__ inline void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();  // launch_persistent launches only code built for sm_80 or later
#endif
}

// Starts the copies of `rows` rows of `cols` elements (16 bytes of them a multiple) from global rows
// row0 .. (ld_src apart) into a shared tile (ld_dst apart): zeros for the rows past `total`.
template <class T>
__device__ inline void start_rows(T* dst, unsigned ld_dst, const T* src, std::size_t ld_src, unsigned row0,
                                  unsigned rows, unsigned total, unsigned cols) {
    constexpr unsigned per_chunk = 16 / sizeof(T);
    const unsigned chunks = cols / per_chunk;
    for (unsigned i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
        const unsigned r = i / chunks, c = i % chunks, row = row0 + r;
        const bool valid = row < total;
        copy16(dst + r * ld_dst + per_chunk * c, src + std::size_t(valid ? row : 0) * ld_src + per_chunk * c, valid);
    }
}
// Starts the copies of a whole [rows][cols] matrix (a weight; cols a multiple of 8) into shared rows
// ld_dst apart, with zeros in the columns from cols up to padded_cols (a multiple of 8).
__device__ inline void start_matrix(bf16* dst, unsigned ld_dst, const bf16* src, unsigned rows, unsigned cols,
                                    unsigned padded_cols) {
    const unsigned chunks = padded_cols / 8;
    for (unsigned i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
        const unsigned r = i / chunks, c = 8 * (i % chunks);
        copy16(dst + r * ld_dst + c, src + std::size_t(r) * cols + (c < cols ? c : 0), c < cols);
    }
}
// A shared tile's rows out to global rows row0 .. (those before `total`), 16 bytes a thread.
template <class T>
__device__ inline void store_rows(T* dst, std::size_t ld_dst, const T* src, unsigned ld_src, unsigned row0,
                                  unsigned rows, unsigned total, unsigned cols) {
    constexpr unsigned per_chunk = 16 / sizeof(T);
    const unsigned chunks = cols / per_chunk;
    for (unsigned i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
        const unsigned r = i / chunks, c = i % chunks;
        if (row0 + r < total)
            *reinterpret_cast<uint4*>(dst + std::size_t(row0 + r) * ld_dst + per_chunk * c) =
                *reinterpret_cast<const uint4*>(src + r * ld_src + per_chunk * c);
    }
}

// Launches `kernel` on every SM (as many blocks as fit), with `bytes` of shared memory, if at least
// `min_per_sm` blocks fit on an SM (the kernels overlap one block's copies with another's arithmetic:
// with one block an SM a fused product ran slower than cuBLAS and the kernel after it).
template <class Kernel, class... Args>
bool launch_persistent(Kernel kernel, unsigned threads, std::size_t bytes, int min_per_sm, unsigned tiles,
                       const char* what, cudaStream_t stream, Args... args) {
    const int per_sm = persistent_blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, bytes, what);
    if (per_sm < min_per_sm) return false;
    // at least two tiles a block where there are two: the device tests' small batches then take a
    // block through both of its buffers and its prefetch too (at training's sizes the SMs' count binds)
    const unsigned blocks = std::min<unsigned>((tiles + 1) / 2, unsigned(per_sm) * sm_count());
    kernel<<<blocks, threads, bytes, stream>>>(args...);
    check(cudaGetLastError(), what);
    return true;
}

}  // namespace statetrack::gpu::cuda
