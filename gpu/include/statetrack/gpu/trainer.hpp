#pragma once
// The training loop (CPU reference or CUDA backend, options.device) and evaluation at the test lengths.
//
// Outputs in options.out_dir: metrics.jsonl (one record per evaluation), checkpoint.bin (after
// each evaluation; never after a non-finite loss), summary.json (at the end). See docs/training.md.
#include <iosfwd>
#include <vector>

#include <nlohmann/json.hpp>

#include "statetrack/gpu/checkpoint.hpp"

namespace statetrack::gpu {

struct LengthAccuracy {
    std::size_t length = 0, words = 0;
    double accuracy = 0;  // final labels: fraction of words right; every position: of positions right
};

struct Evaluation {
    std::vector<LengthAccuracy> lengths;
    double accuracy = 0;         // mean over lengths
    double min_accuracy = 0;     // worst length
    double chance = 0;           // 1 / classes
    double scaled_accuracy = 0;  // (accuracy - chance) / (1 - chance)
};
nlohmann::json evaluation_to_json(const Evaluation& evaluation, bool per_length);

// A fixed test set: `words` words of every length in `lengths` (from a stream of `seed` that
// training never uses), run with the weights of `checkpoint` on the CPU (in the checkpoint's
// precision) or on GPU `cuda_device` (fp32, the checkpoint's matmul precision). A checkpoint from
// either device evaluates on either.
Evaluation evaluate(const Checkpoint& checkpoint, LengthRange lengths, std::size_t words, Device device = Device::cpu,
                    int cuda_device = 0);

// Trains (or resumes, with options.resume) and returns the summary (also written to summary.json).
// Throws InputError for a mismatched checkpoint on resume, for a loss that turns non-finite, and for
// --device cuda where the backend is not built or no GPU can be used. Thread-safe for concurrent
// runs on distinct GPUs (options.cuda_device).
nlohmann::json train(const Task& task, const TrainOptions& options, std::ostream* progress);

}  // namespace statetrack::gpu
