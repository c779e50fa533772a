#pragma once
// The node store of the exact closures (lrnn::exact_closure, proofs::integer_closure): a set of
// integer vectors of one width, numbered in insertion order and kept sparse, as the list of
// (slot, value) pairs of their non-zero slots. A cascade network's state is one-hot per layer, so a
// pair costs O(layers) memory instead of O(total dimension): the largest MLRegTest cascade
// (180,879 pairs, total dimension 4,025) needs about 40 MB instead of 3 GB.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace statetrack::lrnn {

template <class Int>
class SparseStateSet {
public:
    explicit SparseStateSet(std::size_t width) : width_(width), table_(1024, empty) { start_.push_back(0); }
    SparseStateSet(const SparseStateSet&) = default;
    SparseStateSet(SparseStateSet&&) noexcept = default;
    SparseStateSet& operator=(const SparseStateSet&) = default;
    SparseStateSet& operator=(SparseStateSet&&) noexcept = default;

    std::size_t width() const { return width_; }
    std::size_t size() const { return start_.size() - 1; }

    // Inserts the dense vector x (width() slots): its number, and whether it was new.
    std::pair<std::uint32_t, bool> insert(const Int* x) {
        key_.clear();
        std::size_t i = 0;
        for (; i + 8 <= width_; i += 8) {  // mostly zeros: test eight slots at once (vectorizes)
            Int any = 0;
            for (std::size_t j = 0; j < 8; ++j) any |= x[i + j];
            if (any == 0) continue;
            for (std::size_t j = i; j < i + 8; ++j)
                if (x[j] != 0) key_.push_back(Int(j)), key_.push_back(x[j]);
        }
        for (; i < width_; ++i)
            if (x[i] != 0) key_.push_back(Int(i)), key_.push_back(x[i]);
        if (2 * (size() + 1) > table_.size()) grow();
        const std::uint64_t h = hash(key_.data(), key_.size());
        const std::uint64_t print = h & ~std::uint64_t(0xffffffff);  // compared before the stored vector is read
        for (std::size_t slot = h & (table_.size() - 1);; slot = (slot + 1) & (table_.size() - 1)) {
            const std::uint64_t entry = table_[slot];
            if (entry == empty) {
                const auto n = std::uint32_t(size());
                table_[slot] = print | n;
                data_.insert(data_.end(), key_.begin(), key_.end());
                start_.push_back(data_.size());
                return {n, true};
            }
            if ((entry & ~std::uint64_t(0xffffffff)) != print) continue;
            const auto n = std::uint32_t(entry);
            const std::size_t length = start_[n + 1] - start_[n];
            if (length == key_.size() && std::equal(key_.begin(), key_.end(), data_.begin() + long(start_[n]))) return {n, false};
        }
    }

    // Writes vector number n into out (width() slots).
    void get(std::uint32_t n, Int* out) const {
        std::fill(out, out + width_, Int(0));
        for (std::size_t k = start_[n]; k < start_[n + 1]; k += 2) out[std::size_t(data_[k])] = data_[k + 1];
    }

private:
    static constexpr std::uint64_t empty = std::numeric_limits<std::uint64_t>::max();
    static std::uint64_t hash(const Int* key, std::size_t length) {
        std::uint64_t h = 0x9e3779b97f4a7c15ull ^ length;
        for (std::size_t i = 0; i < length; ++i) h = (h ^ std::uint64_t(key[i])) * 0xff51afd7ed558ccdull, h ^= h >> 32;
        return h;
    }
    void grow() {
        std::vector<std::uint64_t> table(table_.size() * 2, empty);
        for (std::uint64_t entry : table_) {
            if (entry == empty) continue;
            const auto n = std::uint32_t(entry);
            std::size_t slot = hash(data_.data() + start_[n], start_[n + 1] - start_[n]) & (table.size() - 1);
            while (table[slot] != empty) slot = (slot + 1) & (table.size() - 1);
            table[slot] = entry;
        }
        table_.swap(table);
    }
    std::size_t width_;
    std::vector<Int> data_;                // every vector's (slot, value) pairs, vector after vector
    std::vector<std::size_t> start_;       // vector n is data_[start_[n] .. start_[n + 1])
    std::vector<std::uint64_t> table_;     // open addressing: (high half of the hash, vector number); load below one half
    std::vector<Int> key_;                 // scratch
};

}  // namespace statetrack::lrnn
