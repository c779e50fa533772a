#pragma once
// Private: equality of scalars by bit pattern (cycle detection must see two states as equal exactly
// when the arithmetic cannot tell them apart: -0 and +0 differ, a NaN equals itself).
#include <cstring>
#include <type_traits>

#include "statetrack/lrnn/scalars.hpp"

namespace statetrack::proofs::detail {

template <class T>
bool same_bits(const T& a, const T& b) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, lrnn::Half> ||
                  std::is_same_v<T, lrnn::BFloat16>) {
        return std::memcmp(&a, &b, sizeof(T)) == 0;
    } else if constexpr (std::is_same_v<T, lrnn::MpfrFloat>) {
        return mpfr_equal_p(a.get(), b.get()) && mpfr_signbit(a.get()) == mpfr_signbit(b.get());
    } else if constexpr (std::is_same_v<T, lrnn::Rational>) {
        return a == b;
    } else {
        return lrnn::to_text(a) == lrnn::to_text(b);
    }
}

}  // namespace statetrack::proofs::detail
