#pragma once
// Sequence tasks from DFAs: uniform random words over the alphabet, labelled with the DFA's state
// class at the final position (parity-style) or at every position (word-problem style).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statetrack/automata/dfa.hpp"

namespace statetrack::gpu {

enum class LabelMode { final_position, every_position };
enum class Target { accept, state };  // accept: 2 classes (0 reject, 1 accept); state: one class per DFA state

struct LengthRange {
    std::size_t min = 3, max = 40;
};
// Largest word length the trainer accepts (docs/training.md); bounds memory and time.
inline constexpr std::size_t max_word_length = 1 << 16;

struct Task {
    automata::Dfa dfa;
    std::string spec;  // how the user named it (zoo:parity, a path)
    LabelMode label = LabelMode::final_position;
    Target target = Target::accept;
};

std::size_t num_classes(const Task& task);
inline std::size_t vocab_size(const Task& task) { return task.dfa.num_letters(); }

// A batch: B words, padded at the end to T = the longest word; every array is row-major [B][T].
// Padding tokens are 0 and carry no label. Models are causal, so padding never changes the outputs
// at real positions. Both backends stop the linear-attention recurrences (deltanet, deltaproduct,
// mamba) of row b at lengths[b]: their outputs past it are 0 (the LSTM runs every row to T), so a
// padded position's logits depend on its own token only. lengths may be empty: every word T long.
struct Batch {
    std::size_t batch = 0, length = 0;  // B, T
    std::vector<std::int32_t> tokens;   // B*T letter indices
    std::vector<std::int32_t> lengths;  // B real lengths
    std::vector<std::int32_t> targets;  // B*T class indices, -1 where there is no label
};
std::size_t labelled_positions(const Batch& batch);
// Word b's length: lengths[b], or T where lengths is empty.
inline std::size_t word_length(const Batch& batch, std::size_t b) {
    return batch.lengths.empty() ? batch.length : std::size_t(batch.lengths[b]);
}
// tokens B*T values, targets B*T or none, lengths empty or B values in 0..T, and no label past a
// word's end; throws InputError("batch", ...). Both backends call it on every batch.
void check_batch(const Batch& batch);

// B words with lengths uniform in `lengths` and letters uniform over the alphabet, from the stream
// (seed, stream) of the trainer's PRNG: training step s uses stream s, so any step can be redrawn.
Batch sample_batch(const Task& task, std::size_t batch, LengthRange lengths, std::uint64_t seed, std::uint64_t stream);
// Fills targets from tokens and lengths (runs the DFA).
void label_batch(const Task& task, Batch& batch);

// "A:B" or "A" (one length) for the option named `option`; throws InputError on bad ranges.
LengthRange parse_length_range(const std::string& text, const std::string& option);
LabelMode parse_label_mode(const std::string& text);
Target parse_target(const std::string& text);
const char* to_string(LabelMode mode);
const char* to_string(Target target);

// The task as stored in checkpoints (the DFA itself, so a checkpoint is self-contained).
nlohmann::json task_to_json(const Task& task);
Task task_from_json(const nlohmann::json& json, const std::string& origin);

}  // namespace statetrack::gpu
