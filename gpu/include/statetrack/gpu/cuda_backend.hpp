#pragma once
// The CUDA backend: the model of model.hpp on one GPU, mirroring the CPU reference (cpu_backend.hpp)
// operation for operation, in fp32 (recurrent state, master weights, optimizer state). Matrix
// products go through cuBLAS: exact fp32 (MatmulPrecision::fp32, tested to 1e-5 against the
// reference), TF32 tensor cores with fp32 accumulation (MatmulPrecision::tf32, the fast default
// for training, tested to 2e-2), or bf16 operands for the SwiGLU MLP and the delta rules' projections
// (MatmulPrecision::bf16: their inputs and gradients are stored in bf16, but for the MLP's hidden
// gradient, which one kernel keeps in fp32 where the shape allows; fp32 accumulation and arithmetic,
// the rest TF32; mamba's projections stay TF32; tested like tf32). A whole training step (upload of the batch, forward, loss,
// backward, gradient norm, AdamW) is one CUDA graph per batch shape (B, T), replayed every step.
//
// This header has no CUDA types, so the trainer, the CLI and the tests compile without nvcc; without
// the backend (or without a GPU) cuda_available() is false and every other call throws InputError.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "statetrack/gpu/model.hpp"
#include "statetrack/gpu/optimizer.hpp"
#include "statetrack/gpu/task.hpp"

namespace statetrack::gpu {

enum class MatmulPrecision { fp32, tf32, bf16 };
MatmulPrecision parse_matmul_precision(const std::string& text);  // "fp32" | "tf32" | "bf16"
const char* to_string(MatmulPrecision precision);
// CudaOptions::chunked by name (--cuda-recurrences): "chunked" (true) or "steps" (false).
bool parse_cuda_recurrences(const std::string& text);
const char* cuda_recurrences_name(bool chunked);
// CudaOptions::packed by name (--cuda-words): "packed" (true) or "padded" (false).
bool parse_cuda_words(const std::string& text);
const char* cuda_words_name(bool packed);

// True when this build has the CUDA backend (nvcc was found at configure time).
bool cuda_backend_built();
// True when the backend is built and a CUDA device can be used; `why` says why not otherwise.
bool cuda_available(std::string* why = nullptr);
// "NVIDIA H100 80GB HBM3, 132 SMs, 79.1 GiB" (empty when unavailable).
std::string cuda_device_description();

struct CudaOptions {
    MatmulPrecision matmul = MatmulPrecision::tf32;
    bool graphs = true;  // capture each training-step shape once and replay it
    bool poison = false; // tests: fill the workspace and gradients with NaN before every call
    int device = 0;      // the GPU (cudaSetDevice) every call of the session runs on
    // deltanet, and deltaproduct:2 to :4 with up to 4 conv taps, at head_dim 32 in chunks of 16 steps
    // on the FP64 tensor cores, where the GPU runs them fast (A100, H100, H200); false: step by step,
    // as on every other shape and GPU (tests, comparisons)
    bool chunked = true;
    // training steps on words shorter than the batch's T run on the words' rows only
    // (cuda_packs_words); false: on all B T rows, padding included (tests, comparisons)
    bool packed = true;
    // --matmul bf16: products of our own with SwiGLU or an RMSNorm inside (fused_products.cu) where the
    // shape and the rows allow; false: cuBLAS, the SwiGLU and the norm kernels apart (tests, comparisons)
    bool fused_products = true;
    // with the fused products on Hopper (d_model 64 or 128, MLP width up to 256 at 128): the MLP's
    // backward rebuilds gate and up from the MLP norm's output (the same bits the forward would have
    // written), so the forward writes neither; false: the forward writes them and the backward reads
    // them (tests, comparisons)
    bool recompute_gate_up = true;
    // with recompute_gate_up and a bf16 dx (the delta rules, d_model 128): the MLP's backward and its
    // norm's in one kernel, so that dgu is not read back (mlp_backward_through_norm); false: the two
    // kernels apart (tests, comparisons)
    bool mlp_backward_through_norm = true;
    // with the fused products on Hopper (the delta rules at d_model 128, up to 8 letters): the first
    // layer's x, the embedding's rows by token, is never written (its readers take the table's rows),
    // and where the chunked kernels run, its projections are a table of the letters' rows that the
    // recurrence reads by token; false: x and the [rows][proj] projections written (tests, comparisons)
    bool first_layer_by_token = true;
    // Training steps on at least this many rows, with an even number of words and not packed, run as
    // two halves of the batch on two streams at once (each half its own workspace and gradients,
    // added before the gradient norm): the halves' latency-bound recurrence kernels and bandwidth-bound
    // products and norms overlap. 0: never (tests, comparisons). The default, 2^18 rows (T = 256 at B
    // = 1024), is where it was measured to pay: -4% there, +4% at T = 128 (docs/PERFORMANCE.md,
    // 2026-11-27, nineteenth session).
    std::size_t halves_from_rows = std::size_t(1) << 18;
};

// Head dimensions with a register-resident recurrence kernel (d_model / heads must be one of these).
inline constexpr std::size_t cuda_head_dims[] = {4, 8, 16, 32};

struct CudaSessionState;  // device buffers, cuBLAS handle, graphs (cuda_backend.cu)
struct CudaSessionDeleter {
    void operator()(CudaSessionState* state) const;
};

// One model on the device: parameters, gradients, AdamW moments and the activation workspace.
struct CudaSession {
    ModelConfig config;
    ParameterLayout layout;
    CudaOptions options;
    std::unique_ptr<CudaSessionState, CudaSessionDeleter> state;
};

// Throws InputError when CUDA is unavailable, options.device is not a GPU index, or the
// configuration has no kernel here: head_dim not in cuda_head_dims, more than 8 conv taps, a
// recurrence staging that needs more shared memory per block than the GPU has, or --matmul bf16
// with d_model or the MLP width not a multiple of 4 or d_model over 512.
CudaSession make_cuda_session(const ModelConfig& config, const CudaOptions& options = {});

// Host <-> device copies of the parameter buffer (layout.total values) and the optimizer state.
void upload_parameters(CudaSession& session, std::span<const float> params);
void download_parameters(const CudaSession& session, std::span<float> params);
void upload_moments(CudaSession& session, std::span<const float> m, std::span<const float> v);
void download_moments(const CudaSession& session, std::span<float> m, std::span<float> v);
void download_gradients(const CudaSession& session, std::span<float> grads);

// The result of one training step.
struct CudaStepResult {
    double loss = 0, grad_norm = 0;
    std::size_t correct = 0;   // labelled positions whose argmax (first maximum) is the target
    std::size_t labelled = 0;  // the batch's labelled positions (targets >= 0)
    bool packed = false;       // the step ran on its words' rows only (cuda_packs_words)
};

// Forward pass only; the logits, row-major [B*T][classes], come back into `logits`.
void cuda_forward(CudaSession& session, const Batch& batch, std::vector<float>& logits);

// Forward, cross-entropy and backward; gradients stay on the device (download_gradients).
// Returns the mean cross-entropy over the labelled positions, as loss_and_gradient does.
double cuda_loss_and_gradient(CudaSession& session, const Batch& batch);
// The same, with the gradient norm and the count of correct predictions.
CudaStepResult cuda_loss_gradient_correct(CudaSession& session, const Batch& batch);

// One AdamW step on the gradients of the last cuda_loss_and_gradient (as adamw_step with
// gradient_norm on the CPU, clipping included).
CudaStepResult cuda_adamw_step(CudaSession& session, const AdamWOptions& options, std::size_t step, double lr);

// cuda_loss_and_gradient + cuda_adamw_step as one graph replay (captured at the first step of each
// batch shape when options.graphs).
CudaStepResult cuda_train_step(CudaSession& session, const Batch& batch, const AdamWOptions& options,
                               std::size_t step, double lr);

// The same step in two halves, so that the host can sample and stage the next batch while a step
// runs: cuda_start_step stages the batch (it may be destroyed on return) and enqueues the step;
// cuda_finish_step waits for the oldest step started and returns its result. At most two steps are
// in flight; the session's other calls (forward, downloads, ...) need none in flight. They throw
// std::logic_error otherwise, and cuda_finish_step with none in flight.
void cuda_start_step(CudaSession& session, const Batch& batch, const AdamWOptions& options, std::size_t step, double lr);
CudaStepResult cuda_finish_step(CudaSession& session);
std::size_t cuda_steps_in_flight(const CudaSession& session);

// Whether the session runs its delta rule in chunks on the FP64 tensor cores: options.chunked,
// head_dim 32 with one factor (deltanet) or two to four and at most 4 conv taps (deltaproduct:2 to
// :4), and a GPU that runs the chunked kernels (sm_80 or later code, FP64 at half the FP32 rate).
// Otherwise its recurrences step token by token.
bool cuda_runs_chunked(const CudaSession& session);

// Whether a training step on `batch` packs its words (Batch): options.packed, the rows that hold
// them, rounded up to a multiple of 256, fewer than B T, a linear-attention mixer (deltanet,
// deltaproduct:N, mamba; not the LSTM) and head_dim 32 (the paper's d_model 128 with 4 heads). The
// step then runs its products, norms and MLP on those rows only, and the recurrence stops at each word's end;
// the result is the same up to rounding (the products sum over other rows). Forward passes
// (cuda_forward) keep the padded rows: their logits come back [B T][classes].
bool cuda_packs_words(const CudaSession& session, const Batch& batch);

// Whether a training step on `batch` runs in two halves (CudaOptions::halves_from_rows).
bool cuda_splits_in_halves(const CudaSession& session, const Batch& batch);
// Whether a training step on `batch` takes the first layer by token (CudaOptions::first_layer_by_token):
// the embedding's rows are never written, and where the chunked kernels run (cuda_runs_chunked) the
// projections are a table of the letters' rows that the recurrence reads by token.
bool cuda_first_layer_by_token(const CudaSession& session, const Batch& batch);

// Bytes of device memory the session's own allocations hold.
std::size_t cuda_session_bytes(const CudaSession& session);
// Bytes in use on the device now (total - free, every allocator of the process included: cuBLAS too).
std::size_t cuda_device_bytes_in_use();

}  // namespace statetrack::gpu
