// Random training batches for the step benchmarks (bench_train_step, bench_step_timeline): the cost
// of a step depends on the batch's shape, not on its letters or labels.
#pragma once

#include <cstdint>

#include "statetrack/gpu/random.hpp"
#include "statetrack/gpu/task.hpp"

namespace statetrack::bench {

// B words with random letters and a label at every real position: all of length T, or (shortest >
// 0) of lengths uniform in shortest..T, the first T long, padded to T as training's batches are.
inline gpu::Batch random_words(std::size_t B, std::size_t T, std::size_t shortest, std::size_t vocab,
                               std::size_t classes, std::uint64_t stream) {
    gpu::Rng rng = gpu::make_rng(7, stream);
    gpu::Batch batch;
    batch.batch = B, batch.length = T;
    batch.tokens.assign(B * T, 0), batch.targets.assign(B * T, -1);
    for (std::size_t b = 0; b < B; ++b) {
        const std::size_t len = shortest == 0 || b == 0 ? T : shortest + gpu::uniform_below(rng, T - shortest + 1);
        batch.lengths.push_back(std::int32_t(len));
        for (std::size_t t = 0; t < len; ++t) {
            batch.tokens[b * T + t] = std::int32_t(gpu::uniform_below(rng, vocab));
            batch.targets[b * T + t] = std::int32_t(gpu::uniform_below(rng, classes));
        }
    }
    return batch;
}

}  // namespace statetrack::bench
