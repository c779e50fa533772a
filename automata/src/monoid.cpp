#include "statetrack/automata/monoid.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

namespace statetrack::automata {

namespace {

// The BFS closure over transformations stored compactly: element i occupies
// arena[i*stride .. i*stride+n), T being the narrowest unsigned type that holds a state index,
// zero-padded to a multiple of 8 bytes so hashing and comparing read whole words; an
// open-addressing hash table maps transformations to element indices. Element i > 0 is
// element parent[i] followed by letter[i]; BFS order makes that a shortest word.
template <class T>
struct Closure {
    std::size_t n = 0;
    std::size_t stride = 0;  // n rounded up to a multiple of 8 bytes
    std::vector<T> arena;
    std::vector<std::uint32_t> parent;
    std::vector<Letter> letter;
    // Slot: high 32 bits of the hash (a tag that rejects most mismatches without touching the
    // arena), low 32 bits the element index + 1; 0 marks an empty slot.
    std::vector<std::uint64_t> slots;
    std::size_t limit = 0;
    bool complete = false;

    std::size_t size() const { return parent.size(); }
    const T* element(std::size_t i) const { return arena.data() + i * stride; }

    static std::size_t padded(std::size_t n) { return (n * sizeof(T) + 7) / 8 * 8 / sizeof(T); }

    static std::uint64_t word(const T* x, std::size_t byte) {
        std::uint64_t w;
        std::memcpy(&w, reinterpret_cast<const unsigned char*>(x) + byte, 8);
        return w;
    }

    bool equal(const T* x, const T* y) const {
        for (std::size_t b = 0; b < stride * sizeof(T); b += 8)
            if (word(x, b) != word(y, b)) return false;
        return true;
    }

    // x must be padded with zeros to the stride.
    std::uint64_t hash(const T* x) const {
        // 8 bytes at a time, then the murmur3 finalizer: the table uses the low bits.
        std::uint64_t h = 0x9E3779B97F4A7C15ull;
        for (std::size_t b = 0; b < stride * sizeof(T); b += 8) {
            h = (h ^ word(x, b)) * 0xBF58476D1CE4E5B9ull;
            h = (h << 31) | (h >> 33);
        }
        h ^= h >> 33;
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 33;
        h *= 0xC4CEB9FE1A85EC53ull;
        return h ^ (h >> 33);
    }

    // Index of x in the table, or the empty slot where it belongs (returned as ~slot).
    std::size_t probe(const T* x, std::uint64_t h) const {
        const std::size_t mask = slots.size() - 1;
        const std::uint64_t tag = h & ~std::uint64_t(0xFFFFFFFF);
        for (std::size_t s = h & mask;; s = (s + 1) & mask) {
            const std::uint64_t e = slots[s];
            if (e == 0) return ~s;
            const std::size_t i = (e & 0xFFFFFFFF) - 1;
            if ((e & ~std::uint64_t(0xFFFFFFFF)) == tag && equal(element(i), x)) return i;
        }
    }

    std::optional<std::size_t> find(const T* x) const {
        const std::size_t r = probe(x, hash(x));
        if (r >= size()) return std::nullopt;  // ~slot is a huge number
        return r;
    }

    static std::uint64_t slot_value(std::uint64_t h, std::size_t i) {
        return (h & ~std::uint64_t(0xFFFFFFFF)) | std::uint64_t(i + 1);
    }

    void grow() {
        std::vector<std::uint64_t> bigger(slots.empty() ? 64 : slots.size() * 2, 0);
        const std::size_t mask = bigger.size() - 1;
        for (std::size_t i = 0; i < size(); ++i) {
            const std::uint64_t h = hash(element(i));
            std::size_t s = h & mask;
            while (bigger[s] != 0) s = (s + 1) & mask;
            bigger[s] = slot_value(h, i);
        }
        slots.swap(bigger);
    }

    // Adds x unless present; returns false when x is new but the limit is reached.
    bool insert(const T* x, std::uint64_t h, std::uint32_t from, Letter a) {
        const std::size_t r = probe(x, h);
        if (r < size()) return true;
        if (size() >= limit) return false;
        slots[~r] = slot_value(h, size());
        arena.insert(arena.end(), x, x + stride);
        parent.push_back(from);
        letter.push_back(a);
        if (2 * size() > slots.size()) grow();
        return true;
    }

    std::vector<Letter> word(std::size_t i) const {
        std::vector<Letter> w;
        for (; i != 0; i = parent[i]) w.push_back(letter[i]);
        std::reverse(w.begin(), w.end());
        return w;
    }
};

template <class T>
Closure<T> close(const Dfa& dfa, std::size_t limit) {
    Closure<T> c;
    const std::size_t n = dfa.num_states(), k = dfa.num_letters();
    c.n = n;
    c.stride = Closure<T>::padded(n);
    c.limit = monoid_element_limit(n, limit);
    c.grow();
    std::vector<T> letter_maps(k * n), products(k * c.stride, T(0));
    std::vector<std::uint64_t> hashes(k);
    for (std::size_t a = 0; a < k; ++a)
        for (std::size_t q = 0; q < n; ++q) letter_maps[a * n + q] = T(dfa.next(State(q), Letter(a)));
    for (std::size_t q = 0; q < n; ++q) products[q] = T(q);
    c.insert(products.data(), c.hash(products.data()), 0, 0);
    for (std::size_t i = 0; i < c.size(); ++i) {
        // All k products first, prefetching their slots, so the k cache misses overlap.
        const T* x = c.element(i);
        for (std::size_t a = 0; a < k; ++a) {
            const T* m = letter_maps.data() + a * n;
            T* y = products.data() + a * c.stride;
            for (std::size_t q = 0; q < n; ++q) y[q] = m[x[q]];
            hashes[a] = c.hash(y);
            __builtin_prefetch(&c.slots[hashes[a] & (c.slots.size() - 1)]);
        }
        for (std::size_t a = 0; a < k; ++a)
            if (!c.insert(products.data() + a * c.stride, hashes[a], std::uint32_t(i), Letter(a))) return c;
    }
    c.complete = true;
    return c;
}

// Calls f(closure) with the closure in the narrowest element type.
template <class F>
auto with_closure(const Dfa& dfa, std::size_t limit, F&& f) {
    validate(dfa, dfa.name.empty() ? "<dfa>" : dfa.name);
    const std::size_t n = dfa.num_states();
    if (n <= 256) return f(close<std::uint8_t>(dfa, limit));
    if (n <= 65536) return f(close<std::uint16_t>(dfa, limit));
    return f(close<std::uint32_t>(dfa, limit));
}

std::size_t saturating_lcm(std::size_t a, std::size_t b) {
    const std::size_t g = std::gcd(a, b);
    const std::size_t q = b / g;
    if (a > std::numeric_limits<std::size_t>::max() / q) return std::numeric_limits<std::size_t>::max();
    return a * q;
}

// Per-element facts computed with reusable scratch arrays (O(n) per element).
template <class T>
struct ElementInspector {
    std::size_t n;
    std::vector<std::uint32_t> stamp, inverse;
    std::vector<std::uint8_t> colour;
    std::vector<T> idempotent;
    std::uint32_t round = 0;

    // The idempotent buffer is zero-padded to the closure's stride, so it can be looked up.
    ElementInspector(std::size_t states, std::size_t stride)
        : n(states), stamp(states, 0), inverse(states, 0), colour(states, 0), idempotent(stride, T(0)) {}

    // The lcm of the cycle lengths of x's functional graph: the period of x in <x>.
    std::size_t period(const T* x) {
        std::fill(colour.begin(), colour.end(), 0);  // 0 unseen, 1 on the current path, 2 done
        std::size_t result = 1;
        for (std::size_t s = 0; s < n; ++s) {
            std::size_t q = s;
            while (colour[q] == 0) {
                colour[q] = 1;
                q = x[q];
            }
            if (colour[q] == 1) {  // a new cycle through q
                std::size_t len = 1;
                for (std::size_t p = x[q]; p != q; p = x[p]) ++len;
                result = saturating_lcm(result, len);
            }
            for (q = s; colour[q] == 1; q = x[q]) colour[q] = 2;
        }
        return result;
    }

    // When x is a group element (x permutes its own image), its idempotent power x^omega:
    // q -> pi^-1(x(q)) with pi = x restricted to its image. nullptr otherwise.
    const T* group_idempotent(const T* x) {
        ++round;
        for (std::size_t q = 0; q < n; ++q) stamp[x[q]] = round;  // marks the image
        ++round;
        for (std::size_t p = 0; p < n; ++p) {
            if (stamp[p] != round - 1 && stamp[p] != round) continue;  // p not in the image
            const T y = x[p];
            if (stamp[y] == round) return nullptr;  // two image points collide: rank drops
            stamp[y] = round;
            inverse[y] = std::uint32_t(p);
        }
        for (std::size_t q = 0; q < n; ++q) idempotent[q] = T(inverse[x[q]]);
        return idempotent.data();
    }
};

bool is_permutation(const Dfa& dfa, Letter a) {
    std::vector<bool> hit(dfa.num_states(), false);
    for (std::size_t q = 0; q < dfa.num_states(); ++q) {
        const State t = dfa.next(State(q), a);
        if (hit[t]) return false;
        hit[t] = true;
    }
    return true;
}

template <class T>
MonoidSummary summarize(const Dfa& dfa, const Closure<T>& c) {
    MonoidSummary s;
    s.elements_seen = c.size();
    bool all_permutations = true;
    for (std::size_t a = 0; a < dfa.num_letters(); ++a) all_permutations = all_permutations && is_permutation(dfa, Letter(a));

    ElementInspector<T> inspect(c.n, c.stride);
    std::vector<std::size_t> h_class(c.complete ? c.size() : 0, 0);  // group elements per idempotent
    for (std::size_t i = 0; i < c.size(); ++i) {
        const T* x = c.element(i);
        if (s.witness_period == 0) {
            const std::size_t p = inspect.period(x);
            if (p > 1) {
                s.witness = c.word(i);
                s.witness_period = p;
            }
        }
        if (!c.complete) {
            if (s.witness_period != 0) break;  // nothing more to learn from the partial closure
            continue;
        }
        if (const T* e = inspect.group_idempotent(x)) ++h_class[*c.find(e)];
    }

    if (c.complete) {
        s.size = c.size();
        std::set<std::size_t> orders;
        for (std::size_t count : h_class)
            if (count > 1) orders.insert(count);
        s.group_orders.assign(orders.begin(), orders.end());
        if (c.size() == 1 || s.witness_period == 0) s.classification = MonoidClass::aperiodic;
        else s.classification = all_permutations ? MonoidClass::group : MonoidClass::mixed;
        s.message = fmt::format("{} elements", c.size());
        return s;
    }

    s.message = fmt::format("over the limit of {} elements", c.limit);
    if (all_permutations) {
        s.classification = MonoidClass::group;
        s.message += "; a group (every letter is a permutation)";
    } else if (s.witness_period != 0) {
        s.classification = MonoidClass::mixed;
        s.message += fmt::format("; mixed (a letter is not a permutation, and an element has period {})", s.witness_period);
    } else {
        s.message += "; class undecided (no element with a non-trivial period among those seen)";
    }
    return s;
}

}  // namespace

std::size_t monoid_element_limit(std::size_t num_states, std::size_t limit) {
    const std::size_t bytes_per_element = std::max<std::size_t>(
        1, (num_states * (num_states <= 256 ? 1 : num_states <= 65536 ? 2 : 4) + 7) / 8 * 8 + 40);  // + parent, letter, slots
    const std::size_t fits = monoid_memory_budget_bytes / bytes_per_element;
    const std::size_t index_max = std::numeric_limits<std::uint32_t>::max() / 4;  // indices are 32-bit
    return std::max<std::size_t>(1, std::min({limit, fits, index_max}));
}

TransitionMonoid transition_monoid(const Dfa& dfa, std::size_t limit) {
    return with_closure(dfa, limit, [](const auto& c) {
        TransitionMonoid m;
        m.complete = c.complete;
        m.limit = c.limit;
        m.elements.resize(c.size());
        m.words.resize(c.size());
        for (std::size_t i = 0; i < c.size(); ++i) {
            m.elements[i].assign(c.element(i), c.element(i) + c.n);
            if (i != 0) {
                m.words[i] = m.words[c.parent[i]];  // the parent comes earlier in BFS order
                m.words[i].push_back(c.letter[i]);
            }
        }
        return m;
    });
}

const char* to_string(MonoidClass c) {
    switch (c) {
        case MonoidClass::group: return "group";
        case MonoidClass::aperiodic: return "aperiodic";
        case MonoidClass::mixed: return "mixed";
    }
    return "unknown";
}

MonoidSummary summarize_monoid(const Dfa& dfa, std::size_t limit) {
    return with_closure(dfa, limit, [&](const auto& c) { return summarize(dfa, c); });
}

}  // namespace statetrack::automata
