#pragma once
// Sums across a warp's 32 lanes that several kernel files take.
#include <cuda_runtime.h>

namespace statetrack::gpu::cuda {

// v[k] = the warp's sum of v[k] for every k, by the xor butterfly (every lane ends with the same
// bits), the M butterflies interleaved: independent shuffles in flight together, where one after
// the other they are a chain of 5 M latencies.
template <int M>
__device__ inline void warp_sums(float (&v)[M]) {
#pragma unroll
    for (int s = 16; s >= 1; s /= 2)
#pragma unroll
        for (int k = 0; k < M; ++k) v[k] += __shfl_xor_sync(0xffffffffu, v[k], s);
}

}  // namespace statetrack::gpu::cuda
