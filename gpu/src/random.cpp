#include "statetrack/gpu/random.hpp"

#include <cmath>
#include <numbers>

namespace statetrack::gpu {

namespace {
std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
__extension__ typedef unsigned __int128 u128;  // GCC and Clang; the multiply-high of Lemire's method
std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng make_rng(std::uint64_t seed, std::uint64_t stream) {
    std::uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL);
    Rng rng;
    for (auto& word : rng.s) word = splitmix64(x);
    return rng;
}

std::uint64_t next_u64(Rng& rng) {
    auto& s = rng.s;
    const std::uint64_t result = rotl(s[1] * 5, 7) * 9;
    const std::uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

std::uint64_t uniform_below(Rng& rng, std::uint64_t n) {
    u128 m = static_cast<u128>(next_u64(rng)) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
        const std::uint64_t threshold = (0 - n) % n;
        while (low < threshold) {
            m = static_cast<u128>(next_u64(rng)) * n;
            low = static_cast<std::uint64_t>(m);
        }
    }
    return static_cast<std::uint64_t>(m >> 64);
}

double uniform01(Rng& rng) { return static_cast<double>(next_u64(rng) >> 11) * 0x1.0p-53; }

double normal(Rng& rng) {
    const double u1 = 1.0 - uniform01(rng);  // (0, 1]: log stays finite
    const double u2 = uniform01(rng);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace statetrack::gpu
