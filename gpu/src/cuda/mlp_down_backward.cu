// The MLP's backward from its output gradient to the gradient of [gate | up], in one kernel for
// --matmul bf16: dh = dy Wdown (the down projection's input gradient, a product with K = d_model)
// and SwiGLU's backward on it. cuBLAS wrote dh in bf16 and swiglu_backward read it back with gu;
// here dh stays in registers (fp32, one rounding fewer), so a row costs 2 d (dy) + 4 m (gu) + 4 m
// (dgu) bytes instead of those plus 4 m (dh written and read): at the paper's sizes 1.3 of 2.1 KB.
//
// A block keeps the weight in shared memory for all its tiles, and tiles of 16 rows stream through
// two buffers (cp.async): the next tile's rows of dy and gu are in flight while this tile's products
// (bf16 m16n8k16, fp32 accumulation) and SwiGLU's backward run. dgu is written in place of gu's tile
// in shared memory, then copied out in 16-byte rows. Two blocks an SM (110 KB of shared memory each
// at the paper's sizes), so that one block's SwiGLU arithmetic overlaps the other's copies.
#include <algorithm>
#include <cstdint>

#include "activations.cuh"
#include "kernels.cuh"

namespace statetrack::gpu::cuda {

namespace {

constexpr int tile_rows = 16;      // rows per tile: the mma's 16
constexpr int warps = 8;           // each its column blocks: warp, warp + 8, ...
constexpr int block_threads = 32 * warps;
constexpr unsigned column_block = 32;  // a warp's columns of dh at a time: four 8-column mma tiles
constexpr unsigned pad = 8;             // bf16 elements after each shared row: ldmatrix and the epilogue's
                                   // accesses hit distinct banks

struct DownShape {
    unsigned rows, d, m;
    unsigned tiles;  // ceil(rows / tile_rows)
};

// The weight's row stride in shared memory: m rounded up to whole column blocks (zeros past m), then
// the pad.
__host__ __device__ unsigned weight_stride(unsigned m) { return (m + column_block - 1) / column_block * column_block + pad; }

// Shared memory, in bf16 elements: the weight [d][weight_stride(m)] as it lies in the parameters,
// then two buffers of a tile's dy rows [tile_rows][d + pad] and gu rows [tile_rows][2 m + pad].
struct DownLayout {
    std::size_t dy, dy_size, gu, gu_size, total;  // buffer b of dy at dy + b dy_size, of gu likewise
    __host__ __device__ explicit DownLayout(unsigned d, unsigned m)
        : dy(std::size_t(d) * weight_stride(m)), dy_size(tile_rows * (d + pad)), gu(dy + 2 * dy_size),
          gu_size(tile_rows * (2 * m + pad)), total(gu + 2 * gu_size) {}
};

__device__ std::uint32_t shared_address(const void* p) { return std::uint32_t(__cvta_generic_to_shared(p)); }

// 16 bytes from global to shared memory without passing registers; zeros where `valid` is false
// (rows past the batch: src-size 0 reads nothing).
__device__ void copy16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ void commit_copies() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ void wait_copies() {  // until at most N committed groups are still in flight
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// Four 8x8 bf16 matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8.
// Lane 4 g + q receives row g, columns 2 q and 2 q + 1 of each (the mma's A fragments).
__device__ void load_matrices(std::uint32_t (&r)[4], const bf16* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row)));
}
// The same transposed: lane 4 g + q receives rows 2 q and 2 q + 1 of column g (B fragments of a
// matrix stored [k][n]).
__device__ void load_matrices_transposed(std::uint32_t (&r)[4], const bf16* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row)));
}
// d += a b for a 16x16 A (row-major fragments) and a 16x8 B (column-major), fp32 accumulation.
__device__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The sigmoid by the fast exponential and division (a few ulp where the IEEE ones take ~20
// instructions more): the results are rounded to bf16 (8 bits) right after. 0 and 1 in the limits.
__device__ float sigmoid_fast(float z) { return __fdividef(1.0f, 1.0f + __expf(-z)); }

// Starts the copies of tile t's rows of dy and gu into buffer b (16 bytes a thread at a time).
__device__ void start_tile(const DownShape& s, const bf16* dy, const bf16* gu, bf16* sdy, bf16* sgu, unsigned t) {
    const unsigned row0 = t * tile_rows, dy_chunks = s.d / 8, gu_chunks = 2 * s.m / 8;
    for (unsigned i = threadIdx.x; i < tile_rows * dy_chunks; i += block_threads) {
        const unsigned r = i / dy_chunks, c = i % dy_chunks, row = row0 + r;
        const bool valid = row < s.rows;
        copy16(sdy + r * (s.d + pad) + 8 * c, dy + std::size_t(valid ? row : 0) * s.d + 8 * c, valid);
    }
    for (unsigned i = threadIdx.x; i < tile_rows * gu_chunks; i += block_threads) {
        const unsigned r = i / gu_chunks, c = i % gu_chunks, row = row0 + r;
        const bool valid = row < s.rows;
        copy16(sgu + r * (2 * s.m + pad) + 8 * c, gu + std::size_t(valid ? row : 0) * 2 * s.m + 8 * c, valid);
    }
}

__global__ void __launch_bounds__(block_threads, 2)
    mlp_down_backward_kernel(DownShape s, const bf16* __restrict__ dy, const bf16* __restrict__ w,
                             const bf16* __restrict__ gu, bf16* __restrict__ dgu) {
    extern __shared__ __align__(16) bf16 down_shared[];
    const DownLayout at(s.d, s.m);
    bf16* ws = down_shared;  // [d][m + pad] first
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const unsigned ldd = s.d + pad, ldw = weight_stride(s.m), ldg = 2 * s.m + pad;
    const unsigned blocks = (s.m + column_block - 1) / column_block;

    // the weight (zeros in the columns past m) and the first tile's rows, one group of copies
    for (unsigned i = threadIdx.x; i < s.d * blocks * (column_block / 8); i += block_threads) {
        const unsigned o = i / (blocks * column_block / 8), c = i % (blocks * column_block / 8);
        copy16(ws + o * ldw + 8 * c, w + std::size_t(o) * s.m + (8 * c < s.m ? 8 * c : 0), 8 * c < s.m);
    }
    unsigned t = blockIdx.x;
    if (t < s.tiles) start_tile(s, dy, gu, down_shared + at.dy, down_shared + at.gu, t);
    commit_copies();

    for (unsigned b = 0; t < s.tiles; t += gridDim.x, b ^= 1) {
        bf16 *sdy = down_shared + at.dy + b * at.dy_size, *sgu = down_shared + at.gu + b * at.gu_size;
        const unsigned next = t + gridDim.x;
        __syncthreads();  // buffer b ^ 1 (the tile before) is copied out: it takes the next tile
        if (next < s.tiles)
            start_tile(s, dy, gu, down_shared + at.dy + (b ^ 1) * at.dy_size, down_shared + at.gu + (b ^ 1) * at.gu_size,
                       next);
        commit_copies();
        wait_copies<1>();  // this tile's group (and the weight's, the first time)
        __syncthreads();

        // dh for the tile's 16 rows and each of the warp's 32-column blocks, then SwiGLU's backward into
        // the gu tile: the gate's and the up's columns j and m + j of a row are this lane's alone.
        const bf16* arow = sdy + (lane % 16) * ldd + 8 * (lane / 16);  // A: row l % 16, k half l / 16
        for (unsigned cb = warp; cb < blocks; cb += warps) {
            float acc[4][4] = {};
            const unsigned n0 = cb * column_block;
            // B = W rows k0 .. k0 + 15, columns n0 .. n0 + 31: lane l addresses row l % 8 of matrix l / 8,
            // the k half (l / 8) % 2 of n-tile l / 16 (then of n-tile 2 + l / 16)
            const bf16* brow = ws + (lane % 8 + 8 * ((lane / 8) % 2)) * ldw + n0 + 8 * (lane / 16);
            for (unsigned k0 = 0; k0 < s.d; k0 += 16) {
                std::uint32_t a[4], b01[4], b23[4];
                load_matrices(a, arow + k0);
                load_matrices_transposed(b01, brow + k0 * ldw);
                load_matrices_transposed(b23, brow + k0 * ldw + 16);
                mma_bf16(acc[0], a, b01[0], b01[1]);
                mma_bf16(acc[1], a, b01[2], b01[3]);
                mma_bf16(acc[2], a, b23[0], b23[1]);
                mma_bf16(acc[3], a, b23[2], b23[3]);
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int hi = 0; hi < 2; ++hi) {
                    const unsigned r = g + 8 * hi, j = n0 + 8 * nt + 2 * q;
                    if (j >= s.m) continue;  // the zero columns of the last block (m even: j + 1 < m too)
                    __nv_bfloat162* gate = reinterpret_cast<__nv_bfloat162*>(sgu + r * ldg + j);
                    __nv_bfloat162* up = reinterpret_cast<__nv_bfloat162*>(sgu + r * ldg + s.m + j);
                    const float2 a2 = __bfloat1622float2(*gate), u2 = __bfloat1622float2(*up);
                    const float d0 = acc[nt][2 * hi], d1 = acc[nt][2 * hi + 1];
                    const float s0 = sigmoid_fast(a2.x), s1 = sigmoid_fast(a2.y);
                    // d u silu'(a) for the gate, d silu(a) for the up, as swiglu_backward_kernel
                    *gate = __floats2bfloat162_rn(d0 * u2.x * (s0 * (1.0f + a2.x * (1.0f - s0))),
                                                  d1 * u2.y * (s1 * (1.0f + a2.y * (1.0f - s1))));
                    *up = __floats2bfloat162_rn(d0 * (a2.x * s0), d1 * (a2.y * s1));
                }
        }
        __syncthreads();
        // the tile's dgu rows out, 16 bytes a thread
        const unsigned chunks = 2 * s.m / 8, row0 = t * tile_rows;
        for (unsigned i = threadIdx.x; i < tile_rows * chunks; i += block_threads) {
            const unsigned r = i / chunks, c = i % chunks;
            if (row0 + r < s.rows)
                *reinterpret_cast<uint4*>(dgu + std::size_t(row0 + r) * 2 * s.m + 8 * c) =
                    *reinterpret_cast<const uint4*>(sgu + r * ldg + 8 * c);
        }
    }
    wait_copies<0>();  // no copy outlives the block
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

bool mlp_down_backward(const bf16* dy, const bf16* w_down, const bf16* gu, bf16* dgu, std::size_t rows, std::size_t d,
                       std::size_t m, cudaStream_t stream) {
    if (rows == 0 || rows >= (1u << 31) || d == 0 || d % 16 || d > 4096 || m == 0 || m % 8 || m > 4096 ||
        !aligned16(dy) || !aligned16(w_down) || !aligned16(gu) || !aligned16(dgu))
        return false;
    const std::size_t bytes = DownLayout(unsigned(d), unsigned(m)).total * sizeof(bf16);
    int device = 0, sms = 0, max_shared = 0;
    check(cudaGetDevice(&device), "mlp_down_backward");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "mlp_down_backward");
    check(cudaDeviceGetAttribute(&max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "mlp_down_backward");
    if (bytes > std::size_t(max_shared)) return false;
    check(cudaFuncSetAttribute(mlp_down_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
          "mlp_down_backward");
    const DownShape s{unsigned(rows), unsigned(d), unsigned(m), unsigned((rows + tile_rows - 1) / tile_rows)};
    int per_sm = 0;
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mlp_down_backward_kernel, block_threads, bytes),
          "mlp_down_backward");
    const unsigned blocks = std::min<unsigned>(s.tiles, unsigned(std::max(1, per_sm) * sms));
    mlp_down_backward_kernel<<<blocks, block_threads, bytes, stream>>>(s, dy, w_down, gu, dgu);
    check(cudaGetLastError(), "mlp_down_backward");
    return true;
}

}  // namespace statetrack::gpu::cuda
