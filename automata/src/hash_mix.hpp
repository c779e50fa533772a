#pragma once
// The 64-bit mixer of the cascade's hash tables (cascade.cpp, cascade_search.cpp); not part of the
// public API.
#include <cstdint>

namespace statetrack::automata::detail {

// murmur3's finaliser: every input bit reaches every output bit.
inline std::uint64_t mix(std::uint64_t h) {
    h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdULL;
    h = (h ^ (h >> 33)) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

}  // namespace statetrack::automata::detail
