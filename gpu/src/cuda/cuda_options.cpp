// The parts of cuda_backend.hpp that need no CUDA, and the whole API in a build without nvcc
// (every call then explains that the backend is not built).
#include "statetrack/automata/error.hpp"
#include "statetrack/gpu/cuda_backend.hpp"

namespace statetrack::gpu {

MatmulPrecision parse_matmul_precision(const std::string& text) {
    if (text == "fp32") return MatmulPrecision::fp32;
    if (text == "tf32") return MatmulPrecision::tf32;
    if (text == "bf16") return MatmulPrecision::bf16;
    throw InputError("--matmul", text, "expected fp32, tf32 or bf16");
}
bool parse_cuda_recurrences(const std::string& text) {
    if (text == "chunked") return true;
    if (text == "steps") return false;
    throw InputError("--cuda-recurrences", text, "expected chunked or steps");
}
const char* cuda_recurrences_name(bool chunked) { return chunked ? "chunked" : "steps"; }
bool parse_cuda_words(const std::string& text) {
    if (text == "packed") return true;
    if (text == "padded") return false;
    throw InputError("--cuda-words", text, "expected packed or padded");
}
const char* cuda_words_name(bool packed) { return packed ? "packed" : "padded"; }
const char* to_string(MatmulPrecision precision) {
    switch (precision) {
        case MatmulPrecision::fp32: return "fp32";
        case MatmulPrecision::tf32: return "tf32";
        case MatmulPrecision::bf16: return "bf16";
    }
    return "?";
}

#ifndef STATETRACK_HAVE_CUDA_BACKEND

struct CudaSessionState {};
void CudaSessionDeleter::operator()(CudaSessionState* state) const { delete state; }

namespace {
[[noreturn]] void not_built() {
    throw InputError("--device", "cuda",
                     "this statetrack was built without the CUDA backend (nvcc was not found at configure time; "
                     "see docs/training.md, Running on a GPU)");
}
}  // namespace

bool cuda_backend_built() { return false; }
bool cuda_available(std::string* why) {
    if (why) *why = "built without the CUDA backend";
    return false;
}
std::string cuda_device_description() { return {}; }
CudaSession make_cuda_session(const ModelConfig&, const CudaOptions&) { not_built(); }
void upload_parameters(CudaSession&, std::span<const float>) { not_built(); }
void download_parameters(const CudaSession&, std::span<float>) { not_built(); }
void upload_moments(CudaSession&, std::span<const float>, std::span<const float>) { not_built(); }
void download_moments(const CudaSession&, std::span<float>, std::span<float>) { not_built(); }
void download_gradients(const CudaSession&, std::span<float>) { not_built(); }
void cuda_forward(CudaSession&, const Batch&, std::vector<float>&) { not_built(); }
double cuda_loss_and_gradient(CudaSession&, const Batch&) { not_built(); }
CudaStepResult cuda_loss_gradient_correct(CudaSession&, const Batch&) { not_built(); }
CudaStepResult cuda_adamw_step(CudaSession&, const AdamWOptions&, std::size_t, double) { not_built(); }
CudaStepResult cuda_train_step(CudaSession&, const Batch&, const AdamWOptions&, std::size_t, double) { not_built(); }
void cuda_start_step(CudaSession&, const Batch&, const AdamWOptions&, std::size_t, double) { not_built(); }
CudaStepResult cuda_finish_step(CudaSession&) { not_built(); }
std::size_t cuda_steps_in_flight(const CudaSession&) { return 0; }
bool cuda_runs_chunked(const CudaSession&) { not_built(); }
bool cuda_packs_words(const CudaSession&, const Batch&) { not_built(); }
bool cuda_splits_in_halves(const CudaSession&, const Batch&) { not_built(); }
bool cuda_first_layer_by_token(const CudaSession&, const Batch&) { not_built(); }
std::size_t cuda_session_bytes(const CudaSession&) { return 0; }
std::size_t cuda_device_bytes_in_use() { return 0; }

#endif

}  // namespace statetrack::gpu
