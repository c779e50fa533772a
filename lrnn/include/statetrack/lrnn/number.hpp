#pragma once
// A number stored in a model: an exact rational, or an approximation of an irrational value (an
// fp64 value plus an optional higher-precision decimal). Keeping rationals exact is what lets the
// closure check (check.hpp) prove a network correct for every input length.
#include <string>

namespace statetrack::lrnn {

struct Number {
    std::string exact;  // canonical "p" or "p/q" (q > 1, lowest terms) when rational; else empty
    double approx = 0;  // the nearest double (always set)
    std::string high;   // irrational only, optional: a decimal with more digits than approx

    bool is_exact() const { return !exact.empty(); }
    bool is_zero() const { return exact == "0"; }
};

Number integer(long long value);
Number rational(long long numerator, long long denominator);
// An irrational value from a decimal string with many digits (it fills approx and high).
Number irrational(const std::string& high_decimal);

// Parses "p", "p/q" (exact) or a decimal such as "0.80901699" or "-1e-3" (an approximation).
// Throws InputError(origin, place, ...) on anything else or a zero denominator.
Number parse_number(const std::string& text, const std::string& origin, const std::string& place);
// The text form: the exact fraction, or the shortest decimal that round-trips approx.
std::string to_string(const Number& number);

// Comparisons used by validation: exact when both are rational, by approx otherwise.
int compare(const Number& a, const Number& b);
inline bool operator==(const Number& a, const Number& b) { return a.exact == b.exact && a.approx == b.approx && a.high == b.high; }

}  // namespace statetrack::lrnn
