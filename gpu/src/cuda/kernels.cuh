#pragma once
// Launchers of the CUDA backend's kernels (kernels.cu, recurrences.cu). Every array is fp32 (bf16
// where a signature says so) and row-major with an explicit row stride (ld) where it can be a
// column block of a wider array; rows are positions n = b * T + t of a batch. Each launcher
// enqueues on `stream` and checks the launch.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace statetrack::gpu::cuda {

using bf16 = __nv_bfloat16;  // the MLP's activations and weight copies under --matmul bf16

void check(cudaError_t status, const char* what);  // throws std::runtime_error with the CUDA message
#define STATETRACK_CUDA(call) ::statetrack::gpu::cuda::check((call), #call)
bool aligned16(const void* p);  // 16-byte aligned (or null), as the vectorised kernels' rows need
unsigned sm_count();            // the current device's SMs (asked once per device)
// The blocks of `kernel` (threads each, `bytes` of dynamic shared memory, allowed past the default
// 48 KiB) that fit an SM of the current device; 0 where the kernel cannot run there (its code not
// built for sm_80 or later, or the bytes past the device's limit). Asked once per device and shape.
int persistent_blocks_per_sm(const void* kernel, unsigned threads, std::size_t bytes, const char* what);

// Values that change every step, uploaded into the graph from pinned host memory.
struct StepParams {
    float count;                      // labelled positions of the batch
    float lr, decay, c1, c2;          // AdamW: rate, 1 - lr * wd, bias corrections
    float beta1, beta2, eps;
    double clip;                      // 0 = off
};
// Values the step computes, copied back to pinned host memory at its end.
struct StepResults {
    double loss_sum, grad_sq, correct;  // correct: labelled positions whose first argmax is the target
};

// ---- Sums over blocks in a fixed order. Every launcher below that sums over rows or words (gains,
// biases, the embedding, the taps) does not add atomically: its kernel writes one partial sum per
// block into its scratch, and add_partial_sums adds them in block order, so that the same step gives
// the same bits in every run. The backward pass collects its sums and adds them all at its end in one
// launch: they feed only the gradient norm and AdamW, and their eleven launches (~6.5 us each at
// T = 40, mostly latency) sat on the chain of input gradients. (The loss and the gradient norm, in
// doubles, have add_double_sum below.)
// One sum: out[i] += sum over p < parts of partials[p * width + i].
struct PartialSum {
    const float* partials;
    std::size_t parts, width;
    float* out;
};
// Where a launcher writes its partial sums (scratch: 16-byte aligned, at least its *_partials()
// floats, untouched until add_partial_sums has run, so a region of its own) and the list its sum
// joins.
struct Partials {
    float* scratch;
    std::vector<PartialSum>* sums;
};
// Floats rounded up to whole 256-byte blocks: a scratch region, or an array inside one, that keeps
// what follows it 16-byte aligned.
inline std::size_t partials_region(std::size_t floats) { return (floats + 63) / 64 * 64; }
// Every sum of the list in one launch per 32 sums.
void add_partial_sums(const std::vector<PartialSum>& sums, cudaStream_t stream);

// The residual stream's gradient dx (of the layers' inputs x) is fp32, or bf16 under --matmul bf16
// for the delta rules (Plan::grad16, cuda_backend.cu): the kernels that read or write it take D = float
// or bf16 (instantiated for both), and compute in fp32 either way. x itself stays fp32: in bf16 it
// took the logits 0.7-2.7e-2 from the fp64 reference, past the 2e-2 the issue sets (docs/PERFORMANCE.md,
// 2026-11-28).

void embed_forward(const std::int32_t* tokens, const float* table, float* x, std::size_t rows, std::size_t d,
                   cudaStream_t stream);
// dtable[token[n]] += dx[n] for every row.
template <class D>
void embed_backward(const std::int32_t* tokens, const D* dx, float* dtable, std::size_t rows, std::size_t d,
                    std::size_t vocab, const Partials& partials, cudaStream_t stream);
std::size_t embed_backward_partials(std::size_t rows, std::size_t d, std::size_t vocab);

// y = g * x * r per group of `group` columns, r = 1 / sqrt(mean(x^2) + eps). With y16, y is written
// there in bf16 instead (y unused; the vectorised layouts only: width a multiple of 4, at most 512).
void rmsnorm_forward(const float* x, const float* g, float* y, float* rinv, std::size_t rows, std::size_t width,
                     std::size_t group, cudaStream_t stream, bf16* y16 = nullptr);
// embed_forward and then rmsnorm_forward of x over whole rows (the first layer's norm), in one pass
// that does not read x back; false, launching nothing, where the rows are not the vectorised layout.
// With y16, y is written there in bf16 instead (as rmsnorm_forward's). x null: x is not written
// (its readers take the table's rows by token: first_layer_by_token).
bool embed_and_norm(const std::int32_t* tokens, const float* table, float* x, const float* g, float* y, float* rinv,
                    std::size_t rows, std::size_t d, cudaStream_t stream, bf16* y16 = nullptr);
// dx (+)= r g dy - x r^3 sum(g dy x) / group (accumulate or overwrite); dg += sum_n dy x r. dx16
// (optional, vectorised layouts only, null for a bf16 dx) receives a bf16 copy of the new dx. A bf16
// dx (D): the vectorised layouts only.
// Accumulating, the value added to is `before` where given (another array of dx's shape, or dx
// itself), else dx: the backward writes each layer's dx into the other of two arrays, so that the
// side stream's products may still read the one before (cuda_backend.cu, backward_pass).
template <class D>
void rmsnorm_backward(const float* x, const float* g, const float* rinv, const float* dy, D* dx, float* dg,
                      std::size_t rows, std::size_t width, std::size_t group, bool accumulate,
                      const Partials& partials, cudaStream_t stream, bf16* dx16 = nullptr,
                      const D* before = nullptr);
std::size_t rmsnorm_backward_partials(std::size_t rows, std::size_t width);

// The first layer's norm backward (group = width) where dx is for the embedding only: dx's new
// value (dx read where accumulating, never written) summed per letter into dtable (+=, the partial
// sums in embed_partials, rmsnorm_backward_embed_partials floats), as embed_backward would from it.
// Only where rmsnorm_backward_embeds (the row kernels' layouts, and the letters' tables in shared memory).
bool rmsnorm_backward_embeds(std::size_t rows, std::size_t width, std::size_t vocab);
std::size_t rmsnorm_backward_embed_partials(std::size_t rows, std::size_t width, std::size_t vocab);
template <class D>
void rmsnorm_backward_into_embedding(const float* x, const float* g, const float* rinv, const float* dy, const D* dx,
                                     float* dg, const std::int32_t* tokens, float* dtable, std::size_t rows,
                                     std::size_t width, std::size_t vocab, bool accumulate, const Partials& partials,
                                     const Partials& embed_partials, cudaStream_t stream);

// y[n][:] += bias; out[c] += sum_n y[n][c] (bias gradients); y's rows ld apart.
void add_bias(float* y, std::size_t ld, const float* bias, std::size_t rows, std::size_t cols, cudaStream_t stream);
void column_sums(const float* y, std::size_t ld, float* out, std::size_t rows, std::size_t cols,
                 const Partials& partials, cudaStream_t stream);
std::size_t column_sums_partials(std::size_t rows, std::size_t cols);

// SwiGLU on gu = [gate | up] ([rows][2m]): h = silu(gate) * up; and its backward into dgu.
void swiglu_forward(const float* gu, float* h, std::size_t rows, std::size_t m, cudaStream_t stream);
void swiglu_backward(const float* gu, const float* dh, float* dgu, std::size_t rows, std::size_t m,
                     cudaStream_t stream);
// The same in bf16 storage (fp32 arithmetic; m a multiple of 4).
void swiglu_forward(const bf16* gu, bf16* h, std::size_t rows, std::size_t m, cudaStream_t stream);
void swiglu_backward(const bf16* gu, const bf16* dh, bf16* dgu, std::size_t rows, std::size_t m, cudaStream_t stream);
// The products of our own below (fused_products.cu) all take their sizes as (rows, the product's
// depth, its output's width): (rows, d, m) for the MLP's backward, whose product sums over d_model
// into m columns, (rows, m, d) or (rows, k, d) for the others.
// The MLP's backward in one kernel: dgu ([rows][2m], bf16) = SwiGLU's backward at gu of dh = dy
// w_down, with dy [rows][d] and w_down [d][m] in bf16 and dh kept in fp32. On Hopper, for d 64 or 128
// and m a multiple of 128 whose w_down fits one block's shared memory (m up to 768 at d 128), the
// warpgroup kernel runs (sm90a/mlp_wgmma.cu); elsewhere or without `warpgroups` mma.sync's
// (fused_products.cu), for d a multiple of 16, m of 8 and two blocks an SM with the weight in each
// one's shared memory. False (nothing launched) where neither fits (or the arrays are not 16-byte
// aligned): then the product and swiglu_backward run apart. dgu must not overlap gu or dy.
bool mlp_down_backward(const bf16* dy, const bf16* w_down, const bf16* gu, bf16* dgu, std::size_t rows, std::size_t d,
                       std::size_t m, cudaStream_t stream, bool warpgroups = true);
// The MLP's forward in one kernel (mlp_forward_kernel, fused_products.cu): gu ([rows][2m], bf16) =
// xn w_gu^T rounded to bf16, h = SwiGLU(gu) ([rows][m], bf16, computed from those values with
// sigmoid_fast, as mlp_down_backward's SwiGLU: within 2^-14 of swiglu_forward's before the rounding)
// and y ([rows][d], fp32) = r + h w_down^T, with xn [rows][d], w_gu [2m][d] (the gate's rows, then
// the up's) and w_down [d][m] in bf16, fp32 accumulation; gu and h are written unless null. False
// (nothing launched) where the shape does not fit it (d 64 or 128, m a multiple of 64, both weights
// within one block's shared memory: m up to 256 at d 128, 16-byte aligned arrays) or the rows are
// fewer than min_rows: then the gate/up product and mlp_down_forward run apart. y must not overlap r
// or xn.
// On Hopper the warpgroup kernel runs (sm90a/mlp_wgmma.cu), elsewhere or without `warpgroups`
// mma.sync's (fused_products.cu); the same values but for the sums' order.
bool mlp_forward(const bf16* xn, const bf16* w_gu, const bf16* w_down, const float* r, bf16* gu, bf16* h, float* y,
                 std::size_t rows, std::size_t d, std::size_t m, std::size_t min_rows, cudaStream_t stream,
                 bool warpgroups = true);
// Whether mlp_forward takes the warpgroup kernel for this shape on the current device.
bool mlp_forward_has_warpgroups(std::size_t d, std::size_t m);
// mlp_down_backward with gu recomputed from xn, so that the forward need not write it
// (sm90a/mlp_wgmma.cu): gate and up are rebuilt as mlp_forward's warpgroup kernel computes them, the
// same bits, then dgu as mlp_down_backward's warpgroup kernel computes it (the same bits again, for m
// a multiple of 128). Hopper only, for the shapes mlp_recomputes_gu accepts (d 64 or 128, m a multiple
// of 64, both weights within one block's shared memory: m up to 256 at d 128), 16-byte aligned
// arrays. False (nothing launched) elsewhere. dgu must not overlap dy or xn.
bool mlp_down_backward_from_xn(const bf16* dy, const bf16* xn, const bf16* w_gu, const bf16* w_down, bf16* dgu,
                               std::size_t rows, std::size_t d, std::size_t m, cudaStream_t stream);
// The MLP's whole backward from dy to its norm's input in one kernel (sm90a/mlp_wgmma.cu, Hopper, d
// 128): dgu as mlp_down_backward_from_xn writes it (the same bits), and the MLP norm's backward of dxn
// = dgu w_gu added to `before`, as norm_backward_product(dgu, 2m, w_gu, x, gain, rinv, dx, nullptr, dg,
// rows, 2m, d, true, ..., before) computes it in another order of its sums: dx = before + r g dxn - x
// r^3 sum(g dxn x) / d in bf16, the gain's gradient into dg through `partials` (rmsnorm_backward's
// region holds them). dgu's read back and dxn's never exist. False (nothing launched) where it does not
// run: then those two kernels do. dx must not overlap before.
struct MlpNormBackward {
    const float* x;     // the norm's input [rows][d]
    const float* gain;  // [d]
    const float* rinv;  // [rows]
    const bf16* before; // [rows][d]
    bf16* dx;           // [rows][d]
    float* dg;          // [d]: the gain's gradient, added to
};
bool mlp_backward_through_norm(const bf16* dy, const bf16* xn, const bf16* w_gu, const bf16* w_down, bf16* dgu,
                               const MlpNormBackward& norm, std::size_t rows, std::size_t d, std::size_t m,
                               const Partials& partials, cudaStream_t stream);
// Whether mlp_down_backward_from_xn runs for this shape on the current device (and mlp_forward's
// warpgroup kernel, whose gu it rebuilds, does too).
bool mlp_recomputes_gu(std::size_t d, std::size_t m);
// The MLP's down projection from [gate | up] in one kernel (residual_forward_kernel,
// fused_products.cu): y ([rows][d], fp32) = r + h w_down^T with h = SwiGLU(gu) ([rows][m], bf16,
// computed as swiglu_forward does and also written to h unless h is null), w_down [d][m] bf16, fp32
// accumulation. False (nothing launched) where the shape does not fit it (as mlp_down_backward) or
// the rows are fewer than min_rows: then swiglu_forward and the residual product run apart. y must
// not overlap r, gu or h.
bool mlp_down_forward(const bf16* gu, const bf16* w_down, const float* r, bf16* h, float* y, std::size_t rows,
                      std::size_t m, std::size_t d, std::size_t min_rows, cudaStream_t stream);
// The same kernel's other form: y = r + x w^T (x [rows][k] bf16, k a multiple of 16; w [d][k] bf16;
// r and y [rows][d] fp32), then the RMSNorm of y over its d columns as rmsnorm_forward computes it:
// xn = gain y rinv in bf16 and rinv per row. False (nothing launched) where the shape does not fit
// or the rows are fewer than min_rows: then the residual product and rmsnorm_forward run apart. y,
// xn and rinv must not overlap each other, r or x. At d 128 and k 128 it runs on Hopper's warpgroup
// products (sm90a/norm_wgmma.cu, residual_norm_wgmma) unless `warpgroups` is false; the same formulas,
// the sums in another order. With r_tokens, r is a table and row n's residual its row r_tokens[n]
// (the first layer's, the embedding's): the warpgroup kernel only, else false.
bool residual_norm_forward(const bf16* x, const bf16* w, const float* r, float* y, const float* gain, bf16* xn,
                           float* rinv, std::size_t rows, std::size_t k, std::size_t d, std::size_t min_rows,
                           cudaStream_t stream, bool warpgroups = true, const std::int32_t* r_tokens = nullptr);
// Whether the first layer's x (the embedding's rows by token) may go unwritten at these shapes: the
// kernels that would read it take the table's rows by token instead, residual_norm_forward's
// warpgroup kernel (d 128, k d) and, training, norm_backward_product's by letters (K 385 to 448, vocab
// at most 8); both have code and room on this device.
bool first_layer_by_token(std::size_t d, std::size_t K, std::size_t vocab, bool training);
// The input gradient of a product that feeds an RMSNorm, and the norm's backward, in one kernel
// (fused_products.cu): dxn = dy w (dy [rows][k] bf16, rows ldy apart; w [k][d] bf16, as the
// parameters hold a [k][d] product's weight), fp32 sums, never stored; then over whole rows of d as
// rmsnorm_backward computes it from x, gain and rinv: dx (+)= r g dxn - x r^3 sum(g dxn x) / d, dx16
// (unless null) its bf16 copy, and the gain's gradient into dg through `partials`
// (rmsnorm_backward_partials(rows, d) floats). False (nothing launched) where the shape does not fit
// (d 32, 64 or 128; k and ldy multiples of 8; 16-byte aligned arrays; two blocks an SM) or the rows
// are fewer than min_rows: then the product and rmsnorm_backward run apart. dx and dx16 must not
// overlap dy, w or x. dx: the residual stream's gradient type D (dx16 null for a bf16 dx).
// Accumulating, the value added to is `before` where given, as rmsnorm_backward's.
// With `letters` (the first layer's norm, whose dx is for the embedding only, as
// rmsnorm_backward_into_embedding): dx's new value is not written but summed per letter into
// letters.table (+=, through letters.partials: rmsnorm_backward_embed_partials(rows, d, vocab)
// floats); dx16 must be null, and vocab at most 8 (else false).
// A bf16 dx added to a `before` of its own at d 128 and K 385 to 448 (the delta rule's projections)
// runs on Hopper's warpgroup products (sm90a/norm_wgmma.cu, norm_backward_wgmma) unless `warpgroups`
// is false; the same formulas, the sums in another order. With letters it does so only where
// letters.embedding is given: x's rows are then read from it by token, and x may be null (false where
// that kernel does not run).
struct LetterSums {
    const std::int32_t* tokens = nullptr;  // [rows], each < vocab; null: dx is written
    std::size_t vocab = 0;
    float* table = nullptr;  // [vocab][d]: the embedding's gradient
    Partials partials{};
    // [vocab][d], or null: the embedding itself, where x's row is its row of the row's token (the
    // first layer's input)
    const float* embedding = nullptr;
};
template <class D>
bool norm_backward_product(const bf16* dy, std::size_t ldy, const bf16* w, const float* x, const float* gain,
                           const float* rinv, D* dx, bf16* dx16, float* dg, std::size_t rows, std::size_t k,
                           std::size_t d, bool accumulate, std::size_t min_rows, const Partials& partials,
                           cudaStream_t stream, const LetterSums& letters = {}, const D* before = nullptr,
                           bool warpgroups = true);
// The rows from which the forward kernels and norm_backward_product are faster than the kernels they
// replace: 32 tiles of 16 rows an SM (16 a block for mlp_down_forward's two blocks an SM, 8 for
// residual_norm_forward's four; two of norm_backward_product's 128-row tiles a block). H100, at the
// paper's sizes (docs/PERFORMANCE.md, twelfth and thirteenth sessions): mlp_down_forward 281 us
// against swiglu_forward and cuBLAS's 305 a layer at 262,144 rows (62 tiles a block), no gain at
// 40,960 (10), 2% of the step slower on training's packed batches (~5); norm_backward_product 280
// us against 358 at 262,144 rows, 55 against 55 at 40,960. Counted on the current device's SMs.
std::size_t fused_products_rows();
// y = x rounded to bf16 (nearest even), for the weight copies of --matmul bf16; and of rows, ld apart
// (the gradients of the projections where a recurrence's backward writes them in fp32), y's columns
// cols .. ldy - 1 zero.
void to_bf16(const float* x, bf16* y, std::size_t count, cudaStream_t stream);
void to_bf16(const float* x, std::size_t ldx, bf16* y, std::size_t ldy, std::size_t rows, std::size_t cols,
             cudaStream_t stream);

// a[b T + t][c] = 0 for t >= lengths[b] and c < cols (rows ld apart): the recurrences' outputs, and in
// the backward their input gradients, past each word's end (Batch; the kernels stop there).
void zero_past_lengths(float* a, std::size_t ld, std::size_t cols, std::size_t B, std::size_t T,
                       const std::int32_t* lengths, cudaStream_t stream);

// a[n][c] = 0 for rows n from the end of the last of B packed words (offsets[B - 1] + lengths[B -
// 1]) to N, c < cols: a packed batch's rows after its words (Batch), which no recurrence writes.
void zero_past_packed_words(float* a, std::size_t ld, std::size_t cols, std::size_t N, std::size_t B,
                            const std::int32_t* offsets, const std::int32_t* lengths, cudaStream_t stream);
void zero_past_packed_words(bf16* a, std::size_t ld, std::size_t cols, std::size_t N, std::size_t B,
                            const std::int32_t* offsets, const std::int32_t* lengths, cudaStream_t stream);

// Mean cross-entropy pieces: results->loss_sum += sum of -log p(target); dlogits = (p - onehot) / count;
// results->correct += labelled rows whose first maximum is the target.
void cross_entropy(const float* logits, const std::int32_t* targets, float* dlogits, const StepParams* params,
                   StepResults* results, std::size_t rows, std::size_t classes, float* partials, cudaStream_t stream);
// The partials (in floats) of cross_entropy and of gradient_square_sum.
std::size_t step_results_partials();

// The head of a training step in one kernel: the final RMSNorm of x (gain g), the logits (w:
// [classes][d], bias), the cross-entropy against targets as cross_entropy, and back: dx (type D; and
// dx16, if given, for a float dx) overwritten with the gradient of x, dw, dbias and dg (+=) by partial sums in `partials`
// (head_step_partials floats), the loss and correct count into results by loss_partials
// (step_results_partials floats). Only where head_step_fits; the logits are not kept.
bool head_step_fits(std::size_t d, std::size_t classes);
std::size_t head_step_partials(std::size_t rows, std::size_t d, std::size_t classes);
template <class D>
void head_step(const float* x, const float* g, const float* w, const float* bias, const std::int32_t* targets,
               const StepParams* params, StepResults* results, D* dx, bf16* dx16, float* dw, float* dbias,
               float* dg, std::size_t rows, std::size_t d, std::size_t classes, const Partials& partials,
               double* loss_partials, cudaStream_t stream);

// A step in two halves of its batch (cuda_backend.cu): the second half's gradients and its loss and
// correct counts added into the first's, element by element (the same bits every run).
void add_half_step(float* grads, const float* half_grads, std::size_t count, StepResults* results,
                   const StepResults* half_results, cudaStream_t stream);

// results->grad_sq += sum g^2; then AdamW over every parameter (decay_mask: 1 where weight decay
// applies), which also copies the step's results to to_host (pinned host memory, which the device
// writes directly; null: no copy) and writes the new weights rounded to bf16 (nearest even, as
// to_bf16) into w16 (--matmul bf16's copy; null: none).
void gradient_square_sum(const float* grads, StepResults* results, std::size_t count, float* partials,
                         cudaStream_t stream);
void adamw(const StepParams* params, const StepResults* results, const std::uint8_t* decay_mask, float* w,
           float* g, float* m, float* v, std::size_t count, cudaStream_t stream, StepResults* to_host = nullptr,
           bf16* w16 = nullptr);

// LSTM cell at step t (rows b * T + t): z holds pre-activations [4d] (i, f, g, o) on entry and the
// activations on exit; c, h the cell and hidden state; hprev[n + 1] = h[n] (row t + 1) for dWh.
void lstm_cell_forward(float* z, float* c, float* h, float* hprev, std::size_t B, std::size_t T, std::size_t t,
                       std::size_t d, cudaStream_t stream);
// Reverse step t: dh = dH[n] + dh_next[b]; writes dz; dc_next[b] = dc * f (dh_next comes from a GEMM).
void lstm_cell_backward(const float* z, const float* c, const float* dH, const float* dh_next, float* dc_next,
                        float* dz, std::size_t B, std::size_t T, std::size_t t, std::size_t d, cudaStream_t stream);

// ---- recurrences (recurrences.cu); dh must be one of cuda_head_dims ----
// Whether the step-by-step recurrences can run on packed words (Batch): a warp holds 32 / dh
// consecutive (word, head) groups, so where 32 / dh divides H they are heads of one word and the
// warp stops at that word's end, not in the next word's rows (head_dim 32: a group a warp; 16 with
// an even number of heads; 8 with H a multiple of 4; 4 with H a multiple of 8). The chunked kernels
// take a word a warp.
inline bool recurrences_pack(std::size_t dh, std::size_t H) { return dh && 32 % dh == 0 && H % (32 / dh) == 0; }
// A delta rule's convolved columns per (head, key index): q, and k and v of each of F factors (the
// lanes' staged columns in recurrences.cu, their columns in delta_chunked.cu, the taps' partial sums).
__host__ __device__ constexpr std::size_t delta_slots(std::size_t F) { return 1 + 2 * F; }

struct DeltaShape {
    std::size_t B, T, H, dh, F;  // d = H * dh
    std::size_t K;               // taps of the short conv before the recurrence
    float beta_scale;
    // The row stride of pre and zbeta, and in the backward of dpre and dzbeta: the projections and
    // the beta logits are one product's output, [N][ld] = [q | k | v | zbeta] (ld >= d + 2 F d + F H:
    // the session pads the rows to projection_rows).
    std::size_t ld;
    bool chunks = true;  // the chunked kernels where they run (delta_chunked.cu); false: step by step
    // [B] each word's length (device memory; null: every word T long). The step-by-step kernels stop
    // at the longest word of their warp; the chunked ones run to T in a padded batch (the padding's
    // gradients are exact zeros anyway) and to each word's end in a packed one (offsets). Past a
    // word's end zero_past_lengths then writes 0 (Batch).
    const std::int32_t* lengths = nullptr;
    // [B] the row of each word's first token where the words are packed, one after the other with no
    // padding (training steps where recurrences_pack, Batch): lengths is then given too, and the kernels stop
    // at each word's end (the step-by-step ones run a warp to its longest word, there the heads of
    // one word). Null: word b at rows b T .. b T + T - 1.
    const std::int32_t* offsets = nullptr;
    // --matmul tf32 and bf16, whose products round anyway: the chunked kernels take the SiLU's
    // exponential by __expf (within 2 ulp, the forward and the backward's recomputation alike) and
    // the products the state never takes (the forward's into the outputs, the backward's into
    // gradients) on the TF32 tensor cores. The state's products are exact either way. false
    // (--matmul fp32, and deltaproduct:2 to :4 under every --matmul): the IEEE expf and FP64 products
    // throughout.
    bool loose_arithmetic = false;
    // Tests (CudaOptions::poison): the chunked kernels fill their shared-memory tiles with NaN before
    // they start, so that a tile row read before it is written shows in their outputs.
    bool poison_tiles = false;
    // [N] or null: pre and zbeta are tables whose row tokens[n] holds row n's values (the first
    // layer's projections, which depend on the token only: the session's Plan::x0_by_token), and
    // whose row zero_token is zeros (read for the conv's rows outside a word). The chunked kernels
    // only, where delta_chunks_read_by_token: the others refuse it.
    const std::int32_t* tokens = nullptr;
    std::int32_t zero_token = 0;
};
// The delta rules with their inputs' short causal conv + SiLU fused in. pre: [N][ld], its first d +
// 2 F d columns the projections [q | k (factor j, head h at (j H + h) dh) | v] before the conv;
// conv: their taps [d + 2 F d][K]; zbeta: F H columns of the same rows; o: [N][d]. Training (u,
// final not null) keeps u = v - S^T k per factor ([N][F d]) and the state per (b, h) after the
// kernel's last step (the warp's longest word, or T where the chunked kernels run): the backward
// starts from it.
void delta_forward(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta, float* o, float* u,
                   float* final, cudaStream_t stream);
// The same forward in chunks of 16 steps, its products on the FP64 tensor cores (delta_chunked.cu; the
// SiLU's exponential by __expf and the products into the outputs on the TF32 tensor cores with
// s.loose_arithmetic), for head_dim 32 and one factor (deltanet), or two to four with at most 4 conv
// taps (deltaproduct:2 to :4), on a GPU of sm_80 or later with FP64 at half the FP32 rate (A100,
// H100, H200); returns false, launching nothing, for other shapes and GPUs and where s.chunks is
// false.
bool delta_forward_in_chunks(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta, float* o,
                             float* u, float* final, cudaStream_t stream);
// One reverse pass that rebuilds S_{t-1} = S_t - beta k u^T, step by step. Out: dpre (the
// projections' gradient, through the L2 norms, the SiLU and the conv), dconv (+=, summed over the
// words in a fixed order), dzbeta. (Where the chunked kernels run, delta_backward_through_norm.)
void delta_backward(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta, const float* u,
                    const float* final, const float* dO, float* dpre, float* dconv, float* dzbeta,
                    const Partials& partials, cudaStream_t stream);
// Whether delta_forward_in_chunks and delta_backward_through_norm run for this shape on the current
// device: s.chunks, head_dim 32 with one factor or two (at most 4 taps), and a GPU they run on (only F,
// K, dh and chunks are read).
bool delta_runs_in_chunks(const DeltaShape& s);
// Whether they take pre and zbeta by token (DeltaShape::tokens) for this shape: deltanet (one factor)
// with at most 4 taps and the loose arithmetic (--matmul bf16), dpre in bf16, where they run.
bool delta_chunks_read_by_token(const DeltaShape& s);
// The mixer's output norm, an RMSNorm of o per head (reciprocals rinv [N][H], gain [d]), and the
// gradient of its output, dOn ([N][d]).
struct OutputNorm {
    const float *o, *dOn, *rinv, *gain;
};
// The backward in chunks of 16 steps (delta_chunked.cu), where delta_forward_in_chunks runs: each
// chunk's starting state rebuilt on the FP64 tensor cores as the forward computed it, the products
// into gradients there too or, with s.loose_arithmetic, on the TF32 ones. The output norm's backward
// is inside it (dO = rmsnorm_backward's, never stored): out dpre, dconv and dgain (+=, through
// partial sums: delta_backward_partials, and B * d for the gain), dzbeta. Returns false, launching nothing, elsewhere.
bool delta_backward_through_norm(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta,
                                 const float* u, const float* final, const OutputNorm& on, float* dpre, float* dconv,
                                 float* dzbeta, float* dgain, const Partials& partials, const Partials& gain_partials,
                                 cudaStream_t stream);
// The same with dpre and dzbeta in bf16, rows ldo apart: --matmul bf16's projections take them as
// operands with no conversion pass.
bool delta_backward_through_norm(const DeltaShape& s, const float* pre, const float* conv, const float* zbeta,
                                 const float* u, const float* final, const OutputNorm& on, bf16* dpre, std::size_t ldo,
                                 float* dconv, bf16* dzbeta, float* dgain, const Partials& partials,
                                 const Partials& gain_partials, cudaStream_t stream);
std::size_t delta_backward_partials(const DeltaShape& s);

// Bytes of shared memory per block (static and dynamic) that the recurrence kernels need at most,
// forward or backward: the delta rules with F factors, the diagonal recurrence, each with K taps.
std::size_t delta_shared_bytes(std::size_t F, std::size_t K);
std::size_t diagonal_shared_bytes(std::size_t K);

struct DiagonalShape {
    std::size_t B, T, H, dh;
    std::size_t K;  // taps of the short conv before the recurrence
    bool signed_range;
    std::size_t ld;  // the row stride of pre, zdt, dpre and dzdt, as DeltaShape's ([q | k | v | zdt]: 4 d)
    const std::int32_t* lengths = nullptr;  // as DeltaShape's
    const std::int32_t* offsets = nullptr;  // as DeltaShape's (packed: where recurrences_pack)
};
#ifdef __CUDACC__
// The steps the recurrences take for word b (Batch: they stop at its end).
template <class Shape>
__device__ inline std::size_t word_steps(const Shape& s, std::size_t b) {
    return s.lengths ? std::size_t(__ldg(s.lengths + b)) : s.T;
}
// Word b's first row: b T, or where the words are packed (offsets, Batch) its offset; the rows
// past its end are then the next word's, so the kernels must stop there (the step-by-step ones run a
// warp to its longest word: packed batches come only where a warp's groups are one word's heads,
// recurrences_pack).
template <class Shape>
__device__ inline std::size_t first_row(const Shape& s, std::size_t b) {
    return s.offsets ? std::size_t(__ldg(s.offsets + b)) : b * s.T;
}
#endif
// The diagonal recurrence with the conv + SiLU of its inputs fused in, as for the delta rules.
// pre: [N][ld], its first 3 d columns [q | k | v] before the conv; conv: [3 d][K]; zdt: d columns of
// the same rows, the dt logits before their bias (bias: [d]), which the kernels add: a pass of its own
// over the logits took 140 us a layer at T = 256, and the column sums of its gradient 79 us (H100);
// decay_log: [d]. Training (saved not null) keeps the state after every second step in `saved`
// (diagonal_saved_floats floats).
std::size_t diagonal_saved_floats(const DiagonalShape& s);
void diagonal_forward(const DiagonalShape& s, const float* pre, const float* conv, const float* zdt, const float* bias,
                      const float* decay_log, float* o, float* saved, cudaStream_t stream);
// Recomputes the state between two checkpoints. Out: dpre, dconv (+=), dzdt, dbias (+=), ddecay_log
// (+=); the += sums over the words in a fixed order.
void diagonal_backward(const DiagonalShape& s, const float* pre, const float* conv, const float* zdt, const float* bias,
                       const float* decay_log, const float* saved, const float* dO, float* dpre, float* dconv,
                       float* dzdt, float* dbias, float* ddecay_log, const Partials& partials, cudaStream_t stream);
std::size_t diagonal_backward_partials(const DiagonalShape& s);

}  // namespace statetrack::gpu::cuda
