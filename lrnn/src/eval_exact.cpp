// Evaluation in exact rationals (GMP mpq): every reachable state is exact, which the closure check
// (check.cpp) relies on.
#include "eval_impl.hpp"

namespace statetrack::lrnn::detail {

template <>
struct ScalarTraits<Rational> {
    static constexpr bool is_interval = false;
    static Rational from_number(const Number& n) {
        if (!n.is_exact())
            throw InputError("<model>", "", fmt::format("the entry {} is irrational: exact arithmetic needs rational entries (use mpfr:P or interval:P)", to_string(n)));
        return exact_value(n);
    }
    static Rational coefficient(const GhFactor& f) { return from_number(factor_coefficient(f)); }
    static bool less(const Rational& a, const Rational& b) { return a < b; }
    static bool surely_less(const Rational& a, const Rational& b) { return a < b; }
    static std::string text(const Rational& x) { return x.str(); }
};

}  // namespace statetrack::lrnn::detail

namespace statetrack::lrnn {
STATETRACK_LRNN_EVAL_INSTANTIATE(Rational)
}  // namespace statetrack::lrnn
