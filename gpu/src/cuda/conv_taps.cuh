#pragma once
// The short convolutions' taps as the recurrence kernels hold them (recurrences.cu, delta_chunked.cu).
#include <cuda_runtime.h>

#include <cstddef>

namespace statetrack::gpu::cuda {

// Column `column`'s K taps (of conv = [columns][K]) in w, padded in front with zeros to the kernel's
// compile-time length KT >= K: the zero taps multiply the zeros before the word or add exact zeros,
// so the sums are those of K taps, while KT fixed at compile time keeps the windows in registers.
template <int KT>
__device__ inline void load_conv_taps(const float* conv, std::size_t column, std::size_t K, float (&w)[KT]) {
    const int pad = KT - int(K);
#pragma unroll
    for (int j = 0; j < KT; ++j) w[j] = j >= pad ? __ldg(conv + column * K + std::size_t(j - pad)) : 0.0f;
}

}  // namespace statetrack::gpu::cuda
