#pragma once
// Everything that decides a training run (the CLI's `train` options), and its JSON form.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "statetrack/gpu/cuda_backend.hpp"
#include "statetrack/gpu/model.hpp"
#include "statetrack/gpu/optimizer.hpp"
#include "statetrack/gpu/task.hpp"

namespace statetrack::gpu {

enum class Precision { fp32, fp64 };
Precision parse_precision(const std::string& text);
const char* to_string(Precision precision);

// Where a run trains: the CPU reference (fp32 or fp64) or the CUDA backend (fp32 state and
// weights, TF32 or fp32 matrix products).
enum class Device { cpu, cuda };
Device parse_device(const std::string& text);  // "cpu" | "cuda"
const char* to_string(Device device);

// Documented limits (docs/training.md).
inline constexpr std::size_t max_batch = 1 << 16, max_steps = 100'000'000, max_eval_words = 1 << 16;

struct TrainOptions {
    ModelConfig model;  // vocab and classes come from the task
    AdamWOptions adamw;
    std::size_t batch = 32, steps = 1000;
    std::uint64_t seed = 1;
    LengthRange train_len{3, 40}, test_len{40, 256};
    std::size_t eval_every = 0;  // 0: steps / 10 (at least 1)
    std::size_t eval_words = 16; // words per test length
    Precision precision = Precision::fp32;
    Device device = Device::cpu;
    MatmulPrecision matmul = MatmulPrecision::tf32;  // CUDA only
    bool cuda_chunked = true;  // CUDA only: CudaOptions::chunked (--cuda-recurrences chunked or steps)
    bool cuda_packed = true;   // CUDA only: CudaOptions::packed (--cuda-words packed or padded)
    int cuda_device = 0;  // which GPU (CUDA only; a placement, not a setting: not stored, not compared on resume)
    std::string out_dir;
    bool resume = false;
    std::size_t stop_at = 0;  // stop (with a checkpoint) after this step, e.g. to fit a job's time limit; 0 = steps
    bool progress = true;  // a progress line on stderr about once a second

    std::size_t eval_interval() const { return eval_every ? eval_every : std::max<std::size_t>(1, steps / 10); }
};

// Throws InputError (place = the CLI option) for impossible settings.
void validate(const TrainOptions& options);

// The options that decide the trajectory of training (compared on --resume), and the rest.
nlohmann::json options_to_json(const TrainOptions& options);
TrainOptions options_from_json(const nlohmann::json& json, const std::string& origin);

}  // namespace statetrack::gpu
