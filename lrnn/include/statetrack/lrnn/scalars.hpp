#pragma once
// The scalar types evaluate.hpp is instantiated for. Heavy (Boost.Multiprecision, GMP, MPFR, MPFI):
// include only where a concrete scalar type is needed.
#include <Eigen/Core>
#include <boost/multiprecision/gmp.hpp>

#include "statetrack/lrnn/evaluate.hpp"
#include "statetrack/lrnn/mpfr_scalar.hpp"

namespace statetrack::lrnn {

using Half = Eigen::half;
using BFloat16 = Eigen::bfloat16;
using Rational = boost::multiprecision::mpq_rational;
// MpfrFloat and MpfiFloat (mpfr_scalar.hpp) take the precision set by ScopedPrecision.

#define STATETRACK_LRNN_EVAL_EXTERN(T)                                                                  \
    extern template PreparedNetwork<T> prepare<T>(const Network&);                                      \
    extern template NetworkState<T> initial_state<T>(const PreparedNetwork<T>&);                        \
    extern template std::uint32_t step<T>(const PreparedNetwork<T>&, NetworkState<T>&, automata::Letter); \
    extern template std::uint32_t read_label<T>(const PreparedNetwork<T>&, std::size_t, const std::vector<T>&, bool&); \
    extern template std::string to_text<T>(const T&);
STATETRACK_LRNN_EVAL_EXTERN(float)
STATETRACK_LRNN_EVAL_EXTERN(double)
STATETRACK_LRNN_EVAL_EXTERN(Half)
STATETRACK_LRNN_EVAL_EXTERN(BFloat16)
STATETRACK_LRNN_EVAL_EXTERN(Rational)
STATETRACK_LRNN_EVAL_EXTERN(MpfrFloat)
STATETRACK_LRNN_EVAL_EXTERN(MpfiFloat)
#undef STATETRACK_LRNN_EVAL_EXTERN

}  // namespace statetrack::lrnn
