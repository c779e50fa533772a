#include "statetrack/lrnn/number.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cstdlib>

#include "numeric.hpp"
#include "statetrack/automata/error.hpp"

namespace statetrack::lrnn {
namespace detail {

Rational exact_value(const Number& n) { return Rational(n.exact); }

double nearest_double(const Rational& q) {
    mpfr_t x;
    mpfr_init2(x, 53);
    mpfr_set_q(x, q.backend().data(), MPFR_RNDN);
    const double d = mpfr_get_d(x, MPFR_RNDN);
    mpfr_clear(x);
    return d;
}

void set_value(mpfr_ptr out, const Number& n) {
    if (n.is_exact()) {
        mpfr_set_q(out, exact_value(n).backend().data(), MPFR_RNDN);
    } else {
        const std::string text = n.high.empty() ? fmt::format("{}", n.approx) : n.high;
        mpfr_set_str(out, text.c_str(), 10, MPFR_RNDN);
    }
}

Number from_rational(const Rational& q) {
    Number n;
    n.exact = q.str();
    n.approx = nearest_double(q);
    return n;
}

Number from_mpfr(mpfr_srcptr x) {
    Number n;
    mpfr_exp_t exp = 0;
    char* digits = mpfr_get_str(nullptr, &exp, 10, high_digits, x, MPFR_RNDN);
    std::string m = digits;
    mpfr_free_str(digits);
    const bool negative = !m.empty() && m[0] == '-';
    if (negative) m.erase(0, 1);
    n.high = fmt::format("{}0.{}e{}", negative ? "-" : "", m, static_cast<long>(exp));
    n.approx = mpfr_get_d(x, MPFR_RNDN);
    return n;
}

}  // namespace detail

// Direct: the compiler makes millions of these (dense unit vectors), GMP would dominate.
Number integer(long long value) { return Number{std::to_string(value), static_cast<double>(value), {}}; }

Number rational(long long numerator, long long denominator) {
    return detail::from_rational(detail::Rational(numerator, denominator));
}

Number irrational(const std::string& high_decimal) {
    Number n = parse_number(high_decimal, "<number>", "");
    return n;
}

namespace {

bool is_integer_text(std::string_view s) {
    if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
    if (s.empty() || s.size() > 4000) return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

bool is_decimal_text(std::string_view s) {
    // [sign] digits [. digits] [e [sign] digits], at least one digit in the mantissa.
    std::size_t i = 0, digits = 0;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
    if (i < s.size() && s[i] == '.') {
        ++i;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
    }
    if (digits == 0) return false;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
        std::size_t exp_digits = 0;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
        if (exp_digits == 0 || exp_digits > 6) return false;
    }
    return i == s.size() && s.size() <= 4000;
}

// GMP reads no leading '+' (Boost throws std::runtime_error on "+5": found by fuzzing); the text
// has passed is_integer_text.
detail::Rational integer_rational(std::string_view s) {
    if (!s.empty() && s[0] == '+') s.remove_prefix(1);
    return detail::Rational(std::string(s));
}

}  // namespace

Number parse_number(const std::string& text, const std::string& origin, const std::string& place) {
    const auto slash = text.find('/');
    if (slash != std::string::npos) {
        const std::string p = text.substr(0, slash), q = text.substr(slash + 1);
        if (!is_integer_text(p) || !is_integer_text(q) || q[0] == '-' || q[0] == '+')
            throw InputError(origin, place, fmt::format("'{}' is not a fraction p/q of integers", text));
        const detail::Rational den = integer_rational(q);
        if (den == 0) throw InputError(origin, place, fmt::format("'{}' has a zero denominator", text));
        return detail::from_rational(detail::Rational(integer_rational(p) / den));
    }
    if (is_integer_text(text)) return detail::from_rational(integer_rational(text));
    if (!is_decimal_text(text))
        throw InputError(origin, place, fmt::format("'{}' is not a number (write \"p\", \"p/q\" or a decimal)", text));
    mpfr_t x;
    mpfr_init2(x, detail::high_bits);
    mpfr_set_str(x, text.c_str(), 10, MPFR_RNDN);
    Number n;
    n.approx = mpfr_get_d(x, MPFR_RNDN);
    mpfr_clear(x);
    if (!std::isfinite(n.approx)) throw InputError(origin, place, fmt::format("'{}' is out of the fp64 range", text));
    // Keep the given digits when they say more than the double does.
    if (text.size() > 20) n.high = text;
    return n;
}

std::string to_string(const Number& number) {
    if (number.is_exact()) return number.exact;
    return fmt::format("{}", number.approx);
}

int compare(const Number& a, const Number& b) {
    if (a.is_exact() && b.is_exact()) {
        const auto qa = detail::exact_value(a), qb = detail::exact_value(b);
        return qa < qb ? -1 : qa > qb ? 1 : 0;
    }
    return a.approx < b.approx ? -1 : a.approx > b.approx ? 1 : 0;
}

}  // namespace statetrack::lrnn
