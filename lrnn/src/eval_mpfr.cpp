// Evaluation in MPFR floats (mpfr:P and bits:P) and MPFI intervals (interval:P), at the working
// precision set by ScopedPrecision.
#include "eval_impl.hpp"

namespace statetrack::lrnn {

namespace {
thread_local unsigned precision_bits = 53;
}

unsigned working_precision() { return precision_bits; }
ScopedPrecision::ScopedPrecision(unsigned bits) : old_(precision_bits) { precision_bits = bits; }
ScopedPrecision::~ScopedPrecision() { precision_bits = old_; }

bool operator<(const MpfiFloat& a, const MpfiFloat& b) {
    mpfr_t ma, mb;
    mpfr_inits2(mpfi_get_prec(a.get()) + 1, ma, mb, static_cast<mpfr_ptr>(nullptr));
    mpfi_mid(ma, a.get());
    mpfi_mid(mb, b.get());
    const bool less = mpfr_less_p(ma, mb);
    mpfr_clears(ma, mb, static_cast<mpfr_ptr>(nullptr));
    return less;
}

}  // namespace statetrack::lrnn

namespace statetrack::lrnn::detail {

template <>
struct ScalarTraits<MpfrFloat> {
    static constexpr bool is_interval = false;
    static MpfrFloat from_number(const Number& n) {
        MpfrFloat x;
        set_value(x.get(), n);
        return x;
    }
    static MpfrFloat coefficient(const GhFactor& f) { return from_number(factor_coefficient(f)); }
    static bool less(const MpfrFloat& a, const MpfrFloat& b) { return a < b; }
    static bool surely_less(const MpfrFloat& a, const MpfrFloat& b) { return a < b; }
    static std::string text(const MpfrFloat& x) {
        const std::string fmt = "%." + std::to_string(std::max<long>(17, long(mpfr_get_prec(x.get()) * 0.30103) + 2)) + "Rg";
        char* out = nullptr;
        mpfr_asprintf(&out, fmt.c_str(), x.get());
        std::string s = out;
        mpfr_free_str(out);
        return s;
    }
};

template <>
struct ScalarTraits<MpfiFloat> {
    static constexpr bool is_interval = true;
    // An interval that surely contains the number: exact ones exactly (outward rounded); decimal
    // approximations widened by one unit of their last digit, which covers the rounding of the
    // stored decimal (high has 120 significant digits, approx round-trips fp64).
    static MpfiFloat from_number(const Number& n) {
        MpfiFloat x;
        if (n.is_exact()) {
            mpfi_set_q(x.get(), exact_value(n).backend().data());
            return x;
        }
        const unsigned p = working_precision() + 64;
        mpfr_t mid, radius;
        mpfr_inits2(p, mid, radius, static_cast<mpfr_ptr>(nullptr));
        set_value(mid, n);
        // radius = |mid| * 10^(1 - significant digits of the decimal)
        const std::string text = n.high.empty() ? fmt::format("{}", n.approx) : n.high;
        long digits = 0;
        bool leading = true;
        for (char c : text) {
            if (c == 'e' || c == 'E') break;
            if (c >= '1' && c <= '9') leading = false;
            if (c >= '0' && c <= '9' && !leading) ++digits;
        }
        mpfr_abs(radius, mid, MPFR_RNDU);
        mpfr_t scale;
        mpfr_init2(scale, 64);
        mpfr_set_si(scale, 10, MPFR_RNDU);
        mpfr_pow_si(scale, scale, 1 - std::max<long>(digits, 1), MPFR_RNDU);
        mpfr_mul(radius, radius, scale, MPFR_RNDU);
        mpfr_clear(scale);
        mpfr_t lo, hi;
        mpfr_inits2(p, lo, hi, static_cast<mpfr_ptr>(nullptr));
        mpfr_sub(lo, mid, radius, MPFR_RNDD);
        mpfr_add(hi, mid, radius, MPFR_RNDU);
        mpfi_interv_fr(x.get(), lo, hi);
        mpfr_clears(mid, radius, lo, hi, static_cast<mpfr_ptr>(nullptr));
        return x;
    }
    // Computed in interval arithmetic from the entries, so the coefficient encloses beta / v.v.
    static MpfiFloat coefficient(const GhFactor& f) {
        MpfiFloat dot(0);
        for (const auto& [i, x] : f.v.entries) {
            const MpfiFloat y = from_number(x);
            dot = dot + y * y;
        }
        return from_number(f.beta) / dot;
    }
    static bool less(const MpfiFloat& a, const MpfiFloat& b) { return a < b; }
    static bool surely_less(const MpfiFloat& a, const MpfiFloat& b) { return lrnn::surely_less(a, b); }
    static std::string text(const MpfiFloat& x) {
        char* out = nullptr;
        const std::string fmt = "[%.17Rg, %.17Rg]";
        mpfr_t lo, hi;
        mpfr_inits2(mpfi_get_prec(x.get()), lo, hi, static_cast<mpfr_ptr>(nullptr));
        mpfi_get_left(lo, x.get());
        mpfi_get_right(hi, x.get());
        mpfr_asprintf(&out, fmt.c_str(), lo, hi);
        std::string s = out;
        mpfr_free_str(out);
        mpfr_clears(lo, hi, static_cast<mpfr_ptr>(nullptr));
        return s;
    }
};

}  // namespace statetrack::lrnn::detail

namespace statetrack::lrnn {
STATETRACK_LRNN_EVAL_INSTANTIATE(MpfrFloat)
STATETRACK_LRNN_EVAL_INSTANTIATE(MpfiFloat)
}  // namespace statetrack::lrnn
