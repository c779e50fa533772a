// Training steps run back to back, as `statetrack train` runs them, for the step benchmarks
// (bench_train_step, bench_step_timeline).
#pragma once

#include <cstddef>
#include <vector>

#include "statetrack/gpu/cuda_backend.hpp"

namespace statetrack::bench {

// count steps on batches[(first_batch + i) % batches.size()], step numbers from first_step, each
// begun before the one before it is waited for (two in flight, on the session's two slots in turn);
// the last step's result.
inline gpu::CudaStepResult steps_back_to_back(gpu::CudaSession& session, const std::vector<gpu::Batch>& batches,
                                              const gpu::AdamWOptions& o, std::size_t count, std::size_t first_batch,
                                              std::size_t first_step, double lr = 1e-4) {
    gpu::CudaStepResult last;
    if (count == 0) return last;
    const std::size_t n = batches.size();
    gpu::cuda_start_step(session, batches[first_batch % n], o, first_step, lr);
    for (std::size_t i = 0; i < count; ++i) {
        if (i + 1 < count) gpu::cuda_start_step(session, batches[(first_batch + i + 1) % n], o, first_step + i + 1, lr);
        last = gpu::cuda_finish_step(session);
    }
    return last;
}

// Every batch on both slots, each of which captures graphs of its own: afterwards no step of these
// batches, single or back to back, includes a first graph capture.
inline void warm_up_both_slots(gpu::CudaSession& session, const std::vector<gpu::Batch>& batches,
                               const gpu::AdamWOptions& o) {
    for (std::size_t shift = 0; shift < 2; ++shift) steps_back_to_back(session, batches, o, 2 * batches.size(), shift, 0);
}

}  // namespace statetrack::bench
