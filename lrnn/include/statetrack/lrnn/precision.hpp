#pragma once
// The arithmetic a network is evaluated in (`--precision` of the CLI).
#include <cstdint>
#include <string>

namespace statetrack::lrnn {

// fp16 (Eigen::half), bf16 (Eigen::bfloat16), fp32, fp64: IEEE types, rounding after every operation.
// bits:P  a P-bit mantissa (P in 2..113), round-to-nearest-even after every operation, emulated by
//         MPFR at precision P (the exponent range is MPFR's: no overflow, underflow or subnormals).
// mpfr:P  MPFR floats with a P-bit mantissa (P in 2..65536); the same arithmetic for large P.
// exact:  exact rationals (GMP mpq); refused for networks with irrational entries.
// interval:P  MPFI intervals with P-bit endpoints: a decision is reported only when it is certain.
struct Precision {
    enum class Kind : std::uint8_t { fp16, bf16, fp32, fp64, bits, mpfr, exact, interval };
    Kind kind = Kind::fp64;
    unsigned bits = 0;  // bits, mpfr, interval: the mantissa size
    std::string name() const;
};

// Throws InputError("--precision", text, ...) for an unknown name or a P out of range.
Precision parse_precision(const std::string& text);

inline constexpr unsigned min_bits = 2, max_bits_format = 113, max_mpfr_bits = 65536;

}  // namespace statetrack::lrnn
