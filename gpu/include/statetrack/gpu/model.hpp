#pragma once
// The one model definition shared by the CPU reference and the CUDA backend (docs/training.md):
// token embedding; L blocks of
//   [RMSNorm -> q,k,v projections -> short causal depthwise conv (kernel 4) -> SiLU -> gates ->
//    recurrence -> per-head RMSNorm -> output projection -> residual]
//   [RMSNorm -> SwiGLU MLP -> residual];
// final RMSNorm; linear head. All parameters live in ONE contiguous buffer whose layout (the
// offset and shape of every tensor) is computed here and nowhere else.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace statetrack::gpu {

enum class Mixer { deltanet, deltaproduct, mamba, lstm };
enum class EigRange { unit, signed_unit };  // [0, 1] and [-1, 1]

struct ModelConfig {
    Mixer mixer = Mixer::deltanet;
    std::size_t factors = 1;  // Householder factors per token (deltaproduct:N); 1 otherwise
    EigRange eig = EigRange::signed_unit;
    std::size_t layers = 1, d_model = 16, heads = 1;
    std::size_t vocab = 2, classes = 2;
    std::size_t mlp_hidden = 0;  // SwiGLU width; 0 means 2 * d_model
    std::size_t conv_kernel = 4;

    std::size_t head_dim() const { return d_model / heads; }
    std::size_t mlp_width() const { return mlp_hidden ? mlp_hidden : 2 * d_model; }
    // beta = beta_scale * sigmoid(z): 1 for [0, 1], 2 for [-1, 1] (the write term scales with it).
    double beta_scale() const { return eig == EigRange::signed_unit ? 2.0 : 1.0; }
};

// Documented limits (docs/training.md) so a typo cannot ask for terabytes.
inline constexpr std::size_t max_layers = 64, max_d_model = 4096, max_factors = 16;

// "deltanet", "deltaproduct:N", "mamba", "lstm" -> mixer and factors (InputError otherwise).
void parse_model_name(const std::string& text, ModelConfig& config);
EigRange parse_eig_range(const std::string& text);  // "0,1" or "-1,1"
std::string model_name(const ModelConfig& config);
const char* to_string(EigRange eig);
// Throws InputError (place = the CLI option) for impossible hyperparameters.
void validate(const ModelConfig& config);

nlohmann::json config_to_json(const ModelConfig& config);
ModelConfig config_from_json(const nlohmann::json& json, const std::string& origin);

inline constexpr std::size_t absent = static_cast<std::size_t>(-1);

// One tensor in the parameter buffer: row-major [rows][cols] at `offset`. Linear weights follow
// the PyTorch convention [out][in] (y = x W^T + b).
struct TensorSlot {
    std::string name;
    std::size_t offset = 0, rows = 0, cols = 0;
    bool decay = false;  // AdamW weight decay applies (linear weights and the embedding)
    std::size_t size() const { return rows * cols; }
};

// Offsets of one block's tensors (absent where the mixer has none).
struct LayerSlots {
    std::size_t norm1 = absent;
    // linear-attention mixers (deltanet, deltaproduct, mamba)
    std::size_t wq = absent, wk = absent, wv = absent;           // [d][d], [F d][d], [F d][d]
    std::size_t conv_q = absent, conv_k = absent, conv_v = absent;  // [channels][kernel]
    std::size_t wbeta = absent;                                  // [F H][d] (deltanet, deltaproduct)
    std::size_t wdt = absent, bdt = absent, decay_log = absent;  // [d][d], [d], [d] (mamba)
    std::size_t onorm = absent;                                  // [d] per-head RMSNorm gain
    // lstm
    std::size_t lstm_wx = absent, lstm_wh = absent, lstm_bias = absent;  // [4d][d], [4d][d], [4d]
    std::size_t wo = absent;                                     // [d][d]
    std::size_t norm2 = absent, wgate = absent, wup = absent, wdown = absent;  // [d], [m][d], [m][d], [d][m]
};

struct ParameterLayout {
    std::vector<TensorSlot> tensors;  // in buffer order
    std::vector<LayerSlots> layers;
    std::size_t embed = absent, norm_f = absent, head = absent, head_bias = absent;
    std::size_t total = 0;
};

// Where a mixer's gate projection (wbeta, or mamba's wdt) sits in the buffer: after the conv taps
// (the canonical order: checkpoints, the CPU backend, init_parameters), or right after wv, where the
// CUDA backend keeps it on the device so that [wq; wk; wv; gate] is one matrix and the four
// projections are one product. There the block is followed by rows that belong to no tensor (zeros
// on the device), up to projection_rows(config): with a multiple of 8 rows, the product's fp32
// output rows and the bf16 rows of its gradient (the input gradient's operand) are multiples of 16
// bytes, which cuBLAS's sm90 kernels need (H100, deltanet at d_model 128 and 4 heads, 388 rows:
// cublasGemmEx alone took 310 us for the bf16 forward at T = 256, 214 us at 392 rows). The layout's
// total then counts those rows too.
enum class GateSlot { after_taps, after_values };
inline constexpr std::size_t projection_rows_multiple = 8;
// The rows of [wq; wk; wv; gate] rounded up to projection_rows_multiple (linear-attention mixers).
std::size_t projection_rows(const ModelConfig& config);
ParameterLayout parameter_layout(const ModelConfig& config, GateSlot gate = GateSlot::after_taps);
// dst (laid out as `to`) receives every tensor of src (laid out as `from`); the two layouts hold the
// same tensors, possibly in another order.
void reorder_parameters(const ParameterLayout& from, std::span<const float> src, const ParameterLayout& to,
                        std::span<float> dst);
// The first entry of `buffer` (laid out as `layout`) that belongs to no tensor and is not zero, or
// layout.total where there is none. The device keeps its padding rows at 0 (nothing writes them:
// their gradient, moments and weights stay 0), and the products sum over them, so the CUDA backend
// checks this on every download of weights and moments.
std::size_t first_nonzero_padding(const ParameterLayout& layout, std::span<const float> buffer);
nlohmann::json layout_to_json(const ParameterLayout& layout);

// Deterministic initial weights from `seed` (docs/training.md lists the distributions).
template <class Scalar>
void init_parameters(const ModelConfig& config, const ParameterLayout& layout, std::uint64_t seed, std::span<Scalar> params);

}  // namespace statetrack::gpu
