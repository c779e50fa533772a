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

// e^-z as __expf(-z) computes it (one multiplication by log2(e), the SFU's 2^x), with results below
// 2^-126 flushed to zero. __expf keeps those denormals, for three instructions more each (a range test
// and two conditional multiplications). Every caller adds 1 to the result, where a denormal rounds
// away: the sums, and so the sigmoids, are the same to the bit.
__device__ inline float exp_neg_flushed(float z) {
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(z * -1.44269504088896341f));
    return e;
}
// 1 / (1 + e^-z) with a fast division (2 ulp) and exp_neg_flushed (2 + 1.2 |z| ulp, as __expf), where
// the IEEE ones take ~20 instructions more; 0 and 1 in the limits. SwiGLU's in fused_products.cu
// rounds its results to bf16 right after: mlp_down_backward took 269 us a layer at T = 256 with the
// IEEE ones, 222 with these (H100, ncu).
__device__ inline float sigmoid_fast(float z) { return __fdividef(1.0f, 1.0f + exp_neg_flushed(z)); }

}  // namespace statetrack::gpu::cuda
