#pragma once
// An open-addressing hash map from 64-bit keys to 32-bit values, flat in two arrays: the compiler's
// tuple index and the closure's step memo touch it 10^6-10^7 times on the largest MLRegTest
// cascades, where std::unordered_map's node per entry costs a cache miss and an allocation.
#include <cstdint>
#include <limits>
#include <vector>

namespace statetrack::lrnn {

class FlatMap64 {
public:
    static constexpr std::uint64_t no_key = std::numeric_limits<std::uint64_t>::max();  // may not be used as a key

    // The value stored for key, or nullptr.
    const std::uint32_t* find(std::uint64_t key) const {
        const std::size_t slot = locate(key);
        return keys_[slot] == key ? &values_[slot] : nullptr;
    }
    // Stores value for key unless key is there; returns the stored value and whether it was new.
    std::pair<std::uint32_t, bool> insert(std::uint64_t key, std::uint32_t value) {
        if (2 * (count_ + 1) > keys_.size()) grow();
        const std::size_t slot = locate(key);
        if (keys_[slot] == key) return {values_[slot], false};
        keys_[slot] = key, values_[slot] = value, ++count_;
        return {value, true};
    }
    std::size_t size() const { return count_; }

private:
    std::size_t locate(std::uint64_t key) const {
        const std::uint64_t h = key * 0x9e3779b97f4a7c15ull;
        std::size_t slot = (h ^ (h >> 31)) & (keys_.size() - 1);
        while (keys_[slot] != no_key && keys_[slot] != key) slot = (slot + 1) & (keys_.size() - 1);
        return slot;
    }
    void grow() {
        std::vector<std::uint64_t> keys(keys_.size() * 2, no_key);
        std::vector<std::uint32_t> values(keys.size());
        keys.swap(keys_), values.swap(values_);
        for (std::size_t i = 0; i < keys.size(); ++i)
            if (keys[i] != no_key) {
                const std::size_t slot = locate(keys[i]);
                keys_[slot] = keys[i], values_[slot] = values[i];
            }
    }
    std::vector<std::uint64_t> keys_ = std::vector<std::uint64_t>(64, no_key);
    std::vector<std::uint32_t> values_ = std::vector<std::uint32_t>(64);
    std::size_t count_ = 0;
};

}  // namespace statetrack::lrnn
