#include "statetrack/lrnn/precision.hpp"

#include <fmt/format.h>

#include <charconv>

#include "statetrack/automata/error.hpp"

namespace statetrack::lrnn {

std::string Precision::name() const {
    switch (kind) {
        case Kind::fp16: return "fp16";
        case Kind::bf16: return "bf16";
        case Kind::fp32: return "fp32";
        case Kind::fp64: return "fp64";
        case Kind::bits: return fmt::format("bits:{}", bits);
        case Kind::mpfr: return fmt::format("mpfr:{}", bits);
        case Kind::exact: return "exact";
        case Kind::interval: return fmt::format("interval:{}", bits);
    }
    return "?";
}

Precision parse_precision(const std::string& text) {
    using K = Precision::Kind;
    if (text == "fp16") return {K::fp16, 11};
    if (text == "bf16") return {K::bf16, 8};
    if (text == "fp32") return {K::fp32, 24};
    if (text == "fp64") return {K::fp64, 53};
    if (text == "exact") return {K::exact, 0};
    const auto colon = text.find(':');
    const std::string head = text.substr(0, colon);
    if (colon == std::string::npos || (head != "bits" && head != "mpfr" && head != "interval"))
        throw InputError("--precision", text, "unknown precision (fp16, bf16, fp32, fp64, exact, bits:P, mpfr:P, interval:P)");
    const std::string tail = text.substr(colon + 1);
    unsigned p = 0;
    auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), p);
    const unsigned hi = head == "bits" ? max_bits_format : max_mpfr_bits;
    if (ec != std::errc() || end != tail.data() + tail.size() || p < min_bits || p > hi)
        throw InputError("--precision", text, fmt::format("P must be an integer in {}..{}", min_bits, hi));
    return {head == "bits" ? K::bits : head == "mpfr" ? K::mpfr : K::interval, p};
}

}  // namespace statetrack::lrnn
