// The CUDA backend's host side: the device workspace plan, forward_pass / backward_pass in the
// order of cpu_backend.cpp (with the q, k, v projections and the SwiGLU gate and up projections
// each done as one wider operation, since their weights are adjacent in the parameter buffer; the
// short convolutions of q, k, v inside the recurrence kernels), cuBLAS products, and the CUDA graph
// of a whole training step.
// (No fmt here: nvcc rejects fmt 9's compile-time format strings.)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <cstdio>

#include "kernels.cuh"
#include "statetrack/automata/error.hpp"
#include "statetrack/gpu/cuda_backend.hpp"

namespace statetrack::gpu {

using namespace cuda;

namespace {

void check_blas(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string("cuBLAS: ") + what + ": " + cublasGetStatusString(status));
}
#define STATETRACK_BLAS(call) check_blas((call), #call)

[[noreturn]] void unavailable(const std::string& why) { throw InputError("--device", "cuda", why); }

// Offsets (in floats) of the activations of one batch shape inside the workspace.
struct LayerActs {
    std::size_t xn1, r1, pre, saved, final, o, ro, on;  // linear-attention mixers (pre: [q | k | v | gate logits])
    std::size_t z, c, h, hprev;                                   // lstm
    std::size_t x_mid, xn2, r2, gu, hm;
};
struct Plan {
    std::size_t B, T, N, d, H, dh, F, m, C, K, qkv, gw;
    std::size_t proj;  // qkv + gw: the mixer's projections and gate logits, one product's row
    // The row stride of pre, dpre and dpre16: proj rounded up to projection_rows (the device's
    // [wq; wk; wv; gate] has that many rows, zeros past proj: GateSlot::after_values), so that the
    // forward product writes whole rows of 16-byte multiples (cuBLAS then takes its sm90 kernels).
    std::size_t ldp;
    bool training;
    // A training step's final norm, head and loss in one kernel (head_step, where it fits): no xnf,
    // rf, logits or dlogits then.
    bool head_fused;
    bool mlp16;  // --matmul bf16: xn2, gu, hm and their gradients hold bf16 (in their float slots)
    // A training step's MLP backward rebuilds gate and up from xn2 (mlp_down_backward_from_xn, Hopper,
    // CudaOptions::recompute_gate_up): the forward writes no gu and the plan holds none (134 MB a layer
    // at T = 256 on half a batch).
    bool recompute_gate_up;
    // The first layer's x, the embedding's rows by token, is not written (its array stays, unread): the
    // kernels that would read it take the table's rows by token instead (first_layer_by_token: the
    // output product's residual and, training, the first norm's backward by letters). 67 MB written
    // and 67 MB read back a layer at T = 256 on half a batch.
    bool x0_by_token;
    // --matmul bf16 with a delta rule (deltanet, deltaproduct:N): its projections take bf16 operands
    // as the MLP's do, xn1 and on hold bf16 (in their float slots), the projections' gradient [dq | dk |
    // dv | dz] is in dpre16, rows ldp apart (the columns past proj zero: its input gradient's product
    // sums over all ldp): s1 where the chunked backward writes it (s1 is free then), a region of its own where
    // the step-by-step kernels' fp32 rows in s1 are converted into it. Not mamba's: its decays,
    // exponentials of the gate logits, took the bf16 rounding of its projections' inputs to logits
    // 2.2-2.7e-2 from the fp64 reference on two of four random instances, past the 2e-2 the issue
    // sets (test Bf16MatchesCpuReferenceLoosely, H100, 2026-11-26).
    bool proj16;
    // proj16 with d_model a multiple of 8 up to 512 (the row kernels' layout, 16-byte bf16 rows): dx,
    // the residual stream's gradient, in bf16 (in its float slot, half used), the products' operand
    // itself (no dx16 copy then). In fp32 with its bf16 copy, dx was ~2.5 KB of a row's reads and
    // writes a layer at d 128 (docs/PERFORMANCE.md, 2026-11-28). x itself stays fp32 (kernels.cuh).
    bool grad16;
    std::size_t dpre16;
    std::vector<std::size_t> x;
    std::vector<LayerActs> layers;
    std::size_t xnf, rf, logits, dlogits;
    // dx, the residual stream's gradient, in two arrays: each norm's backward reads one and writes the
    // other, so that the weight gradients on the side stream still reading the first need not be
    // joined first (backward_pass)
    std::array<std::size_t, 2> dx;
    std::size_t dxn, s1, s2, dh_next, dc_next;
    std::size_t dO;  // the mixers' output gradient: not in s2, which the MLP's wgate gradient may still read
    std::array<std::size_t, 2> dx16;  // bf16 copies of dx (mlp16, not grad16): the MLP's operand, and wo's (proj16)
    // Packed (Batch): the words one after the other in N >= the sum of their lengths rows, no padding
    // between them (training steps where recurrences_pack: cuda_packs_words); otherwise word b at rows b T ..
    // and N = B T.
    bool packed;
    std::size_t partials;         // the fixed-order sums' scratch (kernels.cuh): see make_plan
    std::size_t total = 0;
};

// The recurrences' shapes for this plan's batch (the forward, the backward and the plan's scratch).
// lengths: the batch's word lengths in the workspace (null where only the sizes are asked).
DeltaShape delta_shape(const Plan& p, const ModelConfig& c, const CudaOptions& options = {},
                       const std::int32_t* lengths = nullptr, const std::int32_t* offsets = nullptr) {
    // DeltaShape::loose_arithmetic, with one factor a token (deltanet): deltaproduct:2 learned parity
    // less often in chunks with it (7 of 29 runs against 14 of 29 step by step; with the exact
    // arithmetic 8 of 19 against 10 of 19: docs/training.md, 2026-11-27, sixteenth session), so its
    // chunks stay exact
    const bool loose = options.matmul != MatmulPrecision::fp32 && p.F == 1;
    return {p.B, p.T, p.H, p.dh, p.F, p.K, float(c.beta_scale()), p.ldp, options.chunked, lengths,
            p.packed ? offsets : nullptr, loose, options.poison};
}
DiagonalShape diagonal_shape(const Plan& p, const ModelConfig& c, const std::int32_t* lengths = nullptr,
                             const std::int32_t* offsets = nullptr) {
    return {p.B, p.T, p.H, p.dh, p.K, c.eig == EigRange::signed_unit, p.ldp, lengths, p.packed ? offsets : nullptr};
}

// Whether layer l's projections are a table of the letters' rows that the delta kernels read by token
// (DeltaShape::tokens): the first layer's where its x is the embedding's rows (Plan::x0_by_token) and
// the chunked kernels take it (delta_chunks_read_by_token: deltanet under --matmul bf16). Its rows of
// pre depend on the token only, so the [N][ldp] product (67 us a half batch at T = 256, 205 MB
// written) becomes one of vocab rows, and the kernels' row loads hit L1.
bool pre_by_token(const Plan& p, std::size_t l, const DeltaShape& shape) {
    return l == 0 && p.x0_by_token && delta_chunks_read_by_token(shape);
}

// The mixer's output norm's gain gradient: the norm's backward (rmsnorm_backward), or one partial
// sum per word where the chunked delta backward takes the norm in.
std::size_t onorm_partials(const Plan& p) { return std::max(rmsnorm_backward_partials(p.N, p.d), p.B * p.d); }
// The embedding gradient's partial sums: inside the first layer's norm backward where it fits.
std::size_t embed_partials(const Plan& p, const ModelConfig& c) {
    return rmsnorm_backward_embeds(p.N, p.d, c.vocab) ? rmsnorm_backward_embed_partials(p.N, p.d, c.vocab)
                                                       : embed_backward_partials(p.N, p.d, c.vocab);
}
// The scratch of every sum of the backward pass (each has a region of its own: they are added at
// its end, kernels.cuh), in the order it takes them: the head's bias and the final norm (or
// head_step's three), per layer the MLP's norm, the mixer's sums (its output norm's first) and the
// layer's first norm, then the embedding.
std::size_t backward_partials(const Plan& p, const ModelConfig& c) {
    const std::size_t N = p.N, d = p.d, norm = partials_region(rmsnorm_backward_partials(N, d));
    std::size_t mixer = 0;
    if (c.mixer == Mixer::lstm) mixer = partials_region(column_sums_partials(N, 4 * d));
    else if (c.mixer == Mixer::mamba)
        mixer = partials_region(onorm_partials(p)) + partials_region(diagonal_backward_partials(diagonal_shape(p, c)));
    else mixer = partials_region(onorm_partials(p)) + partials_region(delta_backward_partials(delta_shape(p, c)));
    const std::size_t head = p.head_fused ? partials_region(head_step_partials(N, d, p.C))
                                          : partials_region(column_sums_partials(N, p.C)) + norm;
    return head + c.layers * (2 * norm + mixer) + partials_region(embed_partials(p, c));
}

// rows: where the words are packed the rows that hold them (packed_rows), 0 for B T.
// delta_chunks: the delta rule runs in chunks (cuda_runs_chunked), its backward writing dpre16 itself.
// recompute: the session lets the MLP's backward rebuild gate and up (CudaOptions, fused products).
// by_token: the session lets the first layer's rows go by token (CudaOptions::fused_products and
// first_layer_by_token).
Plan make_plan(const ModelConfig& c, std::size_t B, std::size_t T, bool training, bool mlp16, bool delta_chunks,
               bool recompute, bool by_token, std::size_t rows = 0) {
    Plan p{};
    p.mlp16 = mlp16;
    p.proj16 = mlp16 && (c.mixer == Mixer::deltanet || c.mixer == Mixer::deltaproduct);
    p.grad16 = p.proj16 && c.d_model % 8 == 0 && c.d_model <= 512;
    p.packed = rows != 0;
    p.B = B, p.T = T, p.N = p.packed ? rows : B * T, p.d = c.d_model, p.H = c.heads, p.dh = c.head_dim(), p.F = c.factors;
    p.m = c.mlp_width(), p.C = c.classes, p.K = c.conv_kernel;
    p.qkv = p.d + 2 * p.F * p.d;
    p.gw = c.mixer == Mixer::mamba ? p.d : p.F * p.H;
    p.proj = p.qkv + p.gw;
    p.ldp = c.mixer == Mixer::lstm ? p.proj : projection_rows(c);
    p.training = training;
    p.head_fused = training && head_step_fits(p.d, p.C);
    p.recompute_gate_up =
        recompute && training && mlp16 && p.N >= fused_products_rows() && mlp_recomputes_gu(p.d, p.m);
    p.x0_by_token = by_token && p.grad16 && c.layers > 0 && p.N >= fused_products_rows() &&
                    (!training || rmsnorm_backward_embeds(p.N, p.d, c.vocab)) &&
                    first_layer_by_token(p.d, p.ldp, c.vocab, training);
    auto take = [&](std::size_t count) {
        const std::size_t at = p.total;
        p.total += (count + 63) / 64 * 64;  // 256-byte alignment of every array
        return at;
    };
    const std::size_t N = p.N, d = p.d;
    const bool lstm = c.mixer == Mixer::lstm, mamba = c.mixer == Mixer::mamba;
    p.x.push_back(take(N * d));
    for (std::size_t l = 0; l < c.layers; ++l) {
        LayerActs a{};
        a.xn1 = take(N * d), a.r1 = take(N);
        if (lstm) {
            a.z = take(N * 4 * d), a.c = take(N * d), a.h = take(N * d), a.hprev = take(N * d);
        } else {
            a.pre = take(N * p.ldp);  // the recurrences apply the conv themselves
            if (training) {
                if (mamba) a.saved = take(diagonal_saved_floats(diagonal_shape(p, c)));
                else a.saved = take(N * p.F * d), a.final = take(B * p.H * p.dh * p.dh);
            }
            a.o = take(N * d), a.ro = take(N * p.H), a.on = take(N * d);
        }
        a.x_mid = take(N * d), a.xn2 = take(N * d), a.r2 = take(N), a.hm = take(N * p.m);
        if (!p.recompute_gate_up) a.gu = take(N * 2 * p.m);
        p.layers.push_back(a);
        p.x.push_back(take(N * d));
    }
    if (!p.head_fused) p.xnf = take(N * d), p.rf = take(N), p.logits = take(N * p.C);
    if (training) {
        const std::size_t wide = std::max({p.ldp, 2 * p.m, 4 * d});
        if (!p.head_fused) p.dlogits = take(N * p.C);
        for (std::size_t& a : p.dx) a = take(p.grad16 ? (N * d + 1) / 2 : N * d);
        p.dxn = take(N * d);
        p.s1 = take(N * wide), p.s2 = take(N * wide);
        if (!lstm) p.dO = take(N * d);
        p.dh_next = take(B * d), p.dc_next = take(B * d);
        if (mlp16 && !p.grad16)
            for (std::size_t& a : p.dx16) a = take((N * d + 1) / 2);
        if (p.proj16) p.dpre16 = delta_chunks ? p.s1 : take((N * p.ldp + 1) / 2);
    }
    // The fixed-order sums' scratch: the loss and the gradient norm use its start (one after the
    // other, and not while the backward's sums are pending); each sum of the backward has a region.
    // head_step computes the loss among the backward's sums: its doubles follow their regions.
    p.partials = take(std::max(step_results_partials(),
                               training ? backward_partials(p, c) + (p.head_fused ? step_results_partials() : 0) : 0));
    return p;
}

// A step's inputs, the same bytes in a slot's pinned host buffer (staged by stage_batch) and in its
// device buffer (one copy, enqueue_upload): the step's values, its results zeroed, then the batch's
// int32 arrays. Five copies and a memset at the head of each step's graph left the GPU idle for
// ~40 us a step at T = 40 (H100, bench_step_timeline); one copy on a stream of its own runs while
// the step before computes.
struct StepInputs {
    StepParams* params;
    StepResults* results;
    std::int32_t *tokens, *targets, *lengths, *offsets;  // [N], [N], [B], [B] (offsets: packed words only)
};
constexpr std::size_t inputs_header = 128;  // StepParams and StepResults, 64 bytes each
static_assert(sizeof(StepParams) <= 64 && sizeof(StepResults) <= 64);
// The bytes a slot holds for batches of B words of length T: staged padded, then packed in place (pack_words).
std::size_t inputs_capacity(std::size_t B, std::size_t T) { return inputs_header + (2 * B * T + 2 * B) * sizeof(std::int32_t); }
// The bytes a step on plan p copies.
std::size_t inputs_bytes(const Plan& p) {
    return inputs_header + (2 * p.N + (p.packed ? 2 : 1) * p.B) * sizeof(std::int32_t);
}
StepParams* params_in(void* buffer) { return static_cast<StepParams*>(buffer); }
StepResults* results_in(void* buffer) { return reinterpret_cast<StepResults*>(static_cast<std::byte*>(buffer) + 64); }
std::int32_t* ints_in(void* buffer) { return reinterpret_cast<std::int32_t*>(static_cast<std::byte*>(buffer) + inputs_header); }
StepInputs inputs_at(void* buffer, const Plan& p) {
    std::int32_t* ints = ints_in(buffer);
    return {params_in(buffer), results_in(buffer), ints, ints + p.N, ints + 2 * p.N, ints + 2 * p.N + p.B};
}

struct Graph {
    cudaGraphExec_t exec = nullptr;
};

}  // namespace

// One residual product Y = R + X W^T through cuBLASLt (its descriptors and the algorithm the
// heuristic chose), made once per shape.
struct ResidualProduct {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t w = nullptr, x = nullptr, r = nullptr, y = nullptr;
    cublasLtMatmulAlgo_t algo{};
};
inline void free_descriptors(ResidualProduct& r) {
    for (cublasLtMatrixLayout_t l : {r.w, r.x, r.r, r.y})
        if (l) cublasLtMatrixLayoutDestroy(l);
    if (r.desc) cublasLtMatmulDescDestroy(r.desc);
    r = {};
}
// rows, in, out, ldx, bf16 operands, the alignment of W in bytes
using ResidualShape = std::tuple<std::size_t, std::size_t, std::size_t, std::size_t, bool, std::uint32_t>;

struct CudaSessionState {
    int device = 0;
    // The parameters' order on the device: each mixer's gate projection right after wv (GateSlot::
    // after_values), so that the four projections are one product. Uploads and downloads reorder
    // from and to the canonical order of CudaSession::layout.
    ParameterLayout layout;
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    cublasLtHandle_t lt = nullptr;  // the residual products (on `stream`, with blas_workspace)
    std::map<ResidualShape, ResidualProduct> residual_products;
    // the weight gradients' stream, its cuBLAS handle and workspace, and the events that fork and join it
    cudaStream_t side = nullptr;
    cublasHandle_t blas_side = nullptr;
    void* blas_side_workspace = nullptr;
    std::vector<cudaEvent_t> events;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    float *params = nullptr, *grads = nullptr, *m = nullptr, *v = nullptr;
    bf16* params16 = nullptr;  // --matmul bf16: the weights rounded to bf16 after every change
    std::uint8_t* decay_mask = nullptr;
    void* blas_workspace = nullptr;
    float* work = nullptr;
    std::size_t work_floats = 0;
    cudaStream_t upload = nullptr;  // the slots' inputs to the device, ahead of their steps
    // A batch call's inputs, twice over, so that a training step can be staged, uploaded and
    // enqueued while the one before it runs (cuda_start_step): the GPU need not idle while the host
    // samples, stages and launches, nor while the batch crosses to the device. A slot's host buffers
    // are pinned; `done` follows its step on the stream.
    struct Slot {
        void* inputs_host = nullptr;    // pinned; StepInputs' bytes
        void* inputs_device = nullptr;  // the same, for the slot's step
        std::size_t inputs_capacity = 0;  // bytes, each
        StepResults* results_host = nullptr;  // pinned; the step's results, written at its end (enqueue_adamw)
        std::size_t labelled = 0;  // the staged batch's labelled positions (targets >= 0)
        bool packed = false;       // the staged batch's words are packed (Plan)
        cudaEvent_t done = nullptr;
        cudaEvent_t uploaded = nullptr;  // follows the inputs' copy on `upload`
    };
    std::array<Slot, 2> slots;
    std::size_t current = 0;            // the slot the last batch was staged in
    std::deque<std::size_t> in_flight;  // the slots of the steps started and not finished, oldest first
    Slot& slot() { return slots[current]; }
    // captured training steps by batch shape (B, T, rows) and slot: each graph copies from its slot's buffers
    std::map<std::tuple<std::size_t, std::size_t, std::size_t, std::size_t>, Graph> graphs;  // (B, T, N, slot)
    std::size_t bytes = 0;
    // A training step in two halves of its batch (CudaOptions::halves_from_rows) runs the second half
    // on `half`, made at the first such step: its own streams, handles, workspace, gradients and
    // results, this state's weights. The second half starts after this stream's upload (fork) and
    // this stream waits for its end (join) before adding its gradients and results.
    std::unique_ptr<CudaSessionState> half;
    StepResults* results = nullptr;  // the second half's (the first half's are its slot's)
    cudaEvent_t fork = nullptr, join = nullptr;

    void drop_graphs() {
        for (auto& [shape, graph] : graphs) cudaGraphExecDestroy(graph.exec);
        graphs.clear();
    }
    void drop_graphs(std::size_t slot) {  // those of one slot
        for (auto g = graphs.begin(); g != graphs.end();)
            if (std::get<3>(g->first) == slot) cudaGraphExecDestroy(g->second.exec), g = graphs.erase(g);
            else ++g;
    }
    ~CudaSessionState() {
        cudaSetDevice(device);
        if (half && half->stream) cudaStreamSynchronize(half->stream);  // it reads the weights freed below
        if (stream) cudaStreamSynchronize(stream);  // steps still in flight read the buffers freed below
        if (upload) cudaStreamSynchronize(upload);
        drop_graphs();
        for (auto& [shape, r] : residual_products) free_descriptors(r);
        if (lt) cublasLtDestroy(lt);
        if (blas) cublasDestroy(blas);
        if (blas_side) cublasDestroy(blas_side);
        for (cudaEvent_t e : events) cudaEventDestroy(e);
        for (cudaEvent_t e : {fork, join})
            if (e) cudaEventDestroy(e);
        for (void* p : {(void*)params, (void*)grads, (void*)m, (void*)v, (void*)params16, (void*)decay_mask, blas_workspace,
                        blas_side_workspace, (void*)work, (void*)results})
            if (p) cudaFree(p);
        for (Slot& k : slots) {
            for (void* p : {(void*)k.results_host, k.inputs_host})
                if (p) cudaFreeHost(p);
            if (k.inputs_device) cudaFree(k.inputs_device);
            for (cudaEvent_t e : {k.done, k.uploaded})
                if (e) cudaEventDestroy(e);
        }
        if (stream) cudaStreamDestroy(stream);
        if (upload) cudaStreamDestroy(upload);
        if (side) cudaStreamDestroy(side);
    }
};

void CudaSessionDeleter::operator()(CudaSessionState* state) const { delete state; }

namespace {

constexpr std::size_t blas_workspace_bytes = 32u << 20;

template <class T>
T* device_alloc(CudaSessionState& s, std::size_t count) {
    void* p = nullptr;
    STATETRACK_CUDA(cudaMalloc(&p, std::max<std::size_t>(1, count) * sizeof(T)));
    s.bytes += count * sizeof(T);
    return static_cast<T*>(p);
}

// Row-major products with explicit row strides (see kernels.cuh). cuBLAS is column-major: a
// row-major [rows][cols] array with stride ld is the column-major [cols][rows] matrix with ld.
// Operands are fp32 (the session's compute type: exact or TF32) or bf16 (fp32 accumulation); the
// result is fp32 or bf16.
template <class T>
constexpr cudaDataType_t cuda_type = std::is_same_v<T, bf16> ? CUDA_R_16BF : CUDA_R_32F;
struct Blas {
    CudaSessionState& s;
    cublasHandle_t handle;  // s.blas (the session's stream) or s.blas_side
    // bf16 operands accumulate in fp32; fp32 operands as the session says (exact or TF32).
    template <class In>
    cublasComputeType_t compute() const {
        return std::is_same_v<In, bf16> ? CUBLAS_COMPUTE_32F : s.compute;
    }
    template <class In, class Out>
    void gemm(cublasOperation_t ta, cublasOperation_t tb, std::size_t m, std::size_t n, std::size_t k, const In* A,
              std::size_t lda, const In* B, std::size_t ldb, float beta, Out* C, std::size_t ldc) const {
        const float alpha = 1.0f;
        STATETRACK_BLAS(cublasGemmEx(handle, ta, tb, int(m), int(n), int(k), &alpha, A, cuda_type<In>, int(lda), B,
                                     cuda_type<In>, int(ldb), &beta, C, cuda_type<Out>, int(ldc), compute<In>(),
                                     CUBLAS_GEMM_DEFAULT));
    }
    // Y[rows][out] (+)= X[rows][in] W^T
    template <class In, class Out>
    void forward(const In* X, std::size_t ldx, const In* W, Out* Y, std::size_t ldy, std::size_t rows, std::size_t in,
                 std::size_t out, bool accumulate = false) const {
        gemm(CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, W, in, X, ldx, accumulate ? 1.0f : 0.0f, Y, ldy);
    }
    // Y[rows][out] = R + X[rows][in] W^T with R and Y [rows][out] (stride out) distinct: cublasGemmEx
    // adds into its output only, which made the RMSNorm before each sublayer write a copy of its input
    // to start the residual sum (a tensor per sublayer). On the session's stream.
    template <class In>
    void forward_residual(const In* X, std::size_t ldx, const In* W, const float* R, float* Y, std::size_t rows,
                          std::size_t in, std::size_t out) const {
        const ResidualProduct& p = residual_product<In>(rows, in, out, ldx, alignment(W));
        const float one = 1.0f;
        STATETRACK_BLAS(cublasLtMatmul(s.lt, p.desc, &one, W, p.w, X, p.x, &one, R, p.r, Y, p.y, &p.algo,
                                       s.blas_workspace, blas_workspace_bytes, s.stream));
    }
    // The largest power of two up to 256 that divides p's address: cuBLASLt's heuristic assumes
    // 256-byte aligned operands unless told otherwise, and the parameter buffer's tensors are aligned
    // to their element only (the workspace's arrays are 256-byte aligned).
    static std::uint32_t alignment(const void* p) {
        const auto address = reinterpret_cast<std::uintptr_t>(p);
        std::uint32_t a = 256;
        while (a > 1 && address % a) a /= 2;
        return a;
    }
    template <class In>
    const ResidualProduct& residual_product(std::size_t rows, std::size_t in, std::size_t out, std::size_t ldx,
                                            std::uint32_t w_alignment) const {
        const ResidualShape shape{rows, in, out, ldx, std::is_same_v<In, bf16>, w_alignment};
        if (auto found = s.residual_products.find(shape); found != s.residual_products.end()) return found->second;
        ResidualProduct& p = s.residual_products[shape];
        try {
            STATETRACK_BLAS(cublasLtMatmulDescCreate(&p.desc, compute<In>(), CUDA_R_32F));
            const cublasOperation_t t = CUBLAS_OP_T;
            STATETRACK_BLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
            // column-major views as in gemm(): W^T (out x in, stored in x out), X^T (in x rows), Y^T (out x rows)
            STATETRACK_BLAS(cublasLtMatrixLayoutCreate(&p.w, cuda_type<In>, in, out, in));
            STATETRACK_BLAS(cublasLtMatrixLayoutCreate(&p.x, cuda_type<In>, in, rows, ldx));
            STATETRACK_BLAS(cublasLtMatrixLayoutCreate(&p.r, CUDA_R_32F, out, rows, out));
            STATETRACK_BLAS(cublasLtMatrixLayoutCreate(&p.y, CUDA_R_32F, out, rows, out));
            cublasLtMatmulPreference_t preference = nullptr;
            STATETRACK_BLAS(cublasLtMatmulPreferenceCreate(&preference));
            const std::size_t workspace = blas_workspace_bytes;
            cublasLtMatmulHeuristicResult_t result{};
            int found = 0;
            cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
                preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
            if (status == CUBLAS_STATUS_SUCCESS)
                status = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                              &w_alignment, sizeof(w_alignment));
            if (status == CUBLAS_STATUS_SUCCESS)
                status = cublasLtMatmulAlgoGetHeuristic(s.lt, p.desc, p.w, p.x, p.r, p.y, preference, 1, &result, &found);
            cublasLtMatmulPreferenceDestroy(preference);
            STATETRACK_BLAS(status == CUBLAS_STATUS_SUCCESS && found == 0 ? CUBLAS_STATUS_NOT_SUPPORTED : status);
            p.algo = result.algo;
        } catch (...) {
            free_descriptors(p);
            s.residual_products.erase(shape);
            throw;
        }
        return p;
    }
    // dX[rows][in] (+)= dY[rows][out] W
    template <class In, class Out>
    void input_grad(const In* dY, std::size_t lddy, const In* W, Out* dX, std::size_t lddx, std::size_t rows,
                    std::size_t in, std::size_t out, bool accumulate) const {
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, W, in, dY, lddy, accumulate ? 1.0f : 0.0f, dX, lddx);
    }
    // dW[out][in] += dY^T X
    template <class In>
    void weight_grad(const In* X, std::size_t ldx, const In* dY, std::size_t lddy, float* dW, std::size_t rows,
                     std::size_t in, std::size_t out) const {
        gemm(CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, X, ldx, dY, lddy, 1.0f, dW, in);
    }
};
// A float slot of the workspace holding bf16 values (half of it used).
bf16* as16(float* p) { return reinterpret_cast<bf16*>(p); }

// What forward_pass and backward_pass both work with: the model, the parameter layout, the state
// they run on (the session's, or a second half's: CudaSessionState::half), products on its stream,
// the session's weights (and their bf16 copy), its workspace and its gradients.
struct PassContext {
    const ModelConfig& c;
    const ParameterLayout& L;
    CudaSessionState& s;
    Blas blas;
    cudaStream_t st;
    const float* W;
    const bf16* W16;
    float* ws;
    float* G;
    StepInputs in;  // on the device: the batch's words (or a half's), the step's values and results
};
PassContext pass_context(const CudaSession& session, CudaSessionState& part, const StepInputs& in) {
    const CudaSessionState& s = *session.state;
    return {session.config, s.layout, part, Blas{part, part.blas}, part.stream, s.params, s.params16, part.work,
            part.grads, in};
}

void forward_pass(const CudaSession& session, CudaSessionState& part, const Plan& p, const StepInputs& inputs) {
    const auto [c, L, s, blas, st, W, W16, ws, G, in] = pass_context(session, part, inputs);
    const std::int32_t *tokens = in.tokens, *lengths = in.lengths, *offsets = in.offsets;
    const std::size_t N = p.N, d = p.d;
    // the embedding and the first layer's norm in one pass where the rows allow it (x itself not
    // written where its readers take the table's rows by token)
    const bool embedded = embed_and_norm(tokens, W + L.embed, p.x0_by_token ? nullptr : ws + p.x[0],
                                         W + L.layers[0].norm1, ws + p.layers[0].xn1, ws + p.layers[0].r1, N, d, st,
                                         p.proj16 ? as16(ws + p.layers[0].xn1) : nullptr);
    if (!embedded) embed_forward(tokens, W + L.embed, ws + p.x[0], N, d, st);  // (read below by rmsnorm_forward)
    for (std::size_t l = 0; l < c.layers; ++l) {
        const LayerSlots& sl = L.layers[l];
        const LayerActs& a = p.layers[l];
        bool normed2 = false;  // x_mid's norm (xn2, r2) written with x_mid itself
        if (l > 0 || !embedded)
            rmsnorm_forward(ws + p.x[l], W + sl.norm1, ws + a.xn1, ws + a.r1, N, d, d, st,
                            p.proj16 ? as16(ws + a.xn1) : nullptr);
        if (c.mixer == Mixer::lstm) {
            blas.forward(ws + a.xn1, d, W + sl.lstm_wx, ws + a.z, 4 * d, N, d, 4 * d);
            add_bias(ws + a.z, 4 * d, W + sl.lstm_bias, N, 4 * d, st);
            for (std::size_t t = 0; t < p.T; ++t) {
                // z_t += h_{t-1} W_h^T for every word at once (rows b * T + t, stride T rows)
                if (t > 0)
                    blas.forward(ws + a.h + (t - 1) * d, p.T * d, W + sl.lstm_wh, ws + a.z + t * 4 * d, p.T * 4 * d, p.B,
                                 d, 4 * d, true);
                lstm_cell_forward(ws + a.z, ws + a.c, ws + a.h, ws + a.hprev, p.B, p.T, t, d, st);
            }
            blas.forward_residual(ws + a.h, d, W + sl.wo, ws + p.x[l], ws + a.x_mid, N, d, d);
        } else {
            // [q | k | v | gate logits] in one product: the device layout keeps wbeta (or wdt) right
            // after wv (make_cuda_session), so [wq; wk; wv; gate] is one [proj][d] matrix, and zero rows
            // after it up to ldp (their columns of pre are read by nothing)
            float* zg = ws + a.pre + p.qkv;
            DeltaShape shape = delta_shape(p, c, session.options, lengths, offsets);
            if (pre_by_token(p, l, shape)) {  // (Plan::x0_by_token holds for the delta rules only)
                // the letters' rows of pre, a table at pre's start and a row of zeros after them: the
                // embedding's rows normed by the kernel that norms each row (the same bits as xn1's rows),
                // after the table, then their product
                const std::size_t table_rows = c.vocab + 1;
                bf16* xn_letters = as16(ws + a.pre + table_rows * p.ldp);
                float* rinv_letters = ws + a.pre + table_rows * (p.ldp + d);
                rmsnorm_forward(W + L.embed, W + sl.norm1, nullptr, rinv_letters, c.vocab, d, d, st, xn_letters);
                blas.forward(xn_letters, d, W16 + sl.wq, ws + a.pre, p.ldp, c.vocab, d, p.ldp);
                STATETRACK_CUDA(cudaMemsetAsync(ws + a.pre + c.vocab * p.ldp, 0, p.ldp * sizeof(float), st));
                shape.tokens = tokens, shape.zero_token = std::int32_t(c.vocab);
            } else if (p.proj16) {
                blas.forward(as16(ws + a.xn1), d, W16 + sl.wq, ws + a.pre, p.ldp, N, d, p.ldp);
            } else {
                blas.forward(ws + a.xn1, d, W + sl.wq, ws + a.pre, p.ldp, N, d, p.ldp);
            }
            if (c.mixer == Mixer::mamba) {
                diagonal_forward(diagonal_shape(p, c, lengths, offsets), ws + a.pre, W + sl.conv_q, zg, W + sl.bdt,
                                 W + sl.decay_log, ws + a.o, p.training ? ws + a.saved : nullptr, st);
            } else {
                delta_forward(shape, ws + a.pre, W + sl.conv_q, zg, ws + a.o, p.training ? ws + a.saved : nullptr,
                              p.training ? ws + a.final : nullptr, st);
            }
            // the recurrences stopped at each word's end (Batch); packed, the rows after the last word
            if (p.packed) zero_past_packed_words(ws + a.o, d, d, N, p.B, offsets, lengths, st);
            else zero_past_lengths(ws + a.o, d, d, p.B, p.T, lengths, st);
            rmsnorm_forward(ws + a.o, W + sl.onorm, ws + a.on, ws + a.ro, N, d, p.dh, st,
                            p.proj16 ? as16(ws + a.on) : nullptr);
            // the output product and the MLP's norm in one kernel where the shape and the rows allow (the
            // first layer's residual the embedding's rows by token, where x0 is not written)
            const bool by_token = l == 0 && p.x0_by_token;
            normed2 = p.proj16 && session.options.fused_products &&
                      residual_norm_forward(as16(ws + a.on), W16 + sl.wo, by_token ? W + L.embed : ws + p.x[l],
                                            ws + a.x_mid, W + sl.norm2, as16(ws + a.xn2), ws + a.r2, N, d, d,
                                            fused_products_rows(), st, true, by_token ? tokens : nullptr);
            if (by_token && !normed2)
                throw std::logic_error("forward_pass: residual_norm_forward declined the first layer's rows by token");
            if (!normed2) {
                if (p.proj16) blas.forward_residual(as16(ws + a.on), d, W16 + sl.wo, ws + p.x[l], ws + a.x_mid, N, d, d);
                else blas.forward_residual(ws + a.on, d, W + sl.wo, ws + p.x[l], ws + a.x_mid, N, d, d);
            }
        }
        if (p.mlp16) {
            bf16 *xn2 = as16(ws + a.xn2), *gu = as16(ws + a.gu), *hm = as16(ws + a.hm);
            if (!normed2) rmsnorm_forward(ws + a.x_mid, W + sl.norm2, nullptr, ws + a.r2, N, d, d, st, xn2);
            // The whole MLP in one kernel where the shape and the rows allow (gu and h written for the
            // backward only); else the gate/up product, then SwiGLU inside the down projection
            const bool fused = session.options.fused_products, recompute = p.recompute_gate_up;
            // (gu only where the backward reads it, h for wdown's weight gradient)
            if (!fused || !mlp_forward(xn2, W16 + sl.wgate, W16 + sl.wdown, ws + a.x_mid,
                                       p.training && !recompute ? gu : nullptr, p.training ? hm : nullptr,
                                       ws + p.x[l + 1], N, d, p.m, fused_products_rows(), st)) {
                if (recompute) throw std::logic_error("forward_pass: mlp_forward declined a shape it takes");
                blas.forward(xn2, d, W16 + sl.wgate, gu, 2 * p.m, N, d, 2 * p.m);
                if (!fused || !mlp_down_forward(gu, W16 + sl.wdown, ws + a.x_mid, p.training ? hm : nullptr,
                                                ws + p.x[l + 1], N, p.m, d, fused_products_rows(), st)) {
                    swiglu_forward(gu, hm, N, p.m, st);
                    blas.forward_residual(hm, p.m, W16 + sl.wdown, ws + a.x_mid, ws + p.x[l + 1], N, p.m, d);
                }
            }
        } else {
            rmsnorm_forward(ws + a.x_mid, W + sl.norm2, ws + a.xn2, ws + a.r2, N, d, d, st);
            blas.forward(ws + a.xn2, d, W + sl.wgate, ws + a.gu, 2 * p.m, N, d, 2 * p.m);
            swiglu_forward(ws + a.gu, ws + a.hm, N, p.m, st);
            blas.forward_residual(ws + a.hm, p.m, W + sl.wdown, ws + a.x_mid, ws + p.x[l + 1], N, p.m, d);
        }
    }
    if (p.head_fused) return;  // the backward pass's head_step takes it from here
    rmsnorm_forward(ws + p.x[c.layers], W + L.norm_f, ws + p.xnf, ws + p.rf, N, d, d, st);
    blas.forward(ws + p.xnf, d, W + L.head, ws + p.logits, p.C, N, d, p.C);
    add_bias(ws + p.logits, p.C, W + L.head_bias, N, p.C, st);
}

// The weight gradients dW += dY^T X feed only the gradient norm and AdamW, so they run on a second
// stream beside the chain of input gradients: each forks after everything enqueued so far on the
// session's stream (its dY is written) and is joined back before the session's stream overwrites one
// of its operands, and before the step goes on (the last join). Same products, same order on each
// stream: the bits do not change. Overlapped so with the memory-bound kernels of the chain, they
// save 1.6% of the deltanet step at T = 40 (4.8% without a graph or with exact fp32 products) and
// ~0.4% at T = 256, for a second cuBLAS workspace (+96 MiB in use; H100, docs/PERFORMANCE.md).
struct SideProducts {
    CudaSessionState& s;
    Blas blas{s, s.blas_side};
    std::size_t used = 0;
    cudaEvent_t last = nullptr;
    cudaEvent_t event() {
        if (used == s.events.size()) throw std::logic_error("SideProducts: more weight gradients than events");
        return s.events[used++];
    }
    template <class In>
    cudaEvent_t weight_grad(const In* X, std::size_t ldx, const In* dY, std::size_t lddy, float* dW, std::size_t rows,
                            std::size_t in, std::size_t out) {
        const cudaEvent_t fork = event(), done = event();
        STATETRACK_CUDA(cudaEventRecord(fork, s.stream));
        STATETRACK_CUDA(cudaStreamWaitEvent(s.side, fork));
        blas.weight_grad(X, ldx, dY, lddy, dW, rows, in, out);
        STATETRACK_CUDA(cudaEventRecord(done, s.side));
        return last = done;
    }
    // The session's stream waits for the side products up to `done` (nullptr: none).
    void join(cudaEvent_t done) {
        if (done) STATETRACK_CUDA(cudaStreamWaitEvent(s.stream, done));
    }
    // Every weight gradient is in G before the gradient norm.
    void finish() {
        join(last);
        last = nullptr;
    }
    // On the way out of an exception too, the session's stream (which every call synchronises) must
    // not run ahead of side products still writing G or reading the workspace.
    ~SideProducts() {
        if (last) cudaStreamWaitEvent(s.stream, last);
    }
};
// Events a backward pass uses: a fork and a join for the head's and each layer's (at most 4) weight
// gradients on the side stream.
std::size_t side_events(std::size_t layers) { return 2 * (1 + 4 * layers); }

// D: dx's type (Plan::grad16: bf16 only with proj16, so the paths that take fp32 operands, the
// LSTM's, mamba's and fp32 products', read it as floats: dx32).
template <class D>
void backward_pass(const CudaSession& session, CudaSessionState& part, const Plan& p, const StepInputs& inputs) {
    const auto [c, L, s, blas, st, W, W16, ws, G, in] = pass_context(session, part, inputs);
    if (p.grad16 != std::is_same_v<D, bf16>) throw std::logic_error("backward_pass: not the plan's type of dx");
    const std::int32_t *lengths = in.lengths, *offsets = in.offsets;
    const std::size_t N = p.N, d = p.d;
    // dx in its array k: as D, as fp32 (the fp32 paths'), in bf16 for the MLP's products (and wo's:
    // dx itself, or a copy), and the copy that the kernels writing dx write (or null)
    struct Gradient {
        D* dx;
        float* dx32;
        bf16 *dx16, *copy;
    };
    auto gradient = [&](std::size_t k) {
        bf16* const dx16 = p.grad16 ? as16(ws + p.dx[k]) : p.mlp16 ? as16(ws + p.dx16[k]) : nullptr;
        return Gradient{reinterpret_cast<D*>(ws + p.dx[k]), ws + p.dx[k], dx16, p.grad16 ? nullptr : dx16};
    };
    // The layers' dx in array 0 (the head's, then each first norm's), their mixers' in array 1 (each MLP
    // norm's). Before a norm writes an array, the side products reading it are joined: wo's weight
    // gradient of the layer above for array 1 (through the join at the layer's start, of the projections'
    // weight gradient after it on the side stream), the layer's wdown gradient for array 0. (With one array,
    // the MLP norm waited for wdown's gradient, which ran only after mlp_down_backward: 100-240 us a
    // layer and half at T = 256, docs/PERFORMANCE.md, 2026-11-28.)
    const Gradient layer_in = gradient(0), mixer_in = gradient(1);
    float* dxn = ws + p.dxn;
    SideProducts side{s};
    STATETRACK_CUDA(cudaMemsetAsync(G, 0, L.total * sizeof(float), st));
    // Each sum of this pass writes its partial sums to a region of its own and is added at the end,
    // in one launch (kernels.cuh, Partials); the regions in the order backward_partials lists them.
    std::vector<PartialSum> sums;
    float* next_region = ws + p.partials;
    float* const regions_end = next_region + backward_partials(p, c);
    auto region = [&](std::size_t floats) {
        const Partials r{next_region, &sums};
        next_region += partials_region(floats);
        if (next_region > regions_end) throw std::logic_error("backward_pass: more partial sums than the plan holds");
        return r;
    };
    const std::size_t norm_partials = rmsnorm_backward_partials(N, d);
    // head and final norm
    if (p.head_fused) {
        head_step(ws + p.x[c.layers], W + L.norm_f, W + L.head, W + L.head_bias,
                  in.targets, in.params, in.results, layer_in.dx, layer_in.copy,
                  G + L.head, G + L.head_bias, G + L.norm_f, N, d, p.C, region(head_step_partials(N, d, p.C)),
                  reinterpret_cast<double*>(regions_end), st);
    } else {
        blas.input_grad(ws + p.dlogits, p.C, W + L.head, dxn, d, N, d, p.C, false);
        side.weight_grad(ws + p.xnf, d, ws + p.dlogits, p.C, G + L.head, N, d, p.C);
        column_sums(ws + p.dlogits, p.C, G + L.head_bias, N, p.C, region(column_sums_partials(N, p.C)), st);
        rmsnorm_backward(ws + p.x[c.layers], W + L.norm_f, ws + p.rf, dxn, layer_in.dx, G + L.norm_f, N, d, d, false,
                         region(norm_partials), st, layer_in.copy);
    }
    // the last side product of the layer above (the projections'): it reads s1 ([dpre | dz]) or dpre16
    cudaEvent_t wq_done = nullptr;
    // bf16 input gradients into the norms with the norms' backward inside (norm_backward_product), from
    // the rows where that is faster; its callers join the side products that read dx16 before it
    const bool fused_norms = session.options.fused_products && N >= fused_products_rows();
    for (std::size_t l = c.layers; l-- > 0;) {
        const LayerSlots& sl = L.layers[l];
        const LayerActs& a = p.layers[l];
        // MLP (s1 is written next, and dz in the mixer: the layer above's side products are done)
        side.join(wq_done);
        cudaEvent_t wdown_done, wgate_done;
        const Partials norm2_partials = region(norm_partials);
        bool normed2 = false;  // the MLP norm's backward ran inside the MLP's backward or the gate/up input gradient
        if (p.mlp16) {
            bf16 *dhm = as16(ws + p.s1), *dgu = as16(ws + p.s2);
            wdown_done = side.weight_grad(as16(ws + a.hm), p.m, layer_in.dx16, d, G + sl.wdown, N, p.m, d);
            // dgu, with the MLP norm's backward in the same kernel where dx is bf16 (mlp_backward_through_norm:
            // dgu is not read back; into the mixer's dx, as the down projection's weight gradient may still
            // read the layer's); else dh inside one kernel where the shape allows (gate and up rebuilt from
            // xn2 where the forward did not write them); else cuBLAS writes dh for swiglu_backward
            if (p.recompute_gate_up && p.grad16 && fused_norms && session.options.mlp_backward_through_norm)
                normed2 = mlp_backward_through_norm(
                    layer_in.dx16, as16(ws + a.xn2), W16 + sl.wgate, W16 + sl.wdown, dgu,
                    {ws + a.x_mid, W + sl.norm2, ws + a.r2, layer_in.dx16, mixer_in.dx16, G + sl.norm2}, N, d, p.m,
                    norm2_partials, st);
            if (normed2) {
                // dgu is written and the MLP norm's backward done
            } else if (p.recompute_gate_up) {
                if (!mlp_down_backward_from_xn(layer_in.dx16, as16(ws + a.xn2), W16 + sl.wgate, W16 + sl.wdown, dgu, N,
                                               d, p.m, st))
                    throw std::logic_error("backward_pass: mlp_down_backward_from_xn declined a shape it takes");
            } else if (!session.options.fused_products ||
                       !mlp_down_backward(layer_in.dx16, W16 + sl.wdown, as16(ws + a.gu), dgu, N, d, p.m, st)) {
                blas.input_grad(layer_in.dx16, d, W16 + sl.wdown, dhm, p.m, N, p.m, d, false);
                swiglu_backward(as16(ws + a.gu), dhm, dgu, N, p.m, st);
            }
            wgate_done = side.weight_grad(as16(ws + a.xn2), d, dgu, 2 * p.m, G + sl.wgate, N, d, 2 * p.m);
            // the gate/up input gradient with the MLP norm's backward after it, where the shape allows
            // (into the mixer's dx: the down projection's weight gradient may still read the layer's)
            if (fused_norms && !normed2)
                normed2 = norm_backward_product(dgu, 2 * p.m, W16 + sl.wgate, ws + a.x_mid, W + sl.norm2, ws + a.r2,
                                                mixer_in.dx, p.proj16 ? mixer_in.copy : nullptr, G + sl.norm2, N,
                                                2 * p.m, d, true, fused_products_rows(), norm2_partials, st, {},
                                                layer_in.dx);
            if (!normed2) blas.input_grad(dgu, 2 * p.m, W16 + sl.wgate, dxn, d, N, d, 2 * p.m, false);
        } else {
            float* dhm = ws + p.s1;
            float* dgu = ws + p.s2;
            blas.input_grad(layer_in.dx32, d, W + sl.wdown, dhm, p.m, N, p.m, d, false);
            wdown_done = side.weight_grad(ws + a.hm, p.m, layer_in.dx32, d, G + sl.wdown, N, p.m, d);
            swiglu_backward(ws + a.gu, dhm, dgu, N, p.m, st);
            blas.input_grad(dgu, 2 * p.m, W + sl.wgate, dxn, d, N, d, 2 * p.m, false);
            wgate_done = side.weight_grad(ws + a.xn2, d, dgu, 2 * p.m, G + sl.wgate, N, d, 2 * p.m);
        }
        if (!normed2)
            rmsnorm_backward(ws + a.x_mid, W + sl.norm2, ws + a.r2, dxn, mixer_in.dx, G + sl.norm2, N, d, d, true,
                             norm2_partials, st, p.proj16 ? mixer_in.copy : nullptr, layer_in.dx);
        // mixer. The LSTM writes s2 (dgu above) next; the linear-attention mixers do not, so the
        // wgate gradient may run beside their backward, into the tail of the recurrence kernel's
        // last wave of blocks (joined at the next layer's start, through wq_done). wo's weight
        // gradient reads the mixer's dx, which only the next layer's MLP norm writes: joined there
        // likewise.
        // the first norm's partial sums, whichever kernel takes its backward, and in the first layer the
        // embedding's; the first layer's dx goes to the embedding only, summed per letter inside the
        // norm's backward where the letters' tables fit
        const Partials norm1_partials = region(norm_partials);
        const Partials embed_sums = l == 0 ? region(embed_partials(p, c)) : Partials{};
        const bool by_letters = l == 0 && rmsnorm_backward_embeds(N, d, c.vocab);
        // the layer's dx is written below (the down projection's weight gradient, which reads it, joined
        // first) but in the first layer summed by letters (the mixer's dx read there, nothing written)
        const bool writes_dx = !by_letters;
        bool normed1 = false;
        if (c.mixer == Mixer::lstm) {
            side.join(wgate_done);
            float* dH = ws + p.s1;
            float* dZ = ws + p.s2;
            float* dh_next = ws + p.dh_next;
            float* dc_next = ws + p.dc_next;
            blas.input_grad(mixer_in.dx32, d, W + sl.wo, dH, d, N, d, d, false);
            blas.weight_grad(ws + a.h, d, mixer_in.dx32, d, G + sl.wo, N, d, d);
            for (std::size_t t = p.T; t-- > 0;) {
                lstm_cell_backward(ws + a.z, ws + a.c, dH, dh_next, dc_next, dZ, p.B, p.T, t, d, st);
                if (t > 0)  // dh_{t-1} = dz_t W_h
                    blas.input_grad(dZ + t * 4 * d, p.T * 4 * d, W + sl.lstm_wh, dh_next, d, p.B, d, 4 * d, false);
            }
            blas.weight_grad(ws + a.hprev, d, dZ, 4 * d, G + sl.lstm_wh, N, d, 4 * d);
            blas.input_grad(dZ, 4 * d, W + sl.lstm_wx, dxn, d, N, d, 4 * d, false);
            blas.weight_grad(ws + a.xn1, d, dZ, 4 * d, G + sl.lstm_wx, N, d, 4 * d);
            column_sums(dZ, 4 * d, G + sl.lstm_bias, N, 4 * d, region(column_sums_partials(N, 4 * d)), st);
        } else {
            DeltaShape shape = delta_shape(p, c, session.options, lengths, offsets);
            if (pre_by_token(p, l, shape))  // as the forward
                shape.tokens = in.tokens, shape.zero_token = std::int32_t(c.vocab);
            // the chunked delta backward takes dO through the output norm itself (dOn in the dO array: it
            // reads dOn while writing dpre); elsewhere the norm's backward writes dO
            const bool through_norm = c.mixer != Mixer::mamba && delta_runs_in_chunks(shape);
            float* dO = ws + p.dO;
            float* dOn = through_norm ? dO : ws + p.s1;
            float* dpre = ws + p.s1;        // [dq | dk | dv | dz], as the forward's pre
            float* dz = dpre + p.qkv;       // the gate logits' gradient
            const float* zg = ws + a.pre + p.qkv;
            // --matmul bf16: [dq | dk | dv | dz] in bf16 for the projections' products, written so by the
            // chunked backward, converted after the others
            bf16* dpre16 = p.proj16 ? as16(ws + p.dpre16) : nullptr;
            if (p.proj16 && (p.dpre16 == p.s1) != through_norm)
                throw std::logic_error("backward_pass: the plan put dpre16 where this backward does not write it");
            if (p.proj16) {
                blas.input_grad(mixer_in.dx16, d, W16 + sl.wo, dOn, d, N, d, d, false);
                side.weight_grad(as16(ws + a.on), d, mixer_in.dx16, d, G + sl.wo, N, d, d);
            } else {
                blas.input_grad(mixer_in.dx32, d, W + sl.wo, dOn, d, N, d, d, false);
                side.weight_grad(ws + a.on, d, mixer_in.dx32, d, G + sl.wo, N, d, d);
            }
            const Partials onorm = region(onorm_partials(p));
            const OutputNorm on{ws + a.o, dOn, ws + a.ro, W + sl.onorm};
            if (through_norm && p.proj16) {
                delta_backward_through_norm(shape, ws + a.pre, W + sl.conv_q, zg, ws + a.saved, ws + a.final, on, dpre16,
                                            p.ldp, G + sl.conv_q, dpre16 + p.qkv, G + sl.onorm,
                                            region(delta_backward_partials(shape)), onorm, st);
            } else if (through_norm) {
                delta_backward_through_norm(shape, ws + a.pre, W + sl.conv_q, zg, ws + a.saved, ws + a.final, on, dpre,
                                            G + sl.conv_q, dz, G + sl.onorm, region(delta_backward_partials(shape)),
                                            onorm, st);
            } else {
                rmsnorm_backward(ws + a.o, W + sl.onorm, ws + a.ro, dOn, dO, G + sl.onorm, N, d, p.dh, false, onorm, st);
            }
            if (c.mixer == Mixer::mamba) {
                diagonal_backward(diagonal_shape(p, c, lengths, offsets), ws + a.pre, W + sl.conv_q, zg, W + sl.bdt,
                                  W + sl.decay_log, ws + a.saved, dO, dpre, G + sl.conv_q, dz, G + sl.bdt, G + sl.decay_log,
                                  region(diagonal_backward_partials(diagonal_shape(p, c))), st);
            } else if (!through_norm) {
                delta_backward(shape, ws + a.pre, W + sl.conv_q, zg, ws + a.saved, ws + a.final, dO, dpre, G + sl.conv_q,
                               dz, region(delta_backward_partials(shape)), st);
            }
            // [dq | dk | dv | dz] past each word's end, where the step kernels stopped (Batch); the chunked
            // kernels run to T and write the padding's gradients, exact zeros (its output gradient is 0).
            // Packed, every kernel writes its words' rows, and the rows after the last word are zeroed.
            // dpre16's columns past proj are zeroed with its rows: by the chunked backward, the
            // conversion, or here after the last packed word.
            if (p.packed && through_norm && p.proj16)
                zero_past_packed_words(dpre16, p.ldp, p.ldp, N, p.B, offsets, lengths, st);
            else if (p.packed) zero_past_packed_words(dpre, p.ldp, p.proj, N, p.B, offsets, lengths, st);
            else if (c.mixer == Mixer::mamba || !through_norm) zero_past_lengths(dpre, p.ldp, p.proj, p.B, p.T, lengths, st);
            if (p.proj16 && !through_norm) to_bf16(dpre, p.ldp, dpre16, p.ldp, N, p.proj, st);
            // one product each for the four projections (wq .. the gate adjacent, as in the forward);
            // in bf16 the input gradient sums over all ldp columns (16-byte rows of dpre16 for cuBLAS's
            // sm90 kernels: cublasGemmEx alone 178 -> 138 us at T = 256 on the H100), the rows past
            // proj zero on both sides
            // the projections' weight gradient first: it reads xn1 and dpre16 (or dpre) only, so the side
            // stream starts it when the recurrence's backward ends; issued after the input gradient, it
            // waited for that too, and the first layer's ended the step (bf16 steps -0.2% at T = 256, -0.8%
            // at T = 40, docs/PERFORMANCE.md, 2026-11-27, twentieth session)
            wq_done = p.proj16 ? side.weight_grad(as16(ws + a.xn1), d, dpre16, p.ldp, G + sl.wq, N, d, p.proj)
                               : side.weight_grad(ws + a.xn1, d, dpre, p.ldp, G + sl.wq, N, d, p.proj);
            if (p.proj16) {
                // with the first norm's backward after it, where the shape allows, and in the first layer its
                // dx summed by letters
                if (fused_norms) {
                    if (writes_dx) side.join(wdown_done);
                    LetterSums letters{};
                    if (by_letters) letters = {in.tokens, c.vocab, G + L.embed, embed_sums, W + L.embed};
                    const float* x = l == 0 && p.x0_by_token ? nullptr : ws + p.x[l];  // null: by token
                    normed1 = norm_backward_product(dpre16, p.ldp, W16 + sl.wq, x, W + sl.norm1, ws + a.r1,
                                                    layer_in.dx, l > 0 ? layer_in.copy : nullptr, G + sl.norm1, N,
                                                    p.ldp, d, true, fused_products_rows(), norm1_partials, st, letters,
                                                    mixer_in.dx);
                    if (!x && !normed1)
                        throw std::logic_error("backward_pass: norm_backward_product declined the first layer by token");
                }
                if (!normed1) blas.input_grad(dpre16, p.ldp, W16 + sl.wq, dxn, d, N, d, p.ldp, false);
            } else {
                blas.input_grad(dpre, p.ldp, W + sl.wq, dxn, d, N, d, p.proj, false);
            }
        }
        // the dx of the layer below (its MLP's operand), or the embedding's gradient (by_letters)
        if (writes_dx) side.join(wdown_done);  // dx (and its copy) are written next
        const std::int32_t* tokens = in.tokens;
        if (by_letters) {
            if (!normed1)
                rmsnorm_backward_into_embedding(ws + p.x[l], W + sl.norm1, ws + a.r1, dxn, mixer_in.dx, G + sl.norm1,
                                                tokens, G + L.embed, N, d, c.vocab, true, norm1_partials, embed_sums,
                                                st);
        } else if (!normed1) {
            rmsnorm_backward(ws + p.x[l], W + sl.norm1, ws + a.r1, dxn, layer_in.dx, G + sl.norm1, N, d, d, true,
                             norm1_partials, st, l > 0 ? layer_in.copy : nullptr, mixer_in.dx);
        }
        if (l == 0 && !by_letters) {
            embed_backward(tokens, layer_in.dx, G + L.embed, N, d, c.vocab, embed_sums, st);
        }
    }
    add_partial_sums(sums, st);
    side.finish();
}

// Makes the workspace of `part` (the session's state s, or its second half's) hold `floats`; a move
// of the buffer invalidates every captured graph of the session.
void reserve_work(CudaSessionState& s, CudaSessionState& part, std::size_t floats) {
    if (part.work_floats < floats) {
        STATETRACK_CUDA(cudaStreamSynchronize(s.stream));  // the second half's work joins it
        s.drop_graphs();
        if (part.work) {
            STATETRACK_CUDA(cudaFree(part.work));
            part.bytes -= part.work_floats * sizeof(float);
        }
        part.work = nullptr;
        part.work_floats = 0;
        part.work = device_alloc<float>(part, floats);
        part.work_floats = floats;
    }
}
// Makes the current slot's inputs hold plan p's batch.
void reserve_inputs(CudaSessionState& s, const Plan& p) {
    const std::size_t need = inputs_capacity(p.B, p.T);
    CudaSessionState::Slot& k = s.slot();
    if (k.inputs_capacity < need) {
        STATETRACK_CUDA(cudaStreamSynchronize(s.stream));
        STATETRACK_CUDA(cudaStreamSynchronize(s.upload));
        if (k.inputs_host) STATETRACK_CUDA(cudaFreeHost(k.inputs_host));
        if (k.inputs_device) STATETRACK_CUDA(cudaFree(k.inputs_device)), s.bytes -= k.inputs_capacity;
        k.inputs_host = k.inputs_device = nullptr, k.inputs_capacity = 0;
        s.drop_graphs(s.current);  // this slot's graphs read the old inputs
        STATETRACK_CUDA(cudaMallocHost(&k.inputs_host, need));
        k.inputs_device = device_alloc<std::byte>(s, need);
        k.inputs_capacity = need;
    }
}

// Tests: NaN everywhere in the workspace and the gradients (the second half's too), so a read of
// anything not written first shows.
void poison(const CudaSession& session) {
    if (!session.options.poison) return;
    CudaSessionState& s = *session.state;
    for (CudaSessionState* part : {&s, s.half.get()}) {
        if (!part) continue;
        STATETRACK_CUDA(cudaMemsetAsync(part->work, 0xff, part->work_floats * sizeof(float), s.stream));
        STATETRACK_CUDA(cudaMemsetAsync(part->grads, 0xff, s.layout.total * sizeof(float), s.stream));
        if (part->results) STATETRACK_CUDA(cudaMemsetAsync(part->results, 0xff, sizeof(StepResults), s.stream));
    }
}

// A training step on at least CudaOptions::halves_from_rows rows, its words not packed and even in
// number, runs in two halves of B / 2 words each, the second on the state's `half` with streams of its
// own: the halves' latency-bound recurrences and bandwidth-bound products and norms then overlap.
// Deltanet at the paper's sizes, --matmul bf16, H100: 6.85-6.89 ms a step in halves against
// 7.13-7.16 whole at T = 256, but 3.79-3.80 against 3.65 at T = 128 (halves of 65,536 rows), and two
// sessions of 512 words were slower than one of 1024 at T = 40; TF32 steps gain ~0.2% at T = 256
// (docs/PERFORMANCE.md, 2026-11-27, nineteenth session). Both halves' streams take the session's
// priority: the second half's a step lower, or the lowest, gave 6.90-6.93 ms.
bool splits_in_halves(const CudaSession& session, const Plan& p) {
    const std::size_t from = session.options.halves_from_rows;
    return p.training && !p.packed && p.B % 2 == 0 && from != 0 && p.N >= from;
}
// Whether the session lets a step's MLP backward rebuild gate and up (Plan::recompute_gate_up).
bool recompute_gate_up(const CudaSession& session) {
    return session.options.fused_products && session.options.recompute_gate_up;
}
// The plan of each half of plan p's batch.
Plan half_plan(const CudaSession& session, const Plan& p) {
    return make_plan(session.config, p.B / 2, p.T, true, p.mlp16, cuda_runs_chunked(session), recompute_gate_up(session),
                     session.options.fused_products && session.options.first_layer_by_token);
}
// The inputs of the batch's first half (words 0 .. B / 2 - 1) or second (the rest), for the plan h of a
// half: word b at rows b T .., as the batch is not packed. The step's values are the whole batch's
// (its labelled count among them: each half's loss is a part of the batch's mean); results: the
// half's own sums.
StepInputs half_inputs(const StepInputs& in, const Plan& h, bool second, StepResults* results) {
    if (!second) return {in.params, in.results, in.tokens, in.targets, in.lengths, nullptr};
    return {in.params, results, in.tokens + h.N, in.targets + h.N, in.lengths + h.B, nullptr};
}

void check_batch_shape(const Batch& batch) {
    const std::size_t N = batch.batch * batch.length;
    if (N == 0) throw InputError("batch", "", "empty batch");
    if (batch.targets.empty()) throw InputError("batch", "targets", "the CUDA backend needs the targets");
    check_batch(batch);
}

// The staged batch's words moved together, in place: [tokens N][targets N][lengths B][offsets B] with
// N = p.N rows (word b from offsets[b]; the rows after the last word hold token 0 and no label).
// Each word moves to a row at or before its padded one, so in increasing order nothing is
// overwritten before it is read.
void pack_words(std::int32_t* staged, const Batch& batch, const Plan& p) {
    const std::size_t B = batch.batch, T = batch.length, padded = B * T;
    const std::int32_t* lengths = staged + 2 * padded;
    std::vector<std::int32_t> offsets(B);
    std::size_t row = 0;
    for (std::size_t b = 0; b < B; ++b) {
        offsets[b] = std::int32_t(row);
        const std::size_t len = std::size_t(lengths[b]);
        std::memmove(staged + row, staged + b * T, len * sizeof(std::int32_t));
        row += len;
    }
    std::fill(staged + row, staged + p.N, 0);
    // the targets after the tokens: from padded + b T to p.N + offsets[b] (not after its source either)
    for (std::size_t b = 0; b < B; ++b)
        std::memmove(staged + p.N + offsets[b], staged + padded + b * T, std::size_t(lengths[b]) * sizeof(std::int32_t));
    std::fill(staged + p.N + row, staged + 2 * p.N, -1);
    std::memmove(staged + 2 * p.N, lengths, B * sizeof(std::int32_t));
    std::memcpy(staged + 2 * p.N + B, offsets.data(), B * sizeof(std::int32_t));
}

// Stages the batch in the slot's pinned memory (enqueue_upload copies it to the device), checking
// its values and counting its labelled positions (labelled_positions' count) on the way: one
// branch-free pass that vectorises. The GPU is idle while the host does this, and the
// checks, the copies and the two counts as separate passes took ~0.26 ms a step at T = 256 (0.07 ms
// as one pass; build VM, -O3). Nothing is enqueued for a bad batch.
void stage_batch(const CudaSession& session, CudaSessionState& s, const Batch& batch, const Plan& p) {
    const std::size_t N = batch.batch * batch.length;
    const auto vocab = std::uint32_t(std::min<std::size_t>(session.config.vocab, UINT32_MAX));
    const auto classes = std::uint32_t(std::min<std::size_t>(session.config.classes, UINT32_MAX));
    const std::int32_t* tokens = batch.tokens.data();
    const std::int32_t* targets = batch.targets.data();
    std::int32_t* staged = ints_in(s.slot().inputs_host);
    std::uint32_t bad_token = 0, bad_target = 0;
    std::size_t labelled = 0;
    for (std::size_t i = 0; i < N; ++i) {
        staged[i] = tokens[i];
        bad_token |= std::uint32_t(tokens[i]) >= vocab;  // a negative token is a large unsigned one
    }
    for (std::size_t i = 0; i < N; ++i) {
        const std::int32_t t = targets[i];
        staged[N + i] = t;
        bad_target |= (t >= 0) & (std::uint32_t(t) >= classes);
        labelled += t >= 0;
    }
    if (bad_token) throw InputError("batch", "", "token outside the vocabulary");
    if (bad_target) throw InputError("batch", "", "target outside the classes");
    for (std::size_t b = 0; b < batch.batch; ++b) staged[2 * N + b] = std::int32_t(word_length(batch, b));
    s.slot().labelled = labelled, s.slot().packed = p.packed;
    if (p.packed) pack_words(staged, batch, p);
}
// The slot's inputs to the device on the upload stream, which the session's stream then waits for.
// Enqueued before a step's graph, not inside it, so that the copy runs while the step before
// computes: a slot is staged again only once no step in flight reads it (cuda_start_step).
void enqueue_upload(CudaSessionState& s, const Plan& p) {
    const CudaSessionState::Slot& k = s.slot();
    STATETRACK_CUDA(cudaMemcpyAsync(k.inputs_device, k.inputs_host, inputs_bytes(p), cudaMemcpyHostToDevice, s.upload));
    STATETRACK_CUDA(cudaEventRecord(k.uploaded, s.upload));
    STATETRACK_CUDA(cudaStreamWaitEvent(s.stream, k.uploaded));
}

// Forward, loss and backward of plan p's words on `part`: the gradients into part's, the loss into
// in.results.
void loss_and_gradient_on(const CudaSession& session, CudaSessionState& part, const Plan& p, const StepInputs& in) {
    forward_pass(session, part, p, in);
    if (!p.head_fused)
        cross_entropy(part.work + p.logits, in.targets, part.work + p.dlogits, in.params, in.results, p.N, p.C,
                      part.work + p.partials, part.stream);
    if (p.grad16) backward_pass<bf16>(session, part, p, in);
    else backward_pass<float>(session, part, p, in);
}

void enqueue_loss_and_gradient(CudaSession& session, const Plan& p) {
    CudaSessionState& s = *session.state;
    const StepInputs in = inputs_at(s.slot().inputs_device, p);
    std::size_t partials = p.partials;
    if (!splits_in_halves(session, p)) {
        loss_and_gradient_on(session, s, p, in);
    } else {  // the second half forks once the inputs are on the device, and joins before the sums
        const Plan h = half_plan(session, p);
        CudaSessionState& t = *s.half;
        // the second half joins the session's stream on every way out, an exception's too (as
        // SideProducts' side stream): the caller then waits for it with the session's stream
        struct Join {
            CudaSessionState& s;
            bool done = false;
            void now() {
                STATETRACK_CUDA(cudaEventRecord(s.join, s.half->stream));
                STATETRACK_CUDA(cudaStreamWaitEvent(s.stream, s.join));
                done = true;
            }
            ~Join() {
                if (!done && cudaEventRecord(s.join, s.half->stream) == cudaSuccess) cudaStreamWaitEvent(s.stream, s.join);
            }
        } join{s};
        STATETRACK_CUDA(cudaEventRecord(s.fork, s.stream));
        STATETRACK_CUDA(cudaStreamWaitEvent(t.stream, s.fork));
        STATETRACK_CUDA(cudaMemsetAsync(t.results, 0, sizeof(StepResults), t.stream));
        loss_and_gradient_on(session, s, h, half_inputs(in, h, false, nullptr));
        loss_and_gradient_on(session, t, h, half_inputs(in, h, true, t.results));
        join.now();
        add_half_step(s.grads, t.grads, s.layout.total, in.results, t.results, s.stream);
        partials = h.partials;  // the workspace holds a half's plan
    }
    gradient_square_sum(s.grads, in.results, s.layout.total, s.work + partials, s.stream);
}
// to_host: the step's results into the slot's pinned results_host by the AdamW kernel itself (the
// last node of a training step's graph was a device-to-host copy of them, and the next step's graph
// waited ~9-14 us after it: bench_step_timeline, H100), or null (enqueue_results copies them).
void enqueue_adamw(CudaSession& session, StepResults* to_host = nullptr) {
    CudaSessionState& s = *session.state;
    void* in = s.slot().inputs_device;
    // the bf16 copy by the same kernel: a separate to_bf16 after it was a launch and ~10 us at the
    // start of every bf16 step's chain (bench_step_timeline, H100)
    adamw(params_in(in), results_in(in), s.decay_mask, s.params, s.grads, s.m, s.v, s.layout.total, s.stream,
          to_host, s.params16);
}
void enqueue_results(CudaSessionState& s) {
    STATETRACK_CUDA(
        cudaMemcpyAsync(s.slot().results_host, results_in(s.slot().inputs_device), sizeof(StepResults),
                        cudaMemcpyDeviceToHost, s.stream));
}

void set_step_params(CudaSessionState& s, const AdamWOptions* o, std::size_t step, double lr) {
    *results_in(s.slot().inputs_host) = StepResults{};  // the step's sums start from zero
    StepParams& h = *params_in(s.slot().inputs_host);
    h = StepParams{};
    h.count = float(s.slot().labelled);
    if (o) {
        h.lr = float(lr), h.decay = float(1 - lr * o->weight_decay);
        h.c1 = float(1 - std::pow(o->beta1, double(step + 1)));
        h.c2 = float(1 - std::pow(o->beta2, double(step + 1)));
        h.beta1 = float(o->beta1), h.beta2 = float(o->beta2), h.eps = float(o->eps), h.clip = o->clip;
    }
}

// The results of a slot's step, once its work on the stream is done.
CudaStepResult slot_results(const CudaSessionState::Slot& k) {
    const std::size_t count = k.labelled;
    return {count ? k.results_host->loss_sum / double(count) : 0.0, std::sqrt(k.results_host->grad_sq),
            std::size_t(k.results_host->correct), count, k.packed};
}
CudaStepResult finish(CudaSessionState& s) {
    STATETRACK_CUDA(cudaStreamSynchronize(s.stream));
    return slot_results(s.slot());
}

// Every call runs on the session's GPU, whichever device the calling thread had current.
CudaSessionState& on_device(const CudaSession& session) {
    CudaSessionState& s = *session.state;
    STATETRACK_CUDA(cudaSetDevice(s.device));
    return s;
}
// The same for the calls other than cuda_start_step and cuda_finish_step: no step may be in flight
// (they would stage into a slot a step still reads, or read weights a step is changing).
CudaSessionState& idle_on_device(const CudaSession& session) {
    CudaSessionState& s = on_device(session);
    if (!s.in_flight.empty())
        throw std::logic_error("CUDA session: " + std::to_string(s.in_flight.size()) +
                               " training step(s) in flight; cuda_finish_step first");
    return s;
}

// Host memory to the device in the order of the state's stream, and waited for. A plain cudaMemcpy
// from pageable memory may return before its DMA lands, and the session's streams
// (cudaStreamNonBlocking) do not wait for the legacy stream: upload_parameters' to_bf16 then read
// weights half copied, and the first bf16 steps' losses differed from run to run (1.23, 1.71 or 2.17
// for one batch: CudaBackend.Bf16StepsOnManyRowsRepeatBitForBit, H100).
void copy_in(const CudaSessionState& s, void* dst, const void* src, std::size_t bytes) {
    STATETRACK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.stream));
    STATETRACK_CUDA(cudaStreamSynchronize(s.stream));
}
// A parameter-shaped buffer (weights, gradients, moments) between the host, in the canonical order,
// and the device, in the device's.
void copy_to_device(const CudaSession& session, float* dst, std::span<const float> src) {
    if (src.size() != session.layout.total) throw InputError("parameters", "", "size does not match the layout");
    const CudaSessionState& s = idle_on_device(session);
    std::vector<float> ordered(s.layout.total);
    reorder_parameters(session.layout, src, s.layout, ordered);
    copy_in(s, dst, ordered.data(), ordered.size() * sizeof(float));
}
// `padded`: the buffer's name where its padding rows must be 0 (weights and moments: a kernel that
// wrote there would change the products' sums), null for the gradients (a poisoned session fills
// them with NaN before passes that do not clear them).
void copy_to_host(const CudaSession& session, std::span<float> dst, const float* src, const char* padded) {
    if (dst.size() != session.layout.total) throw InputError("parameters", "", "size does not match the layout");
    const CudaSessionState& s = idle_on_device(session);
    STATETRACK_CUDA(cudaStreamSynchronize(s.stream));
    std::vector<float> ordered(s.layout.total);
    STATETRACK_CUDA(cudaMemcpy(ordered.data(), src, ordered.size() * sizeof(float), cudaMemcpyDeviceToHost));
    if (const std::size_t i = padded ? first_nonzero_padding(s.layout, ordered) : s.layout.total; i != s.layout.total)
        throw std::logic_error("CUDA session: the device's " + std::string(padded) + " hold " +
                               std::to_string(ordered[i]) + " at entry " + std::to_string(i) + ", a padding row's, not 0");
    reorder_parameters(s.layout, ordered, session.layout, dst);
}

// The rows a training step on `batch` runs on where it packs its words (cuda_packs_words), 0 where
// it does not: the sum of their lengths, rounded up to a multiple of 256 so that batches of random
// lengths share a few captured graphs, where that is fewer than B T. Where a warp of the
// step-by-step kernels holds one word's heads (recurrences_pack: head_dim 32, the chunked kernels'
// only size, or a smaller one whose groups a warp divides the heads); the LSTM steps all words at
// once, a time step at a time.
std::size_t packed_rows(const CudaSession& session, const Batch& batch) {
    const ModelConfig& c = session.config;
    if (!session.options.packed || c.mixer == Mixer::lstm || !recurrences_pack(c.head_dim(), c.heads)) return 0;
    std::size_t rows = 0;
    for (std::size_t b = 0; b < batch.batch; ++b) rows += word_length(batch, b);
    rows = (rows + 255) / 256 * 256;
    return rows < batch.batch * batch.length ? rows : 0;
}

// A state's streams and products (the session's, and a second half's: CudaSessionState::half): its
// stream, cuBLAS and cuBLASLt on it with a workspace, the weight gradients' side stream with a handle
// and workspace of its own, the events that fork and join the side stream, and the halves' two.
void make_streams(CudaSessionState& s, const CudaOptions& options, std::size_t layers) {
    // The chain of input gradients ahead of the side stream's weight gradients (SideProducts): where
    // both have blocks waiting, the chain's take the SMs first, and the weight gradients fill the gaps
    // and tails it leaves. TF32 and bf16 steps 0 to -1.5% (H100). Not under --matmul fp32, whose
    // weight gradients are long SIMT products: held back so, they ran past the chain's end (+8% at T =
    // 40). The graphs keep the priority (cudaGraphInstantiateFlagUseNodePriority).
    int least_priority = 0, greatest_priority = 0;
    STATETRACK_CUDA(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
    const int priority = options.matmul == MatmulPrecision::fp32 ? least_priority : greatest_priority;
    STATETRACK_CUDA(cudaStreamCreateWithPriority(&s.stream, cudaStreamNonBlocking, priority));
    STATETRACK_BLAS(cublasCreate(&s.blas));
    STATETRACK_BLAS(cublasLtCreate(&s.lt));
    STATETRACK_BLAS(cublasSetStream(s.blas, s.stream));
    s.blas_workspace = device_alloc<char>(s, blas_workspace_bytes);
    STATETRACK_BLAS(cublasSetWorkspace(s.blas, s.blas_workspace, blas_workspace_bytes));
    STATETRACK_CUDA(cudaStreamCreateWithFlags(&s.side, cudaStreamNonBlocking));
    STATETRACK_BLAS(cublasCreate(&s.blas_side));
    STATETRACK_BLAS(cublasSetStream(s.blas_side, s.side));
    s.blas_side_workspace = device_alloc<char>(s, blas_workspace_bytes);
    STATETRACK_BLAS(cublasSetWorkspace(s.blas_side, s.blas_side_workspace, blas_workspace_bytes));
    s.events.resize(side_events(layers));
    for (cudaEvent_t& e : s.events) STATETRACK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    const bool exact = options.matmul == MatmulPrecision::fp32;
    s.compute = exact ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F_FAST_TF32;
    for (cublasHandle_t h : {s.blas, s.blas_side})
        STATETRACK_BLAS(cublasSetMathMode(h, exact ? CUBLAS_PEDANTIC_MATH : CUBLAS_TF32_TENSOR_OP_MATH));
    for (cudaEvent_t* e : {&s.fork, &s.join}) STATETRACK_CUDA(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
}

// The state of a step's second half (splits_in_halves), made at the first such step: streams and
// products as the session's, gradients and results of its own.
CudaSessionState& second_half(const CudaSession& session) {
    CudaSessionState& s = *session.state;
    if (!s.half) {
        auto half = std::make_unique<CudaSessionState>();
        half->device = s.device;
        make_streams(*half, session.options, session.config.layers);
        half->grads = device_alloc<float>(*half, s.layout.total);
        half->results = device_alloc<StepResults>(*half, 1);
        s.half = std::move(half);
    }
    return *s.half;
}

// The plan of a batch call on `batch` (training: a training step's, whose words may be packed).
Plan batch_plan(const CudaSession& session, const Batch& batch, bool training) {
    return make_plan(session.config, batch.batch, batch.length, training, session.state->params16 != nullptr,
                     cuda_runs_chunked(session), recompute_gate_up(session),
                     session.options.fused_products && session.options.first_layer_by_token,
                     training ? packed_rows(session, batch) : 0);
}

// The start of every batch call: checks, the session's GPU, the workspace for this shape, the batch
// staged in pinned memory and the step's values (adamw null: no optimizer step).
Plan prepare(CudaSession& session, const Batch& batch, bool training, const AdamWOptions* adamw, std::size_t step,
             double lr) {
    check_batch_shape(batch);
    CudaSessionState& s = on_device(session);
    const Plan p = batch_plan(session, batch, training);
    if (splits_in_halves(session, p)) {
        const std::size_t floats = half_plan(session, p).total;
        reserve_work(s, s, floats);
        reserve_work(s, second_half(session), floats);
    } else {
        reserve_work(s, s, p.total);
    }
    reserve_inputs(s, p);
    // the slot's last upload has read its host buffer (always, unless a call failed after enqueueing
    // it: the steps' and calls' own waits cover the rest)
    STATETRACK_CUDA(cudaEventSynchronize(s.slot().uploaded));
    stage_batch(session, s, batch, p);
    set_step_params(s, adamw, step, lr);
    return p;
}

}  // namespace

bool cuda_backend_built() { return true; }

bool cuda_available(std::string* why) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
        if (why) *why = status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device";
        cudaGetLastError();
        return false;
    }
    return true;
}

std::string cuda_device_description() {
    if (!cuda_available()) return {};
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return {};
    char text[512];
    std::snprintf(text, sizeof text, "%s, %d SMs, %.1f GiB", prop.name, prop.multiProcessorCount,
                  double(prop.totalGlobalMem) / double(1u << 30));
    return text;
}

CudaSession make_cuda_session(const ModelConfig& config, const CudaOptions& options) {
    std::string why;
    if (!cuda_available(&why)) unavailable("no usable CUDA device: " + why);
    int count = 0;
    STATETRACK_CUDA(cudaGetDeviceCount(&count));
    if (options.device < 0 || options.device >= count)
        throw InputError("--cuda-device", std::to_string(options.device),
                         "no such GPU: this machine has " + std::to_string(count) + " (0.." + std::to_string(count - 1) + ")");
    validate(config);
    if (config.mixer != Mixer::lstm &&
        std::find(std::begin(cuda_head_dims), std::end(cuda_head_dims), config.head_dim()) == std::end(cuda_head_dims))
        throw InputError("--heads", std::to_string(config.heads),
                         "the CUDA backend needs d_model / heads in 4, 8, 16, 32 (got " + std::to_string(config.head_dim()) + ")");
    if (config.conv_kernel > 8)
        throw InputError("conv_kernel", std::to_string(config.conv_kernel), "the CUDA backend's convolutions take at most 8 taps");
    // The recurrences stage their conv'd columns (1 + 2 factors per lane; mamba 3) in shared memory,
    // 4 or 8 taps' worth (recurrences.cu): an H100 takes every deltaproduct:N with up to 4 taps and
    // N <= 8 with up to 8; a GPU with less shared memory per block takes less.
    if (config.mixer != Mixer::lstm) {
        const std::size_t need = config.mixer == Mixer::mamba ? diagonal_shared_bytes(config.conv_kernel)
                                                              : delta_shared_bytes(config.factors, config.conv_kernel);
        int limit = 0;
        STATETRACK_CUDA(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, options.device));
        if (need > std::size_t(limit))
            throw InputError("conv_kernel", std::to_string(config.conv_kernel),
                             "the CUDA recurrence kernels of " + model_name(config) + " with " +
                                 std::to_string(config.conv_kernel) + " conv taps need " + std::to_string(need) +
                                 " bytes of shared memory per block; this GPU allows " + std::to_string(limit) +
                                 " (fewer factors, or at most 4 taps, need less)");
    }
    if (options.matmul == MatmulPrecision::bf16 &&
        (config.d_model % 4 || config.d_model > 512 || config.mlp_width() % 4))
        throw InputError("--matmul", "bf16",
                         "bf16 products need d_model and the MLP width multiples of 4, and d_model at most 512 (got " +
                             std::to_string(config.d_model) + " and " + std::to_string(config.mlp_width()) + ")");
    CudaSession session{config, parameter_layout(config), options, nullptr};
    session.state.reset(new CudaSessionState);
    session.state->device = options.device;
    session.state->layout = parameter_layout(config, GateSlot::after_values);
    CudaSessionState& s = on_device(session);
    const std::size_t total = s.layout.total;  // the canonical total and the projections' padding rows
    make_streams(s, options, config.layers);
    s.params = device_alloc<float>(s, total), s.grads = device_alloc<float>(s, total);
    if (options.matmul == MatmulPrecision::bf16) s.params16 = device_alloc<bf16>(s, total);
    s.m = device_alloc<float>(s, total), s.v = device_alloc<float>(s, total);
    // on the session's stream (copy_in): the legacy stream's memsets are not ordered before its work
    for (float* zeroed : {s.m, s.v, s.grads}) STATETRACK_CUDA(cudaMemsetAsync(zeroed, 0, total * sizeof(float), s.stream));
    std::vector<std::uint8_t> mask(total, 0);
    for (const auto& t : s.layout.tensors)
        if (t.decay) std::fill(mask.begin() + std::ptrdiff_t(t.offset), mask.begin() + std::ptrdiff_t(t.offset + t.size()), 1);
    s.decay_mask = device_alloc<std::uint8_t>(s, total);
    copy_in(s, s.decay_mask, mask.data(), total);
    STATETRACK_CUDA(cudaStreamCreateWithFlags(&s.upload, cudaStreamNonBlocking));
    for (CudaSessionState::Slot& k : s.slots) {
        // the step values' part of the inputs from the start (cuda_adamw_step needs no batch); reserve grows it
        k.inputs_capacity = inputs_capacity(0, 0);
        STATETRACK_CUDA(cudaMallocHost(&k.inputs_host, k.inputs_capacity));
        k.inputs_device = device_alloc<std::byte>(s, k.inputs_capacity);
        STATETRACK_CUDA(cudaMallocHost(&k.results_host, sizeof(StepResults)));
        STATETRACK_CUDA(cudaEventCreateWithFlags(&k.done, cudaEventDisableTiming));
        STATETRACK_CUDA(cudaEventCreateWithFlags(&k.uploaded, cudaEventDisableTiming));
    }
    return session;
}

void upload_parameters(CudaSession& session, std::span<const float> params) {
    copy_to_device(session, session.state->params, params);
    CudaSessionState& s = *session.state;
    if (s.params16) {
        to_bf16(s.params, s.params16, s.layout.total, s.stream);
        STATETRACK_CUDA(cudaStreamSynchronize(s.stream));
    }
}
void download_parameters(const CudaSession& session, std::span<float> params) {
    copy_to_host(session, params, session.state->params, "weights");
}
void upload_moments(CudaSession& session, std::span<const float> m, std::span<const float> v) {
    copy_to_device(session, session.state->m, m);
    copy_to_device(session, session.state->v, v);
}
void download_moments(const CudaSession& session, std::span<float> m, std::span<float> v) {
    copy_to_host(session, m, session.state->m, "first moments");
    copy_to_host(session, v, session.state->v, "second moments");
}
void download_gradients(const CudaSession& session, std::span<float> grads) {
    copy_to_host(session, grads, session.state->grads, nullptr);
}

void cuda_forward(CudaSession& session, const Batch& batch, std::vector<float>& logits) {
    idle_on_device(session);
    const Plan p = prepare(session, batch, false, nullptr, 0, 0);
    CudaSessionState& s = *session.state;
    poison(session);
    enqueue_upload(s, p);
    forward_pass(session, s, p, inputs_at(s.slot().inputs_device, p));
    logits.resize(p.N * p.C);
    STATETRACK_CUDA(cudaMemcpyAsync(logits.data(), s.work + p.logits, logits.size() * sizeof(float),
                                    cudaMemcpyDeviceToHost, s.stream));
    STATETRACK_CUDA(cudaStreamSynchronize(s.stream));
}

double cuda_loss_and_gradient(CudaSession& session, const Batch& batch) {
    return cuda_loss_gradient_correct(session, batch).loss;
}

CudaStepResult cuda_loss_gradient_correct(CudaSession& session, const Batch& batch) {
    idle_on_device(session);
    const Plan p = prepare(session, batch, true, nullptr, 0, 0);
    CudaSessionState& s = *session.state;
    poison(session);
    enqueue_upload(s, p);
    enqueue_loss_and_gradient(session, p);
    enqueue_results(s);
    return finish(s);
}

CudaStepResult cuda_adamw_step(CudaSession& session, const AdamWOptions& options, std::size_t step, double lr) {
    CudaSessionState& s = idle_on_device(session);
    STATETRACK_CUDA(cudaStreamSynchronize(s.stream));
    // the count stays the last batch's (its slot's labelled); only the optimizer fields change
    set_step_params(s, &options, step, lr);
    STATETRACK_CUDA(
        cudaMemcpyAsync(params_in(s.slot().inputs_device), params_in(s.slot().inputs_host), sizeof(StepParams),
                        cudaMemcpyHostToDevice, s.stream));
    enqueue_adamw(session);
    enqueue_results(s);
    STATETRACK_CUDA(cudaStreamSynchronize(s.stream));
    return {0.0, std::sqrt(s.slot().results_host->grad_sq)};
}

namespace {
// The step's work on the stream: its inputs' upload, its graph (captured at the first step of each
// shape and slot), or its launches, then the slot's event.
template <class Enqueue>
void launch_step(const CudaSession& session, CudaSessionState& s, const Plan& p, Enqueue enqueue_step) {
    poison(session);
    enqueue_upload(s, p);
    if (!session.options.graphs) {
        enqueue_step();
    } else {
        const auto shape = std::make_tuple(p.B, p.T, p.N, s.current);
        auto found = s.graphs.find(shape);
        if (found == s.graphs.end()) {
            cudaGraph_t graph = nullptr;
            STATETRACK_CUDA(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
            try {
                enqueue_step();
            } catch (...) {
                cudaStreamEndCapture(s.stream, &graph);
                if (graph) cudaGraphDestroy(graph);
                throw;
            }
            STATETRACK_CUDA(cudaStreamEndCapture(s.stream, &graph));
            Graph g;
            const cudaError_t status = cudaGraphInstantiate(&g.exec, graph, cudaGraphInstantiateFlagUseNodePriority);
            cudaGraphDestroy(graph);
            STATETRACK_CUDA(status);
            found = s.graphs.emplace(shape, g).first;
        }
        STATETRACK_CUDA(cudaGraphLaunch(found->second.exec, s.stream));
    }
    STATETRACK_CUDA(cudaEventRecord(s.slot().done, s.stream));
}
}  // namespace

void cuda_start_step(CudaSession& session, const Batch& batch, const AdamWOptions& options, std::size_t step, double lr) {
    CudaSessionState& s = on_device(session);
    if (s.in_flight.size() == s.slots.size())
        throw std::logic_error("cuda_start_step: two steps in flight already; cuda_finish_step first");
    // the slot no step in flight uses (the other one's buffers are still read by its step)
    s.current = s.in_flight.empty() ? s.current : 1 - s.in_flight.front();
    const Plan p = prepare(session, batch, true, &options, step, lr);
    auto enqueue_step = [&] {
        enqueue_loss_and_gradient(session, p);
        enqueue_adamw(session, s.slot().results_host);  // the results to the host with it
    };
    // A failure once work is enqueued (a launch, an event) leaves that work reading this slot's
    // buffers without the slot being in flight: wait for it before the error goes on.
    try {
        launch_step(session, s, p, enqueue_step);
    } catch (...) {
        cudaStreamSynchronize(s.stream);
        if (s.half) cudaStreamSynchronize(s.half->stream);
        throw;
    }
    s.in_flight.push_back(s.current);
}

CudaStepResult cuda_finish_step(CudaSession& session) {
    CudaSessionState& s = on_device(session);
    if (s.in_flight.empty()) throw std::logic_error("cuda_finish_step: no step in flight");
    const CudaSessionState::Slot& k = s.slots[s.in_flight.front()];
    s.in_flight.pop_front();
    STATETRACK_CUDA(cudaEventSynchronize(k.done));
    return slot_results(k);
}

std::size_t cuda_steps_in_flight(const CudaSession& session) { return session.state->in_flight.size(); }

CudaStepResult cuda_train_step(CudaSession& session, const Batch& batch, const AdamWOptions& options,
                               std::size_t step, double lr) {
    idle_on_device(session);
    cuda_start_step(session, batch, options, step, lr);
    return cuda_finish_step(session);
}

bool cuda_runs_chunked(const CudaSession& session) {
    const ModelConfig& c = session.config;
    if (c.mixer == Mixer::mamba || c.mixer == Mixer::lstm) return false;
    on_device(session);
    DeltaShape s{};  // what delta_runs_in_chunks reads: deltaproduct:2 to :4 run in chunks with at most 4 taps
    s.dh = c.head_dim(), s.F = c.factors, s.K = c.conv_kernel, s.chunks = session.options.chunked;
    return delta_runs_in_chunks(s);
}

bool cuda_packs_words(const CudaSession& session, const Batch& batch) { return packed_rows(session, batch) != 0; }

bool cuda_splits_in_halves(const CudaSession& session, const Batch& batch) {
    return splits_in_halves(session, batch_plan(session, batch, true));
}

bool cuda_first_layer_by_token(const CudaSession& session, const Batch& batch) {
    const Plan p = batch_plan(session, batch, true);
    return (splits_in_halves(session, p) ? half_plan(session, p) : p).x0_by_token;
}

std::size_t cuda_session_bytes(const CudaSession& session) {
    if (!session.state) return 0;
    const CudaSessionState& s = *session.state;
    return s.bytes + (s.half ? s.half->bytes : 0);
}

std::size_t cuda_device_bytes_in_use() {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    return total - free;
}

}  // namespace statetrack::gpu
