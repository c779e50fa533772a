#pragma once
// Checkpoints: self-contained (task DFA, model, options, step, weights, AdamW moments, metrics so
// far), written atomically, checked by a checksum on reading.
//
// File layout: the line "statetrack.checkpoint/1\n"; the header length as 8 bytes little-endian;
// the header (JSON); params, m, v as `total` IEEE fp64 values each, little-endian; an FNV-1a
// 64-bit checksum of everything before it (8 bytes little-endian). fp32 runs store their values
// widened to fp64, which is exact, so --resume continues bit-identically.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statetrack/gpu/train_options.hpp"

namespace statetrack::gpu {

struct Checkpoint {
    Task task;
    TrainOptions options;
    std::size_t step = 0;  // optimizer steps done
    std::vector<double> params, m, v;
    nlohmann::json history = nlohmann::json::array();  // the metrics records so far
};

std::string encode_checkpoint(const Checkpoint& checkpoint);
Checkpoint decode_checkpoint(const std::string& bytes, const std::string& origin);
void write_checkpoint(const std::string& path, const Checkpoint& checkpoint);  // atomically
Checkpoint read_checkpoint(const std::string& path);

}  // namespace statetrack::gpu
