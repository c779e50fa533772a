// The delta rule's forward in chunks of C steps, its products on tensor cores (one factor, head_dim
// 32: deltanet at the paper's sizes). recurrences.cu steps the state one token at a time: each step
// is a chain of group reductions, and ncu counted ~580 instructions per warp and token there, most of
// them staging, conv, norms and index work (docs/PERFORMANCE.md, 2026-11-25, night). Here a warp owns
// one (word, head) as there, but takes C = 16 tokens at once. Within a chunk, with S0 the state
// before it (keys x values), beta_t the gates and K, Q, V its rows:
//   u_t = v_t - S_{t-1}^T k_t and S_t = S_{t-1} + beta_t k_t u_t^T give, for the chunk's rows,
//   (I + L) U = V - K S0,  L[t][s] = beta_s (k_t . k_s) for s < t (0 otherwise),
//   O = Q S0 + P diag(beta) U,  P[t][s] = q_t . k_s for s <= t (0 otherwise),
//   S_C = S0 + K^T diag(beta) U,
// the same sums as the step-by-step form in another order. U is solved by forward substitution
// (lane c keeps column c); the seven products run as mma.m16n8k8 on TF32 operands split in
// two (x = hi + lo, a b ~ a_hi b_hi + a_hi b_lo + a_lo b_hi, "3xTF32"), which keeps fp32 accuracy:
// the recurrent state stays fp32 as the issue asks, whatever --matmul says.
#include <array>
#include <atomic>
#include <cstdint>

#include "activations.cuh"
#include "kernels.cuh"

namespace statetrack::gpu::cuda {

namespace {

constexpr int DH = 32;       // head dimension (keys and values)
constexpr int C = 16;        // steps per chunk: the mma's M
constexpr int warps_per_block = 2;
constexpr int ld32 = DH + 4;  // row strides of the tiles: the A and K^T fragment loads hit 32 distinct banks
constexpr int ld16 = C + 4;

// One warp's shared memory, in floats (every offset a multiple of 4: 16-byte aligned rows). 13 KiB,
// so that 16 warps fit in an H100 SM (the first version also staged the conv's input rows here: 20 KiB,
// 10 warps, and the kernel waited on latencies with no other warp to run: 179 us against the
// step-by-step kernel's 139 at T = 40, ncu on the H100).
struct Tiles {
    static constexpr int k = 0;                   // [C][ld32]: normalised keys
    static constexpr int q = k + C * ld32;        // [C][ld32]: normalised queries
    static constexpr int v = q + C * ld32;        // [C][ld32]: v, then V - K S0, then diag(beta) U
    static constexpr int lp = v + C * ld32;       // [C][ld16]: L, then the masked Q K^T
    static constexpr int s = lp + C * ld16;       // [DH][ld32]: S0, keys x values
    static constexpr int beta = s + DH * ld32;    // [C]
    static constexpr int norm = beta + C;         // [2 C]: |k_t|, then |q_t|
    static constexpr int floats = norm + 2 * C;
};

// x = hi + lo with hi and lo rounded to TF32 (10-bit mantissas, 11 significant bits), to nearest.
// hi by Veltkamp's split, c = (2^13 + 1) x, hi = c - (c - x): three float instructions that keep NaN
// a NaN (c overflows for |x| > 4e34: hi is then NaN, as products that large only come after
// divergence). lo = x - hi is exact (at most 13 bits; the mma would truncate it to 11), so it is
// rounded by adding half a TF32 unit to its bits and clearing the low 13 (x is finite there, or hi is
// NaN). Measured alternatives (ncu, H100): cvt.rna.tf32.f32 is no single instruction on sm_90 (~5200
// instructions per warp and chunk, 41% integer and compare work); the integer rounding for hi as well
// was the fastest but turned a NaN into zero, so that a NaN in k, q or S left the output finite (found
// in review; test NanWeightsGiveNanLogitsAsOnTheCpu); testing for NaN in each rounding cost 23% of
// the kernel; leaving lo unrounded put two test instances over their bounds (1.1e-5 and 1.5e-5
// against 1e-5 and 1.3e-5).
struct Split {
    std::uint32_t hi, lo;
};
__device__ Split split(float x) {
    const float c = __fmul_rn(8193.0f, x);  // _rn: not contracted into an fma, which would break the split
    const float hi = __fsub_rn(c, __fsub_rn(c, x));
    const std::uint32_t lo = (__float_as_uint(__fsub_rn(x, hi)) + 0x1000u) & 0xffffe000u;
    return {__float_as_uint(hi), lo};
}
// d += a b for one 16 x 8 x 8 tile (fragments as in the PTX ISA's mma.m16n8k8 .tf32 layout).
__device__ void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();  // the launcher uses this kernel only where it was built for sm_80 or later
#endif
}

// d[nt] += A B over k < 8 KS for one 16-row tile of A and NT 8-column tiles of B, in 3xTF32. A(i, k)
// and B(k, j) read shared memory; lane 4 g + q holds, in d[nt][e], entry (g + 8 (e / 2), 8 nt + 2 q
// + e % 2).
template <int KS, int NT, class AT, class BT>
__device__ void product(float (&d)[NT][4], AT A, BT B, int g, int q) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
        const int k0 = 8 * ks;
        const Split a[4] = {split(A(g, k0 + q)), split(A(g + 8, k0 + q)), split(A(g, k0 + q + 4)),
                            split(A(g + 8, k0 + q + 4))};
        const std::uint32_t hi[4] = {a[0].hi, a[1].hi, a[2].hi, a[3].hi};
        const std::uint32_t lo[4] = {a[0].lo, a[1].lo, a[2].lo, a[3].lo};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const Split b0 = split(B(k0 + q, 8 * nt + g)), b1 = split(B(k0 + q + 4, 8 * nt + g));
            mma(d[nt], lo, b0.hi, b1.hi);
            mma(d[nt], hi, b0.lo, b1.lo);
            mma(d[nt], hi, b0.hi, b1.hi);
        }
    }
}
// The row and column of accumulator entry e of n-tile nt (see product).
__device__ int acc_row(int g, int e) { return g + 8 * (e >> 1); }
__device__ int acc_col(int q, int nt, int e) { return 8 * nt + 2 * q + (e & 1); }
// f(row, column, entry) for every accumulator entry this lane holds.
template <int NT, class F>
__device__ void for_each_entry(float (&d)[NT][4], int g, int q, F f) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) f(acc_row(g, e), acc_col(q, nt, e), d[nt][e]);
}

template <int KT, bool TRAIN>
__global__ void __launch_bounds__(32 * warps_per_block, 8) delta_forward_chunked_kernel(DeltaShape s, const float* pre,
                                                                                     const float* conv,
                                                                                     const float* zbeta, float* o,
                                                                                     float* u_out, float* final) {
    extern __shared__ __align__(16) float chunk_shared[];
    const int lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const std::size_t group = std::size_t(blockIdx.x) * warps_per_block + threadIdx.x / 32;
    if (group >= s.B * s.H) return;  // the whole warp: nothing below syncs across warps
    const std::size_t H = s.H, b = group / H, h = group % H, d = H * DH, ld = s.ld, n0 = b * s.T;
    float* tile = chunk_shared + (threadIdx.x / 32) * Tiles::floats;
    float *sk = tile + Tiles::k, *sq = tile + Tiles::q, *sv = tile + Tiles::v, *lp = tile + Tiles::lp;
    float *ss = tile + Tiles::s, *sbeta = tile + Tiles::beta, *snorm = tile + Tiles::norm;

    const int pad = KT - int(s.K);  // taps padded in front with zeros to KT, as recurrences.cu's load_taps
    for (int i = lane; i < DH * ld32; i += 32) ss[i] = 0;
    float halo[3][KT - 1];  // the last KT - 1 rows of the chunk before, per column (zeros before the word)
#pragma unroll
    for (int slot = 0; slot < 3; ++slot)
#pragma unroll
        for (int j = 0; j + 1 < KT; ++j) halo[slot][j] = 0;

    for (std::size_t t0 = 0; t0 < s.T; t0 += C) {
        const int len = int(min(std::size_t(C), s.T - t0));
        const float zb = lane < len ? zbeta[(n0 + t0 + lane) * ld + h] : 0.0f;
        __syncwarp();  // the previous chunk is done with every tile
        // 1. Conv + SiLU of the lane's three columns into Q, K, V, one column at a time: the rows t0
        // .. t0 + C - 1 before the conv (zeros past the word; a warp reads 128 contiguous bytes per
        // row) after the KT - 1 rows kept from the chunk before (zeros before the word).
        // Each load's address steps from the one before: written as pre + (n0 + t0 + i) ld + ..., the
        // compiler kept 48 precomputed 64-bit addresses across chunks (spilled) and paid ~10 instructions a
        // load; the empty asm makes each step opaque, so that nothing is hoisted.
        const float* rows = pre + (n0 + t0) * ld + h * DH + lane;
#pragma unroll
        for (int slot = 0; slot < 3; ++slot) {
            float x[C + KT - 1];  // x[i]: the column at row t0 - KT + 1 + i
#pragma unroll
            for (int j = 0; j + 1 < KT; ++j) x[j] = halo[slot][j];
            const float* src = rows + slot * d;
#pragma unroll
            for (int i = 0; i < C; ++i) {
                x[KT - 1 + i] = i < len ? __ldg(src) : 0.0f;
                src += ld;
                asm("" : "+l"(src));
            }
            // the column's taps, read each chunk (L1-cached): 3 KT registers held throughout spilled
            float w[KT];
#pragma unroll
            for (int j = 0; j < KT; ++j)
                w[j] = j >= pad ? __ldg(conv + (slot * d + h * DH + lane) * s.K + std::size_t(j - pad)) : 0.0f;
            float* dst = slot == 0 ? sq : slot == 1 ? sk : sv;
#pragma unroll
            for (int i = 0; i < C; ++i) {
                float z = 0;
#pragma unroll
                for (int j = 0; j < KT; ++j) z += w[j] * x[i + j];
                dst[i * ld32 + lane] = siluf(z);
            }
#pragma unroll
            for (int j = 0; j + 1 < KT; ++j) halo[slot][j] = x[C + j];
        }
        // 2. The gates; rows past the word get beta 0: they add nothing to S (their outputs are not
        // written).
        if (lane < C) sbeta[lane] = lane < len ? s.beta_scale * sigmoidf(zb) : 0.0f;
        __syncwarp();
        // 3. L2 norms of the rows: lane t < C takes k_t, lane C + t takes q_t.
        {
            const float4* row = reinterpret_cast<const float4*>(lane < C ? sk + lane * ld32 : sq + (lane - C) * ld32);
            float sum = 0;
#pragma unroll
            for (int i = 0; i < DH / 4; ++i) {
                const float4 f = row[i];
                sum += f.x * f.x + f.y * f.y + f.z * f.z + f.w * f.w;
            }
            snorm[lane] = sqrtf(sum + norm_eps);
        }
        __syncwarp();
        // divided, as the reference does: multiplying by the reciprocal put two test instances at
        // 1.1e-5 and 1.4e-5 (bounds 1e-5 and 1.3e-5) instead of within them
#pragma unroll
        for (int i = 0; i < C; ++i) {
            sk[i * ld32 + lane] /= snorm[i];
            sq[i * ld32 + lane] /= snorm[C + i];
        }
        __syncwarp();

        // The operands: A(row, k) and B(k, column) of product().
        auto K = [sk](int t, int r) { return sk[t * ld32 + r]; };    // A: token t, key index r
        auto Kt = [sk](int r, int t) { return sk[t * ld32 + r]; };   // B = K^T: key index r, token t
        auto Q = [sq](int t, int r) { return sq[t * ld32 + r]; };
        auto S0 = [ss](int r, int c) { return ss[r * ld32 + c]; };   // B: key r, value c
        auto V = [sv](int t, int c) { return sv[t * ld32 + c]; };    // B: token t, value c
        auto LP = [lp](int t, int u) { return lp[t * ld16 + u]; };   // A: token t, token u
        // 4. L = strictly lower (K K^T) diag(beta).
        {
            float G[2][4] = {};
            product<DH / 8, 2>(G, K, Kt, g, q);
            for_each_entry(G, g, q, [=](int r, int c, float x) { lp[r * ld16 + c] = c < r ? sbeta[c] * x : 0.0f; });
        }
        // 5. V - K S0, in place of V (each entry has one owner).
        {
            float KS[4][4] = {};
            product<DH / 8, 4>(KS, K, S0, g, q);
            for_each_entry(KS, g, q, [=](int r, int c, float x) { sv[r * ld32 + c] -= x; });
        }
        __syncwarp();
        // 6. U = (I + L)^{-1} (V - K S0) by forward substitution, lane c solving column c; then
        // diag(beta) U in place of V for the products below.
        {
            float uc[C];
#pragma unroll
            for (int t = 0; t < C; ++t) {
                float x = sv[t * ld32 + lane];
#pragma unroll
                for (int r = 0; r < t; ++r) x -= lp[t * ld16 + r] * uc[r];
                uc[t] = x;
                if (TRAIN && t < len) u_out[(n0 + t0 + t) * d + h * DH + lane] = x;
            }
#pragma unroll
            for (int t = 0; t < C; ++t) sv[t * ld32 + lane] = sbeta[t] * uc[t];
        }
        __syncwarp();
        // 7. P = Q K^T on and below the diagonal, in place of L.
        {
            float P[2][4] = {};
            product<DH / 8, 2>(P, Q, Kt, g, q);
            for_each_entry(P, g, q, [=](int r, int c, float x) { lp[r * ld16 + c] = c <= r ? x : 0.0f; });
        }
        __syncwarp();
        // 8. O = Q S0 + P diag(beta) U, written for the word's rows.
        {
            float O[4][4] = {};
            product<DH / 8, 4>(O, Q, S0, g, q);
            product<C / 8, 4>(O, LP, V, g, q);
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int r = g + 8 * half;
                    if (r < len)
                        *reinterpret_cast<float2*>(o + (n0 + t0 + r) * d + h * DH + acc_col(q, nt, 0)) =
                            make_float2(O[nt][2 * half], O[nt][2 * half + 1]);
                }
        }
        // 9. S_C = S0 + K^T diag(beta) U: A(i, k) = K[k][16 mt + i]. S lives in shared memory between
        // chunks (32 accumulators kept in registers across the chunk pushed the kernel past 128).
        {
            float S[2][4][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
                for_each_entry(S[mt], g, q, [=](int r, int c, float& x) { x = ss[(16 * mt + r) * ld32 + c]; });
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
                product<C / 8, 4>(S[mt], [sk, mt](int i, int k) { return sk[k * ld32 + 16 * mt + i]; }, V, g, q);
            __syncwarp();  // every lane is done reading S0
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
                for_each_entry(S[mt], g, q, [=](int r, int c, float x) { ss[(16 * mt + r) * ld32 + c] = x; });
        }
    }
    if (TRAIN) {
        __syncwarp();
        float* dst = final + group * DH * DH;  // [key][value], as recurrences.cu writes it
        for (int i = lane; i < DH * DH; i += 32) dst[i] = ss[(i / DH) * ld32 + i % DH];
    }
}

template <int KT, bool TRAIN>
void launch(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta, float* o, float* u,
            float* final, cudaStream_t stream) {
    const auto kernel = delta_forward_chunked_kernel<KT, TRAIN>;
    constexpr std::size_t bytes = std::size_t(warps_per_block) * Tiles::floats * sizeof(float);
    static_assert(bytes <= 48 * 1024, "more than a block gets without cudaFuncSetAttribute");
    const std::size_t groups = s.B * s.H;
    const unsigned blocks = unsigned((groups + warps_per_block - 1) / warps_per_block);
    kernel<<<blocks, 32 * warps_per_block, bytes, stream>>>(s, pre, conv, zbeta, o, u, final);
    check(cudaGetLastError(), "delta_forward_chunked");
}

// Whether this build has the mma kernel for the current device (sm_80 or later code), asked once per
// device (sessions may run on several).
bool chunked_kernel_runs() {
    static std::array<std::atomic<int>, 64> known{};  // 0 unknown, 1 runs, 2 does not
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= int(known.size())) return false;
    if (const int k = known[std::size_t(device)].load()) return k == 1;
    cudaFuncAttributes a{};
    const bool runs = cudaFuncGetAttributes(&a, delta_forward_chunked_kernel<4, false>) == cudaSuccess &&
                      a.binaryVersion >= 80;
    if (!runs) (void)cudaGetLastError();  // the fallback's launch check must not see this query's error
    known[std::size_t(device)].store(runs ? 1 : 2);
    return runs;
}

}  // namespace

bool delta_forward_in_chunks(const DeltaShape& s, std::size_t KT, const float* pre, const float* conv,
                             const float* zbeta, float* o, float* u, float* final, cudaStream_t stream) {
    if (s.F != 1 || s.dh != DH || !chunked_kernel_runs()) return false;
    if (KT == 4) u ? launch<4, true>(s, pre, conv, zbeta, o, u, final, stream)
                   : launch<4, false>(s, pre, conv, zbeta, o, u, final, stream);
    else u ? launch<8, true>(s, pre, conv, zbeta, o, u, final, stream)
           : launch<8, false>(s, pre, conv, zbeta, o, u, final, stream);
    return true;
}

}  // namespace statetrack::gpu::cuda
