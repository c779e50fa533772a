#pragma once
// A fixed-algorithm PRNG (xoshiro256** seeded by splitmix64) with its own uniform and normal
// mappings, so every sampled word and initial weight is the same on every platform and library.
#include <cstdint>

namespace statetrack::gpu {

struct Rng {
    std::uint64_t s[4];
};

// Independent streams for one seed: the stream number is mixed into the seed (e.g. the step).
Rng make_rng(std::uint64_t seed, std::uint64_t stream = 0);
std::uint64_t next_u64(Rng& rng);
// Uniform in [0, n) without modulo bias (Lemire's multiply-and-reject); n > 0.
std::uint64_t uniform_below(Rng& rng, std::uint64_t n);
double uniform01(Rng& rng);  // [0, 1) with 53 random bits
double normal(Rng& rng);     // standard normal (Box-Muller, one value per call)

}  // namespace statetrack::gpu
