#pragma once
// The short convolutions' taps as the recurrence kernels hold them (recurrences.cu, delta_chunked.cu).
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>

namespace statetrack::gpu::cuda {

// Column `column`'s K taps (of conv = [columns][K]) in w, padded in front with zeros to the kernel's
// compile-time length KT >= K: the zero taps multiply the zeros before the word or add exact zeros,
// so the sums are those of K taps, while KT fixed at compile time keeps the windows in registers.
// The chunked kernels load them every chunk: one address for the column (a 64-bit address a tap
// took ~10 instructions each).
template <int KT>
__device__ inline void load_conv_taps(const float* conv, std::size_t column, std::size_t K, float (&w)[KT]) {
    const float* taps = conv + column * K;
    const int pad = KT - int(K);
#pragma unroll
    for (int j = 0; j < KT; ++j) w[j] = j >= pad ? __ldg(taps + (j - pad)) : 0.0f;
}

// The kernels' compile-time tap length KT for K taps.
inline std::size_t conv_tap_length(std::size_t K) {
    if (K > 8) throw std::invalid_argument("the CUDA recurrences' convolutions take at most 8 taps");
    return K <= 4 ? 4 : 8;
}

}  // namespace statetrack::gpu::cuda
