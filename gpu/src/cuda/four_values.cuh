#pragma once
// Four adjacent values of an fp32 or bf16 array in and out of fp32 registers (a float4), as the row
// kernels (kernels.cu) and the fused products' epilogues (fused_products.cu) move them: 16 bytes of
// fp32 or 8 of bf16 in one access, bf16 rounded to nearest even on the way out.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels.cuh"

namespace statetrack::gpu::cuda {

__device__ inline float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ inline void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ inline float4 load4(const bf16* p) {
    const uint2 bits = *reinterpret_cast<const uint2*>(p);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits.y));
    return make_float4(a.x, a.y, b.x, b.y);
}
__device__ inline void store4(bf16* p, float4 v) {
    const __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    uint2 bits;
    bits.x = *reinterpret_cast<const unsigned*>(&a), bits.y = *reinterpret_cast<const unsigned*>(&b);
    *reinterpret_cast<uint2*>(p) = bits;
}
__device__ inline float4 add4(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
// One value of either array type in fp32.
__device__ inline float as_float(float v) { return v; }
__device__ inline float as_float(bf16 v) { return __bfloat162float(v); }

}  // namespace statetrack::gpu::cuda
