#pragma once
// MpfrFloat and MpfiFloat: minimal value types over MPFR / MPFI whose precision in bits is exactly
// the thread's working precision (ScopedPrecision), so that bits:P really rounds to P bits after
// every operation (Boost's mpfr_float sets precision in decimal digits and cannot say "24 bits").
#include <mpfi.h>
#include <mpfr.h>

#include <string>
#include <utility>

namespace statetrack::lrnn {

// The precision new values get; set it with ScopedPrecision.
unsigned working_precision();

class ScopedPrecision {
public:
    explicit ScopedPrecision(unsigned bits);
    ~ScopedPrecision();
    ScopedPrecision(const ScopedPrecision&) = delete;
    ScopedPrecision& operator=(const ScopedPrecision&) = delete;

private:
    unsigned old_;
};

class MpfrFloat {
public:
    MpfrFloat() { mpfr_init2(x_, working_precision()); mpfr_set_zero(x_, 1); }
    MpfrFloat(int v) : MpfrFloat() { mpfr_set_si(x_, v, MPFR_RNDN); }
    MpfrFloat(const MpfrFloat& o) { mpfr_init2(x_, mpfr_get_prec(o.x_)); mpfr_set(x_, o.x_, MPFR_RNDN); }
    MpfrFloat(MpfrFloat&& o) noexcept : MpfrFloat() { mpfr_swap(x_, o.x_); }
    MpfrFloat& operator=(const MpfrFloat& o) { if (this != &o) mpfr_set(x_, o.x_, MPFR_RNDN); return *this; }
    MpfrFloat& operator=(MpfrFloat&& o) noexcept { mpfr_swap(x_, o.x_); return *this; }
    ~MpfrFloat() { mpfr_clear(x_); }
    mpfr_ptr get() { return x_; }
    mpfr_srcptr get() const { return x_; }
    friend MpfrFloat operator+(const MpfrFloat& a, const MpfrFloat& b) { MpfrFloat r; mpfr_add(r.x_, a.x_, b.x_, MPFR_RNDN); return r; }
    friend MpfrFloat operator-(const MpfrFloat& a, const MpfrFloat& b) { MpfrFloat r; mpfr_sub(r.x_, a.x_, b.x_, MPFR_RNDN); return r; }
    friend MpfrFloat operator*(const MpfrFloat& a, const MpfrFloat& b) { MpfrFloat r; mpfr_mul(r.x_, a.x_, b.x_, MPFR_RNDN); return r; }
    friend MpfrFloat operator/(const MpfrFloat& a, const MpfrFloat& b) { MpfrFloat r; mpfr_div(r.x_, a.x_, b.x_, MPFR_RNDN); return r; }
    friend bool operator<(const MpfrFloat& a, const MpfrFloat& b) { return mpfr_less_p(a.x_, b.x_); }
    friend bool operator==(const MpfrFloat& a, const MpfrFloat& b) { return mpfr_equal_p(a.x_, b.x_); }

private:
    mpfr_t x_;
};

class MpfiFloat {
public:
    MpfiFloat() { mpfi_init2(x_, working_precision()); mpfi_set_si(x_, 0); }
    MpfiFloat(int v) : MpfiFloat() { mpfi_set_si(x_, v); }
    MpfiFloat(const MpfiFloat& o) { mpfi_init2(x_, mpfi_get_prec(o.x_)); mpfi_set(x_, o.x_); }
    MpfiFloat(MpfiFloat&& o) noexcept : MpfiFloat() { mpfi_swap(x_, o.x_); }
    MpfiFloat& operator=(const MpfiFloat& o) { if (this != &o) mpfi_set(x_, o.x_); return *this; }
    MpfiFloat& operator=(MpfiFloat&& o) noexcept { mpfi_swap(x_, o.x_); return *this; }
    ~MpfiFloat() { mpfi_clear(x_); }
    mpfi_ptr get() { return x_; }
    mpfi_srcptr get() const { return x_; }
    friend MpfiFloat operator+(const MpfiFloat& a, const MpfiFloat& b) { MpfiFloat r; mpfi_add(r.x_, a.x_, b.x_); return r; }
    friend MpfiFloat operator-(const MpfiFloat& a, const MpfiFloat& b) { MpfiFloat r; mpfi_sub(r.x_, a.x_, b.x_); return r; }
    friend MpfiFloat operator*(const MpfiFloat& a, const MpfiFloat& b) { MpfiFloat r; mpfi_mul(r.x_, a.x_, b.x_); return r; }
    friend MpfiFloat operator/(const MpfiFloat& a, const MpfiFloat& b) { MpfiFloat r; mpfi_div(r.x_, a.x_, b.x_); return r; }
    // a < b for certain (a's upper end below b's lower end).
    friend bool surely_less(const MpfiFloat& a, const MpfiFloat& b) { return mpfi_cmp(a.x_, b.x_) < 0; }
    // Compares midpoints (used to pick a candidate; certainty is checked with surely_less).
    friend bool operator<(const MpfiFloat& a, const MpfiFloat& b);

private:
    mpfi_t x_;
};
bool surely_less(const MpfiFloat& a, const MpfiFloat& b);

}  // namespace statetrack::lrnn
