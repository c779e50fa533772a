#pragma once
// The scalar activations and constants that several kernel files share (fp32; one definition each).
#include <cuda_runtime.h>

namespace statetrack::gpu::cuda {

// The eps of RMSNorm, 1 / sqrt(mean(x^2) + eps), and of the L2 norms, x / sqrt(sum(x^2) + eps), as in
// cpu_backend.cpp.
constexpr float norm_eps = 1e-6f;

__device__ inline float sigmoidf(float z) { return 1.0f / (1.0f + expf(-z)); }
__device__ inline float siluf(float z) { return z * sigmoidf(z); }
// d silu(z) / dz
__device__ inline float silu_gradf(float z) {
    const float s = sigmoidf(z);
    return s * (1.0f + z * (1.0f - s));
}
__device__ inline float softplusf(float z) { return z > 20.0f ? z : log1pf(expf(z)); }

}  // namespace statetrack::gpu::cuda
