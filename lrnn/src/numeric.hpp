#pragma once
// Private: conversions between Number and the multiprecision types (keeps GMP/MPFR out of number.hpp).
#include <boost/multiprecision/gmp.hpp>
#include <mpfr.h>

#include "statetrack/lrnn/number.hpp"

namespace statetrack::lrnn::detail {

using Rational = boost::multiprecision::mpq_rational;

// Digits kept in Number::high for irrational values (about 400 bits).
inline constexpr unsigned high_digits = 120;
inline constexpr unsigned high_bits = 420;

Rational exact_value(const Number& n);         // n must be exact
void set_value(mpfr_ptr out, const Number& n);  // at out's precision: exact ones correctly rounded, else from high (or approx)
Number from_rational(const Rational& q);
Number from_mpfr(mpfr_srcptr x);                // an irrational (approximate) Number
double nearest_double(const Rational& q);

}  // namespace statetrack::lrnn::detail
