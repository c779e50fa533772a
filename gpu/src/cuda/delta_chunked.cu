// The delta rule in chunks of C steps, its products on the FP64 tensor cores (head_dim 32: deltanet
// at the paper's sizes, and deltaproduct:2 to :4, whose factors a token are steps: Factors below):
// the forward, and the backward in one reverse pass over the chunks. recurrences.cu steps the state
// one token at a time: each step is a chain of group reductions, and ncu counted ~580 instructions per
// warp and token there, most of them staging, conv, norms and index work (docs/PERFORMANCE.md,
// 2026-11-25, night). Here a warp owns one (word, head)
// as there, but takes C = 16 tokens at once. Within a chunk, with S0 the state before it (keys x
// values), beta_t the gates and K, Q, V its rows:
//   u_t = v_t - S_{t-1}^T k_t and S_t = S_{t-1} + beta_t k_t u_t^T give, for the chunk's rows,
//   (I + L) U = V - K S0,  L[t][s] = beta_s (k_t . k_s) for s < t (0 otherwise),
//   O = Q S0 + P diag(beta) U,  P[t][s] = q_t . k_s for s <= t (0 otherwise),
//   S_C = S0 + K^T diag(beta) U,
// the same sums as the step-by-step form in another order. U is solved by forward substitution
// (lane c keeps column c). The products take fp32 operands, exact in double, and sum in double: the
// recurrent state stays fp32 as the issue asks, whatever --matmul says. Where --matmul is tf32 or bf16
// the products the state never takes (the forward's into O, the backward's into gradients) go on the
// TF32 tensor cores, and the SiLU's exponential is __expf's (Arithmetic::loose), with one factor a
// token only: deltaproduct:2 to :4 run exact throughout (DeltaShape::loose_arithmetic).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "activations.cuh"
#include "bf16_tiles.cuh"
#include "conv_taps.cuh"
#include "kernels.cuh"
#include "warp_sums.cuh"

namespace statetrack::gpu::cuda {

namespace {

constexpr int DH = 32;       // head dimension (keys and values)
constexpr int C = 16;        // steps per chunk: two 8-row halves of the mma
constexpr int warps_per_block = 2;
constexpr int ld32 = DH + 4;  // row strides of the tiles: the A and K^T fragment loads hit 32 distinct banks
constexpr int ld16 = C + 4;
// The state tiles' row stride (S in the forward, dS in the backward): their accumulators' 64-bit
// accesses (lane 4 g + q: row g, columns 2 q and 2 q + 1) and the fragments of S as a row-major B
// (row q, column g) hit 32 distinct banks at 8 floats mod 32, two-way conflicts at ld32's 4 (ncu: 28%
// of the forward's shared-memory wavefronts were excess). Not the backward's S, read by ldmatrix,
// which needs ld32's.
constexpr int ld_state = DH + 8;

// One warp's shared memory, in floats (every offset a multiple of 4: 16-byte aligned rows). 13.2 KiB,
// so that 16 warps fit in an H100 SM (the first version also staged the conv's input rows here: 20 KiB,
// 10 warps, and the kernel waited on latencies with no other warp to run: 179 us against the
// step-by-step kernel's 139 at T = 40, ncu on the H100).
struct Tiles {
    static constexpr int k = 0;                   // [C][ld32]: normalised keys
    static constexpr int q = k + C * ld32;        // [C][ld32]: normalised queries
    static constexpr int v = q + C * ld32;        // [C][ld32]: v, then V - K S0, then diag(beta) U
    static constexpr int lp = v + C * ld32;       // [C][ld16]: L, then the masked Q K^T
    static constexpr int s = lp + C * ld16;       // [DH][ld_state]: S0, keys x values
    static constexpr int beta = s + DH * ld_state;  // [C]
    static constexpr int norm = beta + C;         // [2 C]: 1 / |k_t|, then 1 / |q_t|
    static constexpr int floats = norm + 2 * C;
};

// d += a b for 8 x 8 x 4 tiles in double, fragments as in the PTX ISA's mma .f64 layouts. On sm_90
// one m16n8k4 takes both 8-row halves of a 16-row tile (d: rows g and g + 8, a: A(g, q) and A(g + 8,
// q), b = B(q, g)); sm_80 has only m8n8k4, one half at a time. Measured on an H100 with 4-16 warps an
// SM (2026-11-26, bench_fp64_mma): a warp's m8n8k4 runs at half the FP64 tensor cores' rate, ~33
// TFLOPS against 54-64 for m16n8k4 (and for m16n8k8 and m16n8k16, no faster in these kernels, where
// they spilled in the backward).
__device__ void dmma(double (&d)[2][2], double a0, double a1, double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
                 : "+d"(d[0][0]), "+d"(d[0][1]), "+d"(d[1][0]), "+d"(d[1][1])
                 : "d"(a0), "d"(a1), "d"(b));
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
                 : "+d"(d[0][0]), "+d"(d[0][1])
                 : "d"(a0), "d"(b));
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
                 : "+d"(d[1][0]), "+d"(d[1][1])
                 : "d"(a1), "d"(b));
#else
    __trap();  // the launchers use these kernels only where they were built for sm_80 or later
#endif
}

// d[nt] += A B over k < 8 KS for the 16 rows of A and NT 8-column tiles of B: each operand
// converted to double (exact), the sums in double from d's values, one rounding back to float. A(i, k)
// and B(k, j) read shared memory; lane 4 g + q holds, in d[nt][e], entry (g + 8 (e / 2), 8 nt + 2 q
// + e % 2). A NaN operand gives NaN sums (test NanWeightsGiveNanLogitsAsOnTheCpu).
// The first versions ran on the TF32 tensor cores with each operand split in two (x = hi + lo, a b ~
// a_hi b_hi + a_hi b_lo + a_lo b_hi, "3xTF32", for fp32 accuracy): a split took six instructions
// (Veltkamp's, as cvt.rna.tf32.f32 is no single instruction on sm_90 and integer rounding turned NaN
// into zero), three mma per tile. In FP64 a conversion is one instruction and a tile two mma: the
// chunked backward 1850 -> 1658 us a layer at T = 256, the forward 602 -> 585 us (H200, ncu), with
// errors against the fp64 reference 2-3x smaller. The FP64 tensor cores run at half the FP32 rate on
// the data-centre GPUs (A100, H100, H200) only: chunked_kernels_run() checks that.
// Plain TF32 products (one mma.m16n8k8 a tile, operands rounded by cvt.rna) under --matmul tf32 made
// both kernels ~10% faster (the step 3-4%), with errors against the reference no larger than the
// TF32 projections' own; but parity, trained on lengths 3-40, reached scaled accuracy 1.0 on lengths
// 40-256 for 1 seed of 12 against 7 of 12 with these products (docs/PERFORMANCE.md, 2026-11-26,
// fourth session): the state's updates must be exact for length generalisation, whatever --matmul says.
template <int KS, int NT, class AT, class BT>
__device__ void product(float (&d)[NT][4], AT A, BT B, int g, int q) {
    double acc[NT][2][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e >> 1][e & 1] = d[nt][e];
#pragma unroll
    for (int ks = 0; ks < 2 * KS; ++ks) {
        const int k0 = 4 * ks;
        const double a0 = A(g, k0 + q), a1 = A(g + 8, k0 + q);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) dmma(acc[nt], a0, a1, B(k0 + q, 8 * nt + g));
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) d[nt][e] = float(acc[nt][e >> 1][e & 1]);
}
// The products the state never takes, under Arithmetic::loose (below): on the TF32 tensor cores
// (mma.m16n8k8, one a tile where the FP64 path takes two mma and their conversions), sums in fp32.
// The operands go in as their fp32 bits, which the tensor cores cut to 10 bits of mantissa (toward
// zero: within 2^-10 of each operand, NaN staying NaN). Rounding them first (cvt.rna, two
// instructions each on sm_90) took two thirds of the gain: bf16 steps at T = 256 7.955 -> 7.820 ms,
// against 7.605 with the bits as they are (H100, docs/PERFORMANCE.md). The outputs and the gradients
// then carry the same kind of rounding as the TF32 or bf16 projections around the recurrence. The state
// never takes them: its products in the forward (L, V - K S0, S_C), and the backward's rebuilding of
// each chunk's starting state, multiply exactly (product above; TF32 there cost length generalisation).
__device__ std::uint32_t tf32_bits(float x) { return __float_as_uint(x); }
// d += a b for one 16 x 8 x 8 tile: lane 4 g + q holds a = A(g, q), A(g + 8, q), A(g, q + 4), A(g + 8,
// q + 4), b = B(q, g), B(q + 4, g), and d as product's accumulators (PTX ISA, mma .tf32 layouts).
__device__ void tf32_mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();  // as dmma
#endif
}
// Operands that lie in a tile as they are read, which product_tf32 loads by ldmatrix (one instruction
// for an A fragment's four words, or two B fragments', where element by element takes four LDS: the
// backward issued ~500 LDS a warp and chunk, most of them its products' fragments). The values, and so
// the sums, are the same either way; product() reads them element by element.
struct RowMajor {  // A(i, k) = p[i ld + k]
    const float* p;
    int ld;
    __device__ float operator()(int i, int k) const { return p[i * ld + k]; }
};
struct Transposed {  // B(k, n) = p[n ld + k]: a tile stored by rows, read as its transpose
    const float* p;
    int ld;
    __device__ float operator()(int k, int n) const { return p[n * ld + k]; }
};
template <int KS, int NT, class AT, class BT>
__device__ void product_tf32(float (&d)[NT][4], AT A, BT B, int g, int q) {
    const int lane = 4 * g + q;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
        const int k0 = 8 * ks;
        std::uint32_t a[4];
        if constexpr (std::is_same_v<AT, RowMajor>) {  // matrices: rows 0-7 and 8-15 of columns k0.., then k0 + 4..
            load_matrices(a, A.p + (lane % 8 + 8 * (lane / 8 % 2)) * A.ld + k0 + 4 * (lane / 16));
        } else {
            a[0] = tf32_bits(A(g, k0 + q)), a[1] = tf32_bits(A(g + 8, k0 + q));
            a[2] = tf32_bits(A(g, k0 + q + 4)), a[3] = tf32_bits(A(g + 8, k0 + q + 4));
        }
        auto scalar_b = [&](int nt) {
            tf32_mma(d[nt], a, tf32_bits(B(k0 + q, 8 * nt + g)), tf32_bits(B(k0 + q + 4, 8 * nt + g)));
        };
        if constexpr (std::is_same_v<BT, Transposed>) {  // two n-tiles a load: columns 8 nt.. and 8 nt + 8..
#pragma unroll
            for (int nt = 0; nt + 1 < NT; nt += 2) {
                std::uint32_t b[4];
                load_matrices(b, B.p + (8 * nt + lane % 8 + 8 * (lane / 16)) * B.ld + k0 + 4 * (lane / 8 % 2));
                tf32_mma(d[nt], a, b[0], b[1]);
                tf32_mma(d[nt + 1], a, b[2], b[3]);
            }
            if constexpr (NT % 2 == 1) scalar_b(NT - 1);
        } else {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) scalar_b(nt);
        }
    }
}
// What the kernels may round where --matmul rounds the products around them anyway (tf32 and bf16:
// DeltaShape::loose_arithmetic): loose takes the SiLU's exponential by __expf and the products the
// state never takes (loose_product: the forward's into O, the backward's into gradients) on the TF32
// tensor cores. The state's products are exact either way.
enum class Arithmetic { exact, loose };
template <Arithmetic AR, int KS, int NT, class AT, class BT>
__device__ void loose_product(float (&d)[NT][4], AT A, BT B, int g, int q) {
    if constexpr (AR == Arithmetic::loose) product_tf32<KS, NT>(d, A, B, g, q);
    else product<KS, NT>(d, A, B, g, q);
}

// SiLU with a fast division (2 ulp) where the IEEE one takes ~10 instructions, and its gradient with
// __expf's exponential as well (exp_neg_flushed: within 2 + 1.2 |z| ulp where the IEEE expf takes ~6
// more; past z < -87 both give 0, as the limit is). The values keep the IEEE expf under
// Arithmetic::exact (--matmul fp32, and deltaproduct:2 to :4 under every --matmul): with __expf there
// the chunks test's errors doubled on one instance (all gradients 3.0e-6 -> 6.0e-6).
// Under loose, where TF32 or bf16 products round far more around them, they take it too: the
// forward 505 -> 453 us a layer at T = 256 (H100, ncu; docs/PERFORMANCE.md, 2026-11-27, fourteenth
// session). The forward and the backward's recomputation of q and k use the same function, so that
// the backward rebuilds the forward's state to the bit.
template <Arithmetic AR>
__device__ float silu_fast(float z) {
    return __fdividef(z, 1.0f + (AR == Arithmetic::loose ? exp_neg_flushed(z) : expf(-z)));
}
__device__ float silu_grad_fast(float z) {
    const float sg = sigmoid_fast(z);
    return sg * (1.0f + z * (1.0f - sg));
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

// Three steps that the forward and the backward both take on the same values: the backward undoes
// the forward's last product per chunk, so it must recompute the forward's keys to the bit, and one
// function each keeps the two kernels' operations the same (the taps' load, load_conv_taps, is
// shared with recurrences.cu: conv_taps.cuh).
// The conv sum of row i, x holding the column from KT - 1 rows before row 0 (the CPU reference's order of
// taps).
template <int KT, int N>
__device__ float conv_sum(const float (&w)[KT], const float (&x)[N], int i) {
    float z = 0;
#pragma unroll
    for (int j = 0; j < KT; ++j) z += w[j] * x[i + j];
    return z;
}
// 1 / sqrt(sum of squares + eps) of a row of DH floats (16-byte aligned), the L2 norm's reciprocal.
__device__ float norm_reciprocal(const float* row) {
    const float4* v = reinterpret_cast<const float4*>(row);
    float sum = 0;
#pragma unroll
    for (int i = 0; i < DH / 4; ++i) {
        const float4 f = v[i];
        sum += f.x * f.x + f.y * f.y + f.z * f.z + f.w * f.w;
    }
    return 1.0f / sqrtf(sum + norm_eps);
}

// The steps the chunked kernels take on word b (from its first_row): T where the batch is padded
// (past each word's end the padding's rows, whose gates are 0), its length where the words are
// packed (Batch; the rows past its end are the next word's: the kernels neither read nor write them).
__device__ std::size_t chunked_steps(const DeltaShape& s, std::size_t b) {
    return s.offsets ? std::size_t(__ldg(s.lengths + b)) : s.T;
}
// The row of pre and zbeta that holds row n's values: n, or its token's (tokens: DeltaShape::tokens
// in the kernels that read pre by token, null in the others, where the test folds away).
__device__ std::size_t pre_row(const std::int32_t* tokens, std::size_t n) {
    return tokens ? std::size_t(__ldg(tokens + n)) : n;
}

// One column of pre, tokens t0 - KT + 1 .. t0 + TC - 1 of a word into x (zeros before the word and
// from token t0 + len on), the word's token t0 at pre's row row0. Inside the word (every
// chunk but the first and the last) the address steps by ld through an opaque asm: with a bounds test
// and a 64-bit address per row, this took ~700 integer instructions a chunk in the backward (SASS,
// H200), and written as pre + (n0 + t0 + i) ld + ..., the compiler kept 48 precomputed addresses
// across the forward's chunks (spilled) and paid ~10 instructions a load.
// With tokens (DeltaShape::tokens), pre is a table: row row0 + t is the table's row tokens[row0 + t]
// (L1-resident: a few letters' rows), the rows outside the word its row of zeros (zero_token),
// whatever row0 is. The rows' tokens come in
// one load, a lane each, and go to every lane by shuffles: a load a row, each waiting for its
// token's, made the backward 12% slower than on the rows (ncu, H200), and a test a row outside the
// word 6%.
template <int KT, int TC>
__device__ void load_conv_rows(const float* pre, std::size_t ld, std::size_t row0, std::size_t column, std::size_t t0,
                               int len, float (&x)[TC + KT - 1], const std::int32_t* tokens = nullptr,
                               int zero_token = 0) {
    if (tokens) {
        static_assert(TC + KT - 1 <= 32, "a token a lane");
        const int first = -min(int(t0), KT - 1), lane = int(threadIdx.x % 32), own = lane - (KT - 1);
        const int token = lane < TC + KT - 1 && own >= first && own < len ? __ldg(tokens + row0 + own) : zero_token;
        const unsigned stride = unsigned(ld);  // (a few letters' rows of ld < 2^16)
#pragma unroll
        for (int i = 0; i < TC + KT - 1; ++i)
            x[i] = __ldg(pre + column + unsigned(__shfl_sync(0xffffffffu, token, i)) * stride);
        return;
    }
    const float* src = pre + row0 * ld + column;
    if (t0 >= KT - 1 && len == TC) {
        src -= (KT - 1) * ld;
#pragma unroll
        for (int i = 0; i < TC + KT - 1; ++i) {
            x[i] = __ldg(src);
            src += ld;
            asm("" : "+l"(src));
        }
    } else {  // the same, reading only the rows inside the word (the pointer passes its ends)
        const int first = -min(int(t0), KT - 1);
        src -= (KT - 1) * ld;
#pragma unroll
        for (int i = 0; i < TC + KT - 1; ++i) {
            const int t = i - (KT - 1);  // row t0 + t
            x[i] = t >= first && t < len ? __ldg(src) : 0.0f;
            src += ld;
            asm("" : "+l"(src));
        }
    }
}

// F factors a token (deltaproduct:F; deltanet F = 1): the factors are the delta rule's steps, F per
// token, so a chunk's C rows are C / F tokens' factors, row F i + j token i's factor j, and the
// chunk's formulas above hold as they are. The query of token i sits on row F i + F - 1 (its output
// reads the state after the token's last factor), zero on the token's other rows, and so is dO;
// beta, k, v and u are per row. The lane's columns of pre, each convolved over the tokens (pre's
// order): q, then k of each factor, then v of each factor. Where F does not divide C (deltaproduct:3:
// 5 tokens, 15 rows), the rows past the tokens' hold zeros and beta 0: steps that change nothing.
template <int F>
struct Factors {
    static_assert(F >= 1 && C / F >= 2, "at least two tokens a chunk");
    static constexpr int tokens = C / F;    // a chunk's tokens
    static constexpr int rows = F * tokens;  // the rows they fill
    static constexpr int slots = int(delta_slots(F));  // the lane's columns
    __host__ __device__ static constexpr int k_slot(int j) { return 1 + j; }
    __host__ __device__ static constexpr int v_slot(int j) { return 1 + F + j; }
    // the tile row of factor j of the chunk's token i
    __host__ __device__ static constexpr int row(int i, int j) { return F * i + j; }
    __host__ __device__ static constexpr int q_row(int i) { return F * i + F - 1; }
    // The backward's conv columns: warp 0 takes q (its column 0) and the F v's (its columns 1 .. F),
    // warp 1 the F k's (its columns 0 .. F - 1); warp w's column m is pre's slot backward_slot(w, m),
    // its rows in the tiles those of factor backward_factor(w, m) (q on each token's last row).
    __host__ __device__ static constexpr int backward_columns(int w) { return w == 0 ? 1 + F : F; }
    __host__ __device__ static constexpr int backward_slot(int w, int m) {
        return w == 1 ? k_slot(m) : m == 0 ? 0 : v_slot(m - 1);
    }
    __host__ __device__ static constexpr int backward_factor(int w, int m) { return w == 1 ? m : m == 0 ? F - 1 : m - 1; }
    // Zeroes the lane's column of a tile's rows past the tokens' (none where F divides C).
    __device__ static void clear_rows_past_tokens(float* tile, int lane) {
        for (int r = rows; r < C; ++r) tile[r * ld32 + lane] = 0;
    }
    // Zeroes the lane's column of Q's rows that hold no query (none where F = 1): nothing else writes them.
    __device__ static void clear_rows_without_query(float* sq, int lane) {
        for (int r = 0; r < C; ++r)
            if (r % F != F - 1) sq[r * ld32 + lane] = 0;
    }
};

// Column `column` of pre (slot d + h DH + lane) through the conv and the SiLU for a chunk's tokens
// (the word's rows from row0, its token t0, len of them inside the word), into the lane's column of
// the tile rows of factor `factor`. The forward's Q, K and V and the backward's rebuilt Q and K both
// come from here, so that the backward subtracts to the bit what the forward's state added.
// (tokens: DeltaShape::tokens where the kernel reads pre by token, else null)
template <int KT, int F, Arithmetic AR>
__device__ void conv_silu_rows(const DeltaShape& s, const std::int32_t* tokens, const float* pre, const float* conv,
                               std::size_t row0, std::size_t t0, int len, std::size_t column, int factor, float* tile,
                               int lane) {
    constexpr int TC = Factors<F>::tokens;
    float x[TC + KT - 1];  // x[i]: the column at token t0 - KT + 1 + i
    load_conv_rows<KT, TC>(pre, s.ld, row0, column, t0, len, x, tokens, s.zero_token);
    // the column's taps, read each chunk (L1-cached): 3 KT registers held throughout spilled
    float w[KT];
    load_conv_taps(conv, column, s.K, w);
#pragma unroll
    for (int i = 0; i < TC; ++i) tile[Factors<F>::row(i, factor) * ld32 + lane] = silu_fast<AR>(conv_sum(w, x, i));
}

// BT: pre and zbeta by token (DeltaShape::tokens), an instance of its own so that the others' code
// stays as it was (a test of s.tokens in every kernel made the T = 40 steps 1% slower).
template <int KT, int F, bool TRAIN, Arithmetic AR, bool BT>
__global__ void __launch_bounds__(32 * warps_per_block, 8) delta_forward_chunked_kernel(DeltaShape s, const float* pre,
                                                                                     const float* conv,
                                                                                     const float* zbeta, float* o,
                                                                                     float* u_out, float* final) {
    extern __shared__ __align__(16) float chunk_shared[];
    const int lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const std::size_t group = std::size_t(blockIdx.x) * warps_per_block + threadIdx.x / 32;
    if (group >= s.B * s.H) return;  // the whole warp: nothing below syncs across warps
    const std::size_t H = s.H, b = group / H, h = group % H, d = H * DH, ld = s.ld;
    const std::size_t n0 = first_row(s, b), steps = chunked_steps(s, b);
    float* tile = chunk_shared + (threadIdx.x / 32) * Tiles::floats;
    float *sk = tile + Tiles::k, *sq = tile + Tiles::q, *sv = tile + Tiles::v, *lp = tile + Tiles::lp;
    float *ss = tile + Tiles::s, *sbeta = tile + Tiles::beta, *snorm = tile + Tiles::norm;

    const std::int32_t* const tokens = BT ? s.tokens : nullptr;
    using Fs = Factors<F>;
    constexpr int TC = Fs::tokens;
    if (s.poison_tiles) {  // tests: a tile row read before it is written shows as NaN
        for (int i = lane; i < Tiles::floats; i += 32) tile[i] = __int_as_float(0x7fc00000);
        __syncwarp();
    }
    for (int i = lane; i < DH * ld_state; i += 32) ss[i] = 0;
    Fs::clear_rows_without_query(sq, lane);  // steps 1 and 3 write only the others
    Fs::clear_rows_past_tokens(sk, lane);  // nor these (steps 5 and 6 keep V's at 0)
    Fs::clear_rows_past_tokens(sv, lane);

    for (std::size_t t0 = 0; t0 < steps; t0 += TC) {  // t0: the chunk's first token
        const int len = int(min(std::size_t(TC), steps - t0));  // its tokens inside the word
        const int rows_in = F * len;                            // and its rows
        // row `lane`'s beta logit: token lane / F, factor lane % F (zbeta's column (lane % F) H + h)
        const float zb = lane < rows_in ? zbeta[pre_row(tokens, n0 + t0 + lane / F) * ld + (lane % F) * H + h] : 0.0f;
        __syncwarp();  // the previous chunk is done with every tile
        // 1. Conv + SiLU of the lane's 1 + 2 F columns into Q, K, V, one column at a time: the chunk's
        // tokens and the KT - 1 before them (zeros before and past the word; a warp reads 128 contiguous
        // bytes a token), as the backward reads them. Keeping the KT - 1 rows in registers from the
        // chunk before instead made deltaproduct:2's forward spill 60-68 bytes (its 5 columns).
        auto conv_column = [&](int slot) {
            // q on its tokens' last rows, k and v of factor j on its rows
            const int factor = slot == 0 ? F - 1 : (slot - 1) % F;
            float* dst = slot == 0 ? sq : slot <= F ? sk : sv;
            conv_silu_rows<KT, F, AR>(s, tokens, pre, conv, n0 + t0, t0, len, slot * d + h * DH + lane, factor, dst,
                                      lane);
        };
        if constexpr (F == 1) {
#pragma unroll
            for (int slot = 0; slot < Fs::slots; ++slot) conv_column(slot);
        } else {  // not unrolled for more factors: deltaproduct:4's 9 columns unrolled spilled 100-136
                  // bytes, and deltaproduct:2's steps on packed words 3-40 took 5% longer (H100)
#pragma unroll 1
            for (int slot = 0; slot < Fs::slots; ++slot) conv_column(slot);
        }
        // 2. The gates; rows past the word get beta 0: they add nothing to S (their outputs are not
        // written).
        if (lane < C) sbeta[lane] = lane < rows_in ? s.beta_scale * sigmoidf(zb) : 0.0f;
        __syncwarp();
        // 3. L2 norms of the rows: lane t < C takes k_t, lane C + t takes q_t; the rows times the
        // reciprocals (a multiplication where a division takes ~10 instructions; the backward
        // recomputes them by the same operations).
        snorm[lane] = norm_reciprocal(lane < C ? sk + lane * ld32 : sq + (lane - C) * ld32);
        __syncwarp();
#pragma unroll
        for (int i = 0; i < C; ++i) {
            sk[i * ld32 + lane] *= snorm[i];
            sq[i * ld32 + lane] *= snorm[C + i];
        }
        __syncwarp();

        // The operands: A(row, k) and B(k, column) of product().
        const RowMajor K{sk, ld32};     // A: token t, key index r
        const Transposed Kt{sk, ld32};  // B = K^T: key index r, token t
        const RowMajor Q{sq, ld32};
        auto S0 = [ss](int r, int c) { return ss[r * ld_state + c]; };  // B: key r, value c
        auto V = [sv](int t, int c) { return sv[t * ld32 + c]; };    // B: token t, value c
        const RowMajor LP{lp, ld16};  // A: token t, token u
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
                if (TRAIN && t < rows_in) u_out[(n0 + t0 + t / F) * (F * d) + (t % F) * d + h * DH + lane] = x;
            }
#pragma unroll
            for (int t = 0; t < C; ++t) sv[t * ld32 + lane] = sbeta[t] * uc[t];
        }
        __syncwarp();
        // 7. P = Q K^T on and below the diagonal, in place of L. P and the products into O below are
        // loose_products: the state never takes them (with TF32 there, bf16 steps at T = 256 0.5-0.6%
        // faster, and parity learned as often: docs/training.md, 2026-11-27, eighteenth session).
        {
            float P[2][4] = {};
            loose_product<AR, DH / 8, 2>(P, Q, Kt, g, q);
            for_each_entry(P, g, q, [=](int r, int c, float x) { lp[r * ld16 + c] = c <= r ? x : 0.0f; });
        }
        __syncwarp();
        // 8. O = Q S0 + P diag(beta) U, written for the word's tokens (their last rows).
        {
            float O[4][4] = {};
            loose_product<AR, DH / 8, 4>(O, Q, S0, g, q);
            loose_product<AR, C / 8, 4>(O, LP, V, g, q);
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int r = g + 8 * half;
                    if (r % F == F - 1 && r < rows_in)
                        *reinterpret_cast<float2*>(o + (n0 + t0 + r / F) * d + h * DH + acc_col(q, nt, 0)) =
                            make_float2(O[nt][2 * half], O[nt][2 * half + 1]);
                }
        }
        // 9. S_C = S0 + K^T diag(beta) U: A(i, k) = K[k][16 mt + i]. S lives in shared memory between
        // chunks (32 accumulators kept in registers across the chunk pushed the kernel past 128).
        __syncwarp();  // every lane is done reading S0 (step 8); each entry of S has one owner below
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            float S[4][4];
            for_each_entry(S, g, q, [=](int r, int c, float& x) { x = ss[(16 * mt + r) * ld_state + c]; });
            product<C / 8, 4>(S, [sk, mt](int i, int k) { return sk[k * ld32 + 16 * mt + i]; }, V, g, q);
            for_each_entry(S, g, q, [=](int r, int c, float x) { ss[(16 * mt + r) * ld_state + c] = x; });
        }
    }
    if (TRAIN) {
        __syncwarp();
        float* dst = final + group * DH * DH;  // [key][value], as recurrences.cu writes it
        for (int i = lane; i < DH * DH; i += 32) dst[i] = ss[(i / DH) * ld_state + i % DH];
    }
}

template <int KT, int F, bool TRAIN, Arithmetic AR, bool BT = false>
void launch(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta, float* o, float* u,
            float* final, cudaStream_t stream) {
    const auto kernel = delta_forward_chunked_kernel<KT, F, TRAIN, AR, BT>;
    constexpr std::size_t bytes = std::size_t(warps_per_block) * Tiles::floats * sizeof(float);
    static_assert(bytes <= 48 * 1024, "more than a block gets without cudaFuncSetAttribute");
    const std::size_t groups = s.B * s.H;
    const unsigned blocks = unsigned((groups + warps_per_block - 1) / warps_per_block);
    kernel<<<blocks, 32 * warps_per_block, bytes, stream>>>(s, pre, conv, zbeta, o, u, final);
    check(cudaGetLastError(), "delta_forward_chunked");
}

// ---- The backward in chunks: one reverse pass over the chunks, two warps per (word, head) ----
// Given the state S_C after a chunk and dS, the loss's gradient with respect to it, the chunk's
// S0 = S_C - K^T diag(beta) U (the forward's last product undone, as recurrences.cu undoes each step),
// and with W = diag(beta) U, reading the forward's three lines backwards:
//   dW = P^T dO + K dS                      (O = Q S0 + P W and S_C = S0 + K^T W)
//   dU = diag(beta) dW,  dbeta_t = dW_t . u_t
//   dR = (I + L)^{-T} dU                    (U = (I + L)^{-1} R, R = V - K S0: back substitution)
//   dV = dR,  dL = -dR U^T (below the diagonal),  dG = dL diag(beta),  dbeta_s += sum_t dL[t][s] G[t][s]
//   dP = dO W^T (on and below the diagonal)
//   dQ = dO S0^T + dP K
//   dK = W dS^T + dP^T Q + (dG + dG^T) K - dR S0^T
//   dS0 = dS + Q^T dO - K^T dR               (the dS of the chunk before)
// with G = K K^T below the diagonal and L = G diag(beta). dQ and dK then go back through the L2
// norms, all three through the SiLU and the conv, as recurrences.cu's delta_backward_kernel does.
// dO itself comes from the mixer's output norm (RMSNorm of o per head, the head's 32 columns this
// block's): computed from o and dOn as rmsnorm_backward would, the norm's separate pass (which
// wrote dO for this kernel to read back) saves 2 of its 3 arrays: -285 us against +145 us here per
// step at T = 256 (H100, ncu).
// Fifteen products where the forward has six. Measured on the way (H200, ncu, per layer at T = 256;
// the step-by-step kernel: 1536 us):
//   one warp per (word, head), as in the forward, 3xTF32 products: 253 registers, 8 warps an SM,
//   0.22 instructions issued per cycle and scheduler, 3010 us;
//   two warps per (word, head), each taking half of every product's tiles: 16 warps an SM, 1850 us;
//   the mma chains split in three accumulators: 2056 us (more registers, no gain: not kept);
//   the products in FP64: 1658 us; SiLU by __expf, rows times reciprocals: 1547 us;
//   the conv's row loads by a stride, each warp normalising its own rows: 1266 us; the loads at the
//   word's ends by a stride too (no spills at KT = 4): 1239 us (T = 40: 256 -> 230 us).
// H100, bf16, half a batch at T = 256 (ncu, 2026-11-28): 462-466 us; each warp's part of step 1 as
// soon as its step 7 is done (warp 1 had waited 14% of its time at the loop's top barrier), with
// o, dOn and u by cp.async: 458-462 us (barrier stalls 12% -> 7% of the samples, the scoreboard's
// up), the step ~1% faster.
constexpr int back_threads = 64;

// The block's shared memory, in floats: five [C][ld32] row tiles, three [C][ld16] tiles (and 64 floats
// after them, for the staging below), S and dS.
struct BackTiles {
    static constexpr int k = 0;                  // normalised keys, then the gradient of their SiLU output
    static constexpr int q = k + C * ld32;       // normalised queries
    static constexpr int u = q + C * ld32;       // the forward's u (rows past the word: 0)
    static constexpr int go = u + C * ld32;      // dO, then the gradient of the queries' SiLU output
    static constexpr int dr = go + C * ld32;     // dU, then dR (= dV)
    static constexpr int g = dr + C * ld32;      // G = K K^T below the diagonal
    static constexpr int l = g + C * ld16;       // L = G diag(beta), then dG + dG^T
    static constexpr int p = l + C * ld16;       // P = Q K^T on and below the diagonal, then dP
    // From step 7 to the chunk before's step 2, where G, L and P are free: the chunk before's o and dOn
    // ([C][DH] each, one row a token), as cp.async brings them for the output norm's backward (1,024
    // floats where G, L and P hold 960: S starts 64 floats later).
    static constexpr int stage_o = g, stage_dn = stage_o + C * DH;
    static constexpr int s = std::max(p + C * ld16, stage_dn + C * DH);  // [DH][ld32]: S_C, then S0
    static constexpr int ds = s + DH * ld32;     // [DH][ld_state]: dS
    static constexpr int beta = ds + DH * ld_state;  // [C]
    static constexpr int norm = beta + C;        // [2 C]: 1 / |k_t|, then 1 / |q_t|
    static constexpr int dbeta_w = norm + 2 * C;   // [2][C]: dW_t . u_t over each warp's 16 columns
    static constexpr int dbeta_l = dbeta_w + 2 * C;  // [C]: sum_t dL[t][s] G[t][s]
    static constexpr int dots = dbeta_l + C;     // [2][2][C]: each warp's half of the rows' dq . q and dk . k;
                                                 // from step 7 on, the chunk before's 1 / rms (output norm) by token
    static constexpr int dgain = dots + 4 * C;   // [2][DH]: each warp's sum of the output norm's gain gradient
    static constexpr int floats = dgain + 2 * DH;
};

// The sums of the four lanes of a quad (the lanes holding one accumulator row).
__device__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
// dot[i]: row g + 8 i of the [C][16] accumulator d (columns c0 .. c0 + 15) dotted with the same
// entries of tile xs.
__device__ void row_dots(const float (&d)[2][4], const float* xs, int c0, int g, int q, float (&dot)[2]) {
    dot[0] = dot[1] = 0;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) dot[e >> 1] += d[nt][e] * xs[acc_row(g, e) * ld32 + c0 + acc_col(q, nt, e)];
    dot[0] = quad_sum(dot[0]), dot[1] = quad_sum(dot[1]);
}

// Out: the type of dpre and dzbeta (float, or bf16 for --matmul bf16's products), rows ldo apart.
// BT: pre and zbeta by token, as the forward's
template <int KT, int F, class Out, Arithmetic AR, bool BT>
__global__ void __launch_bounds__(back_threads, 8) delta_backward_chunked_kernel(DeltaShape s, const float* pre,
                                                                              const float* conv, const float* zbeta,
                                                                              const float* u_saved, const float* final,
                                                                              const OutputNorm on, Out* dpre,
                                                                              std::size_t ldo, float* partials,
                                                                              float* gain_partials, Out* dzbeta) {
    extern __shared__ __align__(16) float chunk_shared[];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const std::size_t group = blockIdx.x;  // one block a (word, head)
    const std::size_t H = s.H, b = group / H, h = group % H, d = H * DH, ld = s.ld;
    const std::size_t n0 = first_row(s, b), steps = chunked_steps(s, b);
    float* tile = chunk_shared;
    float *sk = tile + BackTiles::k, *sq = tile + BackTiles::q, *su = tile + BackTiles::u;
    float *sgo = tile + BackTiles::go, *sdr = tile + BackTiles::dr, *sg = tile + BackTiles::g;
    float *sl = tile + BackTiles::l, *sp = tile + BackTiles::p, *ss = tile + BackTiles::s, *sds = tile + BackTiles::ds;
    float *sbeta = tile + BackTiles::beta, *snorm = tile + BackTiles::norm;
    float *sdbeta_w = tile + BackTiles::dbeta_w, *sdbeta_l = tile + BackTiles::dbeta_l, *sdots = tile + BackTiles::dots;
    const int half = 16 * w;  // this warp's first column (or row) of 32
    const std::int32_t* const tokens = BT ? s.tokens : nullptr;
    using Fs = Factors<F>;
    constexpr int TC = Fs::tokens;

    if (s.poison_tiles) {  // tests, as the forward's (the whole block: s is the same for both warps)
        for (int i = threadIdx.x; i < BackTiles::floats; i += back_threads) tile[i] = __int_as_float(0x7fc00000);
        __syncthreads();
    }
    for (int i = threadIdx.x; i < DH * DH; i += back_threads) {
        ss[(i / DH) * ld32 + i % DH] = final[group * DH * DH + i];
        sds[(i / DH) * ld_state + i % DH] = 0;
    }
    float* sdgain = tile + BackTiles::dgain + w * DH;  // this warp's, lane = column
    sdgain[lane] = 0;
    if (w == 0) Fs::clear_rows_without_query(sq, lane);  // step 1 writes only the others
    // Per conv column of this warp (Factors::backward_slot) the gradient carried from the chunk after
    // (tokens t0 + C / F .. t0 + C / F + KT - 2) and the taps'.
    float carry[1 + F][KT - 1], taps[1 + F][KT];
#pragma unroll
    for (int m = 0; m < 1 + F; ++m) {
#pragma unroll
        for (int j = 0; j + 1 < KT; ++j) carry[m][j] = 0;
#pragma unroll
        for (int j = 0; j < KT; ++j) taps[m][j] = 0;
    }
    const int pad = KT - int(s.K);
    auto load_taps = [&](int slot, float (&tw)[KT]) { load_conv_taps(conv, slot * d + h * DH + lane, s.K, tw); };
    // The lane's column of `slot`, tokens t0 - KT + 1 .. t0 + C / F - 1 (zeros before the word and
    // past its end), as the forward reads them. Inside the word (every chunk but the first and the last) the
    // address steps by ld through an opaque asm, as in the forward: with a bounds test and a 64-bit
    // address per row, this phase took ~700 integer instructions per chunk (SASS, H200).
    auto load_rows = [&](int slot, std::size_t t0, int len, float (&x)[TC + KT - 1]) {
        load_conv_rows<KT, TC>(pre, ld, n0 + t0, slot * d + h * DH + lane, t0, len, x, tokens, s.zero_token);
    };
    // Back through the SiLU and the conv for one of the lane's columns (m: its index among the lane's
    // columns), grad the gradient of the SiLU outputs (token i's on tile row F i + factor): the gradient
    // of the conv sums g_i, dpre_t = sum_k w[KT-1-k] g_{t+k} and the taps' gradients, summed as
    // recurrences.cu's conv_backward_chunk sums them (tokens in reverse, then added to the taps).
    auto conv_backward = [&](int slot, const float* grad, int factor, std::size_t t0, int len,
                             float (&cr)[KT - 1], float (&tp)[KT]) {
        float x[TC + KT - 1], tw[KT], acc[KT] = {}, gz[KT];
        load_rows(slot, t0, len, x);
        load_taps(slot, tw);
        Out* out = dpre + (n0 + t0 + TC - 1) * ldo + slot * d + h * DH + lane;  // token t0 + C / F - 1, then up
#pragma unroll
        for (int i = 1; i < KT; ++i) gz[i] = cr[i - 1];
#pragma unroll
        for (int i = TC - 1; i >= 0; --i) {
            // no test of i < len: grad's rows past the word are 0 (their u, dO and beta are, so every
            // product into them is; for finite values), and x's conv sums there finite, so gz[0] is 0
            // there. The branch it took a token cost ~4 instructions (predicates spilled to registers):
            // bf16 steps at T = 256 -1.0%.
            gz[0] = grad[Fs::row(i, factor) * ld32 + lane] * silu_grad_fast(conv_sum(tw, x, i));
            float dx = 0;
#pragma unroll
            for (int k = 0; k < KT; ++k) dx += tw[KT - 1 - k] * gz[k];
            if (i < len) *out = Out(dx);
            out -= ldo;
            asm("" : "+l"(out));
#pragma unroll
            for (int j = 0; j < KT; ++j) acc[j] += gz[0] * x[i + j];
#pragma unroll
            for (int k = KT - 1; k > 0; --k) gz[k] = gz[k - 1];
        }
#pragma unroll
        for (int i = 0; i + 1 < KT; ++i) cr[i] = gz[i + 1];
#pragma unroll
        for (int j = 0; j < KT; ++j) tp[j] += acc[j];
    };

    // The operands (A(row, k) and B(k, column) of product()); B's columns from `half` where a warp
    // takes half of them.
    const RowMajor K{sk, ld32}, Q{sq, ld32};
    const Transposed Kt{sk, ld32};
    auto W = [su, sbeta](int t, int c) { return sbeta[t] * su[t * ld32 + c]; };  // diag(beta) U, as the forward rounds it
    const RowMajor GO{sgo, ld32}, DR{sdr, ld32};
    auto PT = [sp](int t, int u) { return sp[u * ld16 + t]; };  // P^T, then dP^T
    const RowMajor PP{sp, ld16};                                // dP
    const RowMajor GS{sl, ld16};                                // dG + dG^T
    auto K_h = [sk, half](int t, int r) { return sk[t * ld32 + half + r]; };
    auto Q_h = [sq, half](int t, int r) { return sq[t * ld32 + half + r]; };
    auto GO_h = [sgo, half](int t, int c) { return sgo[t * ld32 + half + c]; };
    auto DS_h = [sds, half](int r, int c) { return sds[r * ld_state + half + c]; };
    const Transposed DSt_h{sds + half * ld_state, ld_state};  // B = dS^T: value c, key half + r
    const Transposed S0t_h{ss + half * ld32, ld32};   // B = S0^T: value c, key half + r

    // Step 1 of a chunk (its tokens t0 .. t0 + len - 1), in parts that each warp takes while the other
    // may still be in the chunk after's step 7: the tiles written here are those step 7 no longer
    // reads, dO's (which warp 0 takes back through the conv for q first) after the named barrier
    // below. Deltanet's warp 0 has two conv columns to take back in step 7 (q, v) and warp 1 one (k),
    // so warp 1 takes all of dO and u; deltaproduct:F's warps (F + 1 and F columns) take every second
    // token's dO each. Before, both warps took half of dO after a barrier at the loop's top, where
    // warp 1 waited 14% of its time for warp 0 (ncu, H100, 2026-11-28).
    constexpr bool dO_by_warp1 = F == 1;
    constexpr int dO_tokens = dO_by_warp1 ? TC : (TC + 1) / 2, dO_stride = dO_by_warp1 ? 1 : 2;
    const bool takes_dO = !dO_by_warp1 || w == 1;
    const int dO_first = dO_by_warp1 ? 0 : w;  // the warp's first token
    // (a) u, all C rows (row t at u_saved's row (n0 + t0) F + t, [N][F d]), by warp 1 into its tile
    // without passing registers: 8 lanes a row, 16 bytes each (zeros past the word's rows).
    auto load_u = [&](std::size_t t0, int rows_in) {
        const float* first = u_saved + (n0 + t0) * F * d + h * DH;
#pragma unroll
        for (int i = 0; i < C / 4; ++i) {
            const int t = 4 * i + lane / 8, c = 4 * (lane % 8);
            copy16(su + t * ld32 + c, first + std::size_t(t) * d + c, t < rows_in);
        }
        commit_copies();
    };
    // (b) o, dOn (16 bytes a lane, 8 lanes a row) and the norm's 1 / rms of the warp's tokens, into
    // G, L and P's tiles, free from step 7 to step 2 (zeros past the word; a copy that reads nothing
    // may take an address past the arrays' end: src-size 0): in registers, 48 values
    // held across the rebuilt rows below made deltanet's kernels spill 316-632 bytes.
    float *stage_o = tile + BackTiles::stage_o, *stage_dn = tile + BackTiles::stage_dn, *stage_r = sdots;
    auto stage_output_norm = [&](std::size_t t0, int len) {
        constexpr int per_copy = 4;  // rows of a copy16 across the warp
#pragma unroll
        for (int i = 0; i < (dO_tokens + per_copy - 1) / per_copy; ++i) {
            const int k = per_copy * i + lane / 8, c = 4 * (lane % 8);  // the warp's token k, columns c..
            const int t = dO_first + dO_stride * k;
            if (k < dO_tokens && t < TC) {
                const std::size_t at = (n0 + t0 + t) * d + h * DH + c;
                copy16(stage_o + t * DH + c, on.o + at, t < len);
                copy16(stage_dn + t * DH + c, on.dOn + at, t < len);
            }
        }
        const int t = dO_first + dO_stride * lane;
        if (lane < dO_tokens && t < TC) copy4(stage_r + t, on.rinv + (n0 + t0 + t) * H + h, t < len);
        commit_copies();
    };
    // (c) Q (warp 0) and K (warp 1) by the forward's own functions (conv_silu_rows,
    // norm_reciprocal), so that undoing the forward's last product below subtracts what it added;
    // on the rows past the word as well, as the forward (x is 0 there; with u, dO and beta 0 there
    // those rows change nothing: a branch a token to zero them cost ~5 instructions).
    auto rebuild_rows = [&](std::size_t t0, int len) {
        float* dst = w == 0 ? sq : sk;
        auto conv_column = [&](int m) {
            conv_silu_rows<KT, F, AR>(s, tokens, pre, conv, n0 + t0, t0, len, Fs::backward_slot(w, m) * d + h * DH + lane,
                                      Fs::backward_factor(w, m), dst, lane);
        };
        // warp 0 its column 0 (q), warp 1 its F columns (the k's)
        if constexpr (F == 1) {
            conv_column(0);
        } else {  // as the forward's columns
#pragma unroll 1
            for (int m = 0; m < (w == 0 ? 1 : F); ++m) conv_column(m);
        }
        // K's rows past the tokens' (deltaproduct:3's row 15), which the conv does not write: step 6
        // of the chunk after wrote dk there (zeros for finite data), and the first chunk's are unset,
        // so they are cleared here. Q's were cleared once with the rows that hold no query: step 6
        // writes dq elsewhere.
        if (w == 1) Fs::clear_rows_past_tokens(sk, lane);
        __syncwarp();
        float* rinv = snorm + (w == 0 ? C : 0);
        if (lane < C) rinv[lane] = norm_reciprocal(dst + lane * ld32);
        __syncwarp();
#pragma unroll
        for (int i = 0; i < C; ++i) dst[i * ld32 + lane] *= rinv[i];
    };
    // (d) dO = r g dOn - o r^3 sum(g dOn o) / DH per row and head (the RMSNorm of o per head, whose
    // group is a warp's 32 columns), as rmsnorm_backward computes it, with the sum as a warp sum; the
    // gain's gradient dOn o r summed over the word's rows. Token i's dO on row F i + F - 1, the
    // token's other rows 0. after_step7: dO's tile is still warp 0's until it arrives at barrier 1.
    auto output_norm_backward = [&](bool after_step7) {
        wait_copies<0>();  // the warp's staged rows (and warp 1's u)
        __syncwarp();      // and the other lanes'
        const float gain = on.gain[h * DH + lane];  // (read here: held across the loop, spills)
        // o and dOn read twice from their tiles, and the sums taken 8 tokens at a time: with 16 sums and
        // o and dOn held in registers, deltanet's kernels spilled 84-180 bytes
        auto o_of = [&](int t) { return stage_o[t * DH + lane]; };
        auto dn_of = [&](int t) { return stage_dn[t * DH + lane]; };
        if (after_step7 && w == 1) asm volatile("bar.sync 1, %0;" ::"n"(back_threads) : "memory");
        float dg = sdgain[lane];
        constexpr int group = dO_tokens < 8 ? dO_tokens : 8;
#pragma unroll
        for (int i0 = 0; i0 < dO_tokens; i0 += group) {
            float dot[group];
#pragma unroll
            for (int k = 0; k < group; ++k) {
                const int t = dO_first + dO_stride * (i0 + k);  // (the second warp's last may be past TC)
                dot[k] = i0 + k < dO_tokens && t < TC ? gain * dn_of(t) * o_of(t) : 0.0f;
            }
            warp_sums(dot);
#pragma unroll
            for (int k = 0; k < group; ++k) {
                const int t = dO_first + dO_stride * (i0 + k);  // the token
                if (i0 + k >= dO_tokens || t >= TC) break;
                const float r = stage_r[t], xo = o_of(t), xd = dn_of(t);
                sgo[Fs::q_row(t) * ld32 + lane] = r * gain * xd - xo * r * r * r * dot[k] / float(DH);
                dg += xd * xo * r;
#pragma unroll
                for (int j = 0; j + 1 < F; ++j) sgo[Fs::row(t, j) * ld32 + lane] = 0.0f;
            }
        }
        sdgain[lane] = dg;
    };
    // Step 1 of the chunk at t0, the warp's part; zb: the logit of row `lane` (warp 1).
    auto prepare_chunk = [&](std::size_t t0, int len, float zb, bool after_step7) {
        const int rows_in = F * len;
        if (w == 1) load_u(t0, rows_in);
        if (takes_dO) stage_output_norm(t0, len);
        rebuild_rows(t0, len);
        if (takes_dO) output_norm_backward(after_step7);
        if (w == 0) Fs::clear_rows_past_tokens(sgo, lane);  // as K's above (step 6 writes dq there)
        if (w == 1) {
            if (lane < C) sbeta[lane] = lane < rows_in ? s.beta_scale * sigmoidf(zb) : 0.0f;
            wait_copies<0>();  // u is in its tile (the barrier after shows it to warp 0)
        }
    };
    // row `lane`'s beta logit of the chunk at t0 (warp 1): token lane / F, factor lane % F
    auto load_logit = [&](std::size_t t0, int rows_in) {
        return w == 1 && lane < rows_in ? zbeta[pre_row(tokens, n0 + t0 + lane / F) * ld + (lane % F) * H + h] : 0.0f;
    };

    const int chunks = int((steps + TC - 1) / TC);
    float zb = chunks > 0 ? load_logit(std::size_t(chunks - 1) * TC, int(F * (steps - std::size_t(chunks - 1) * TC))) : 0.0f;
    for (int chunk = chunks; chunk-- > 0;) {  // the last first
        const std::size_t t0 = std::size_t(chunk) * TC;          // its first token
        const int len = int(min(std::size_t(TC), steps - t0));   // its tokens inside the word
        const int rows_in = F * len;                               // and its rows
        // Step 1, each warp's part as soon as its step 7 of the chunk after is done. Its only call: a
        // version that called it once more before the loop, for the last chunk, held values across
        // that call and spilled 72-180 bytes.
        prepare_chunk(t0, len, zb, chunk + 1 < chunks);
        const bool before = chunk > 0;  // the chunk before (whole: only the last may be short)
        __syncthreads();  // step 1 is done: Q, K, u, dO and beta are in their tiles
        // 2. G and L = G diag(beta) (warp 0, as the forward rounds them), P (warp 1); S0 = S_C - K^T W
        // in place of S_C, warp w taking the keys 16 w .. 16 w + 15 (each entry has one owner, and
        // nothing reads S here).
        {
            float X[2][4] = {};
            const float* rows = w == 0 ? sk : sq;
            loose_product<AR, DH / 8, 2>(X, RowMajor{rows, ld32}, Kt, g, q);
            if (w == 0)
                for_each_entry(X, g, q, [=](int r, int c, float x) {
                    sg[r * ld16 + c] = c < r ? x : 0.0f;
                    sl[r * ld16 + c] = c < r ? sbeta[c] * x : 0.0f;
                });
            else
                for_each_entry(X, g, q, [=](int r, int c, float x) { sp[r * ld16 + c] = c <= r ? x : 0.0f; });
            float S[4][4] = {};
            product<C / 8, 4>(S, [sk, half](int i, int k) { return sk[k * ld32 + half + i]; }, W, g, q);
            for_each_entry(S, g, q, [=](int r, int c, float x) { ss[(half + r) * ld32 + c] -= x; });
        }
        __syncthreads();
        // 3. Warp w takes the columns 16 w .. 16 w + 15 of dW = P^T dO + K dS: its half of dbeta_t =
        // dW_t . u_t, and dU = diag(beta) dW. The same columns of dK's first term, W dS^T, stay in
        // registers for step 6 (step 5 overwrites dS).
        float DK[2][4] = {};
        {
            float DW[2][4] = {};
            loose_product<AR, C / 8, 2>(DW, PT, GO_h, g, q);
            loose_product<AR, DH / 8, 2>(DW, K, DS_h, g, q);
            float dot[2];
            row_dots(DW, su, half, g, q, dot);
            if (q == 0) sdbeta_w[C * w + g] = dot[0], sdbeta_w[C * w + g + 8] = dot[1];
            for_each_entry(DW, g, q, [=](int r, int c, float x) { sdr[r * ld32 + half + c] = sbeta[r] * x; });
            loose_product<AR, DH / 8, 2>(DK, W, DSt_h, g, q);
        }
        __syncthreads();
        // 4. Warp 0: dR = (I + L)^{-T} dU by back substitution, lane c solving column c. Warp 1, which
        // does not need dR: dP = dO W^T in place of P (read last in step 3).
        if (w == 0) {
            float x[C];
#pragma unroll
            for (int t = C - 1; t >= 0; --t) {
                float y = sdr[t * ld32 + lane];
                // the oldest solutions first, x[t + 1] (just solved) last: one FMA a row waits on the row
                // before, where x[t + 1] first made every row wait for the one before's whole sum (a chain
                // of 120 FMAs): the kernel 455-461 -> 449-454 us (H100, ncu, bf16, T = 256)
#pragma unroll
                for (int r = C - 1; r > t; --r) y -= sl[r * ld16 + t] * x[r];
                x[t] = y;
            }
#pragma unroll
            for (int t = 0; t < C; ++t) sdr[t * ld32 + lane] = x[t];
        } else {
            float DP[2][4] = {};
            const auto Wt = [su, sbeta](int c, int t) { return sbeta[t] * su[t * ld32 + c]; };  // W^T
            loose_product<AR, DH / 8, 2>(DP, GO, Wt, g, q);
            for_each_entry(DP, g, q, [=](int r, int c, float x) { sp[r * ld16 + c] = c <= r ? x : 0.0f; });
        }
        __syncthreads();
        // 5. dS0 = dS + Q^T dO - K^T dR in place of dS, warp w taking the keys 16 w .. 16 w + 15; and
        // dL = -dR U^T for the columns 8 w .. 8 w + 7: dG + dG^T in place of L (read last in step 4)
        // and the columns' sums of dL G into dbeta.
        {
            float D[4][4];
            for_each_entry(D, g, q, [=](int r, int c, float& x) { x = sds[(half + r) * ld_state + c]; });
            loose_product<AR, C / 8, 4>(D, [sq, half](int i, int k) { return sq[k * ld32 + half + i]; }, GO, g, q);
            loose_product<AR, C / 8, 4>(D, [sk, half](int i, int k) { return -sk[k * ld32 + half + i]; }, DR, g, q);
            for_each_entry(D, g, q, [=](int r, int c, float x) { sds[(half + r) * ld_state + c] = x; });

            const int c8 = 8 * w;
            float DL[1][4] = {};
            loose_product<AR, DH / 8, 1>(DL, DR, Transposed{su + c8 * ld32, ld32}, g, q);
            float col[2] = {};  // the lane's two columns c8 + 2 q + e % 2
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = acc_row(g, e), c = c8 + acc_col(q, 0, e);
                const float dl = c < r ? -DL[0][e] : 0.0f;
                col[e & 1] += dl * sg[r * ld16 + c];
                if (c < r) sl[r * ld16 + c] = sl[c * ld16 + r] = dl * sbeta[c];
                if (c == r) sl[r * ld16 + c] = 0.0f;
            }
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float x = col[e];
                x += __shfl_xor_sync(0xffffffffu, x, 4);
                x += __shfl_xor_sync(0xffffffffu, x, 8);
                x += __shfl_xor_sync(0xffffffffu, x, 16);
                if (g == 0) sdbeta_l[c8 + 2 * q + e] = x;
            }
        }
        __syncthreads();
        // 6. The columns 16 w .. 16 w + 15 of dQ = dO S0^T + dP K and of dK = W dS^T + dP^T Q + (dG +
        // dG^T) K - dR S0^T; then back through the L2 norms, whose row sums need both warps' halves.
        {
            float DQ[2][4] = {};
            loose_product<AR, DH / 8, 2>(DQ, GO, S0t_h, g, q);
            loose_product<AR, C / 8, 2>(DQ, PP, K_h, g, q);
            loose_product<AR, C / 8, 2>(DK, PT, Q_h, g, q);
            loose_product<AR, C / 8, 2>(DK, GS, K_h, g, q);
            loose_product<AR, DH / 8, 2>(DK, [sdr](int t, int c) { return -sdr[t * ld32 + c]; }, S0t_h, g, q);
            float dq[2], dk[2];
            row_dots(DQ, sq, half, g, q, dq);
            row_dots(DK, sk, half, g, q, dk);
            if (q == 0) {
                float* mine = sdots + 2 * C * w;
                mine[g] = dq[0], mine[g + 8] = dq[1], mine[C + g] = dk[0], mine[C + g + 8] = dk[1];
            }
            __syncthreads();  // both halves of the sums are there, and every product has read dO (each
                              // warp reads only its own columns of K)
            const float* other = sdots + 2 * C * (1 - w);
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = acc_row(g, e), c = half + acc_col(q, nt, e);
                    const float qdot = dq[e >> 1] + other[r], kdot = dk[e >> 1] + other[C + r];
                    sgo[r * ld32 + c] = (DQ[nt][e] - sq[r * ld32 + c] * qdot) * snorm[C + r];
                    sk[r * ld32 + c] = (DK[nt][e] - sk[r * ld32 + c] * kdot) * snorm[r];
                }
        }
        __syncthreads();
        // 7. Back through the SiLU and the conv; dzbeta (warp 1, which holds the logits), and head 0's
        // block zeroes the rows' columns past the logits (from d + 2 F d + F H to ldo, the padding up
        // to projection_rows: the bf16 input gradient of the projections sums over them; in fp32
        // nothing reads them).
        const float zb_before = before ? load_logit(t0 - TC, F * TC) : 0.0f;  // (loaded here: spills otherwise)
        // the SiLU outputs' gradients: dq in sgo, dk in sk, dv = dR in sdr (column 0 of both warps first);
        // warp 0 done with dq, it arrives at barrier 1, after which warp 1 writes the chunk before's dO
        auto release_dO = [&]() {
            if (w == 0 && before) asm volatile("bar.arrive 1, %0;" ::"n"(back_threads) : "memory");
        };
        if constexpr (F == 1) {  // warp 0 q, then v; warp 1 k
            conv_backward(Fs::backward_slot(w, 0), w == 0 ? sgo : sk, Fs::backward_factor(w, 0), t0, len, carry[0],
                          taps[0]);
            release_dO();
            if (w == 0)
                conv_backward(Fs::backward_slot(0, 1), sdr, Fs::backward_factor(0, 1), t0, len, carry[1], taps[1]);
        } else {  // one column at a time, carry and taps in local memory (unrolled: 240 bytes of spills at F = 4)
#pragma unroll 1
            for (int m = 0; m < Fs::backward_columns(w); ++m) {
                conv_backward(Fs::backward_slot(w, m), w == 1 ? sk : m == 0 ? sgo : sdr, Fs::backward_factor(w, m), t0,
                              len, carry[m], taps[m]);
                if (m == 0) release_dO();
            }
        }
        if (w == 1 && lane < rows_in) {
            const float sgm = sigmoidf(zb), db = (sdbeta_w[lane] + sdbeta_w[C + lane]) + sdbeta_l[lane];
            Out* row = dzbeta + (n0 + t0 + lane / F) * ldo;  // the row's token
            row[(lane % F) * H + h] = Out(db * s.beta_scale * sgm * (1.0f - sgm));
            if (h == 0 && lane % F == 0)  // row: dzbeta's, d + 2 F d columns into the row
                for (std::size_t c = s.F * H; c < ldo - (1 + 2 * s.F) * d; ++c) row[c] = Out(0.0f);
        }
        zb = zb_before;
    }
    // The taps' gradients of word b into its partial sums, [b][(1 + 2 F) d][K], as write_tap_grads lays them.
    auto write_taps = [&](int slot, const float (&tp)[KT]) {
        float* out = partials + (b * Fs::slots * d + slot * d + h * DH + lane) * s.K;
#pragma unroll
        for (int j = 0; j < KT; ++j)
            if (j >= pad) out[j - pad] = tp[j];
    };
    write_taps(Fs::backward_slot(w, 0), taps[0]);
#pragma unroll
    for (int m = 1; m < 1 + F; ++m)
        if (m < Fs::backward_columns(w)) write_taps(Fs::backward_slot(w, m), taps[m]);
    // the output norm's gain gradient of word b and head h into its partial sums, [b][d]
    __syncthreads();
    if (w == 0) {
        const float* other = tile + BackTiles::dgain + DH;
        gain_partials[b * d + h * DH + lane] = sdgain[lane] + other[lane];
    }
}

template <int KT, int F, class Out, Arithmetic AR, bool BT = false>
void launch_backward(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta, const float* u,
                     const float* final, const OutputNorm& on, Out* dpre, std::size_t ldo, float* partials,
                     float* gain_partials, Out* dzbeta, cudaStream_t stream) {
    constexpr std::size_t bytes = BackTiles::floats * sizeof(float);
    static_assert(bytes <= 48 * 1024, "more than a block gets without cudaFuncSetAttribute");
    delta_backward_chunked_kernel<KT, F, Out, AR, BT><<<unsigned(s.B * s.H), back_threads, bytes, stream>>>(
        s, pre, conv, zbeta, u, final, on, dpre, ldo, partials, gain_partials, dzbeta);
    check(cudaGetLastError(), "delta_backward_chunked");
}

// The kernels that read pre by token (DeltaShape::tokens) are built for the shape that takes them,
// the first layer of deltanet under --matmul bf16 (delta_chunks_read_by_token): 4 taps, one factor,
// the loose arithmetic, dpre in bf16.
template <int KT, int F, Arithmetic AR>
constexpr bool reads_by_token = KT == 4 && F == 1 && AR == Arithmetic::loose;

// f(taps, factors, arithmetic): the kernels' compile-time tap length KT, factor count F and Arithmetic
// for shape s, as std::integral_constant values: F 1, or 2 to 4 with KT 4 and the exact arithmetic
// (delta_runs_in_chunks; every instance adds ~3 s of nvcc).
template <class Launch>
void dispatch(const DeltaShape& s, Launch f) {
    using Exact = std::integral_constant<Arithmetic, Arithmetic::exact>;
    using Loose = std::integral_constant<Arithmetic, Arithmetic::loose>;
    const auto with_arithmetic = [&](auto taps, auto factors) {
        if constexpr (decltype(factors)::value == 1) {
            s.loose_arithmetic ? f(taps, factors, Loose{}) : f(taps, factors, Exact{});
        } else {  // deltaproduct:2 to :4 run exact under every --matmul (delta_shape in cuda_backend.cu)
            if (s.loose_arithmetic) throw std::logic_error("delta_chunked: deltaproduct:F has no loose kernels");
            f(taps, factors, Exact{});
        }
    };
    const auto with_factors = [&](auto taps) {
        if constexpr (decltype(taps)::value == 4) {
            if (s.F == 2) return with_arithmetic(taps, std::integral_constant<int, 2>{});
            if (s.F == 3) return with_arithmetic(taps, std::integral_constant<int, 3>{});
            if (s.F == 4) return with_arithmetic(taps, std::integral_constant<int, 4>{});
        }
        // the callers ask delta_runs_in_chunks first: any other F here would take the wrong layout
        if (s.F != 1) throw std::logic_error("delta_chunked: no chunked kernels for this factor count and taps");
        with_arithmetic(taps, std::integral_constant<int, 1>{});
    };
    conv_tap_length(s.K) == 4 ? with_factors(std::integral_constant<int, 4>{})
                              : with_factors(std::integral_constant<int, 8>{});
}

template <class Out>
bool backward_through_norm(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta, const float* u,
                           const float* final, const OutputNorm& on, Out* dpre, std::size_t ldo, float* dconv,
                           Out* dzbeta, float* dgain, const Partials& partials, const Partials& gain_partials,
                           cudaStream_t stream) {
    if (!delta_runs_in_chunks(s)) return false;
    if (s.tokens && !delta_chunks_read_by_token(s))
        throw std::logic_error("delta_chunked: pre by token on another shape");
    dispatch(s, [&](auto taps, auto factors, auto arithmetic) {
        constexpr int KT = decltype(taps)::value, F = decltype(factors)::value;
        constexpr Arithmetic AR = decltype(arithmetic)::value;
        if constexpr (reads_by_token<KT, F, AR> && std::is_same_v<Out, bf16>) {
            if (s.tokens) {
                launch_backward<KT, F, Out, AR, true>(s, pre, conv, zbeta, u, final, on, dpre, ldo, partials.scratch,
                                                      gain_partials.scratch, dzbeta, stream);
                return;
            }
        } else if (s.tokens) {
            throw std::logic_error("delta_chunked: no backward by token for dpre in fp32");
        }
        launch_backward<KT, F, Out, AR>(s, pre, conv, zbeta, u, final, on, dpre, ldo, partials.scratch,
                                        gain_partials.scratch, dzbeta, stream);
    });
    partials.sums->push_back({partials.scratch, s.B, delta_slots(s.F) * s.H * DH * s.K, dconv});
    gain_partials.sums->push_back({gain_partials.scratch, s.B, s.H * DH, dgain});
    return true;
}

// Whether the chunked kernels run here, asked once per device (sessions may run on several): this
// build's code for the device comes from sm_80 or later (binaryVersion, the code the device runs,
// and ptxVersion, the architecture it was compiled for: a build of older PTX only, compiled for an
// H100 at load time, has binaryVersion 90 and dmma's __trap), and the device runs FP64 at no less
// than half its FP32 rate (cudaDevAttrSingleToDoublePrecisionPerfRatio 2 on the A100, H100 and H200;
// 32 or 64 on the GeForce and workstation parts, where the FP64 products would be the slowest part
// of the step).
bool chunked_kernels_run() {
    static std::array<std::atomic<int>, 64> known{};  // 0 unknown, 1 runs, 2 does not
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= int(known.size())) return false;
    if (const int k = known[std::size_t(device)].load()) return k == 1;
    cudaFuncAttributes a{};
    int fp32_per_fp64 = 0;
    const auto probe = delta_forward_chunked_kernel<4, 1, false, Arithmetic::exact, false>;
    const bool runs = cudaFuncGetAttributes(&a, probe) == cudaSuccess &&
                      a.binaryVersion >= 80 && a.ptxVersion >= 80 &&
                      cudaDeviceGetAttribute(&fp32_per_fp64, cudaDevAttrSingleToDoublePrecisionPerfRatio, device) ==
                          cudaSuccess &&
                      fp32_per_fp64 <= 2;
    if (!runs) (void)cudaGetLastError();  // the fallback's launch check must not see this query's error
    known[std::size_t(device)].store(runs ? 1 : 2);
    return runs;
}

}  // namespace

bool delta_runs_in_chunks(const DeltaShape& s) {
    return s.chunks && (s.F == 1 || (s.F >= 2 && s.F <= 4 && s.K <= 4)) && s.dh == DH && chunked_kernels_run();
}

bool delta_chunks_read_by_token(const DeltaShape& s) {
    return delta_runs_in_chunks(s) && s.F == 1 && s.loose_arithmetic && conv_tap_length(s.K) == 4;
}

bool delta_forward_in_chunks(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta, float* o,
                             float* u, float* final, cudaStream_t stream) {
    if (!delta_runs_in_chunks(s)) return false;
    if (s.tokens && !delta_chunks_read_by_token(s))
        throw std::logic_error("delta_chunked: pre by token on another shape");
    dispatch(s, [&](auto taps, auto factors, auto arithmetic) {
        constexpr int KT = decltype(taps)::value, F = decltype(factors)::value;
        constexpr Arithmetic AR = decltype(arithmetic)::value;
        if constexpr (reads_by_token<KT, F, AR>) {
            if (s.tokens) {
                if (u) launch<KT, F, true, AR, true>(s, pre, conv, zbeta, o, u, final, stream);
                else launch<KT, F, false, AR, true>(s, pre, conv, zbeta, o, u, final, stream);
                return;
            }
        }
        if (u) launch<KT, F, true, AR>(s, pre, conv, zbeta, o, u, final, stream);
        else launch<KT, F, false, AR>(s, pre, conv, zbeta, o, u, final, stream);
    });
    return true;
}

bool delta_backward_through_norm(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta,
                                 const float* u, const float* final, const OutputNorm& on, float* dpre, float* dconv,
                                 float* dzbeta, float* dgain, const Partials& partials, const Partials& gain_partials,
                                 cudaStream_t stream) {
    return backward_through_norm(s, pre, conv, zbeta, u, final, on, dpre, s.ld, dconv, dzbeta, dgain, partials,
                                 gain_partials, stream);
}
bool delta_backward_through_norm(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta,
                                 const float* u, const float* final, const OutputNorm& on, bf16* dpre, std::size_t ldo,
                                 float* dconv, bf16* dzbeta, float* dgain, const Partials& partials,
                                 const Partials& gain_partials, cudaStream_t stream) {
    return backward_through_norm(s, pre, conv, zbeta, u, final, on, dpre, ldo, dconv, dzbeta, dgain, partials,
                                 gain_partials, stream);
}

}  // namespace statetrack::gpu::cuda
