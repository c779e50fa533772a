// Evaluation in the IEEE types: fp16 and bf16 (Eigen::half, Eigen::bfloat16: every operation is
// done in float and rounded back), fp32, fp64.
#include "eval_impl.hpp"

namespace statetrack::lrnn::detail {

template <class T>
struct IeeeTraits {
    static constexpr bool is_interval = false;
    static T from_number(const Number& n) { return T(static_cast<float>(n.approx)); }
    static T coefficient(const GhFactor& f) { return from_number(factor_coefficient(f)); }
    static bool less(const T& a, const T& b) { return a < b; }
    static bool surely_less(const T& a, const T& b) { return a < b; }
    static std::string text(const T& x) { return fmt::format("{}", static_cast<float>(x)); }
};
template <> struct ScalarTraits<Half> : IeeeTraits<Half> {};
template <> struct ScalarTraits<BFloat16> : IeeeTraits<BFloat16> {};
template <> struct ScalarTraits<float> : IeeeTraits<float> {};
template <>
struct ScalarTraits<double> : IeeeTraits<double> {
    static double from_number(const Number& n) { return n.approx; }
    static double coefficient(const GhFactor& f) { return factor_coefficient(f).approx; }
    static std::string text(const double& x) { return fmt::format("{}", x); }
};

}  // namespace statetrack::lrnn::detail

namespace statetrack::lrnn {
STATETRACK_LRNN_EVAL_INSTANTIATE(float)
STATETRACK_LRNN_EVAL_INSTANTIATE(double)
STATETRACK_LRNN_EVAL_INSTANTIATE(Half)
STATETRACK_LRNN_EVAL_INSTANTIATE(BFloat16)
}  // namespace statetrack::lrnn
