// Trim, Hopcroft minimization, product constructions, shortest distinguishing words, word
// enumeration. Every algorithm works on flat arrays (no per-state allocation), so a 10^6-state
// DFA costs a few arrays of n |Sigma| 32-bit integers.
#include "statetrack/automata/algorithms.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>

#include "statetrack/automata/error.hpp"

namespace statetrack::automata {

namespace {

using Index = std::uint32_t;  // positions in the flat arrays below

const std::string& origin_of(const Dfa& dfa) {
    static const std::string unnamed = "<dfa>";
    return dfa.name.empty() ? unnamed : dfa.name;
}

// Refuses tables whose flat indices would not fit the 32-bit arrays used here.
void check_index_range(const Dfa& dfa, std::size_t entries, const char* what) {
    if (entries >= std::numeric_limits<Index>::max())
        throw LimitError(origin_of(dfa), what, fmt::format("{} entries exceed the 2^32 limit of the algorithms", entries));
}

}  // namespace

Dfa trim(const Dfa& dfa) {
    const std::size_t n = dfa.num_states(), k = dfa.num_letters();
    std::vector<State> index(n, no_state), order;
    order.reserve(n);
    index[dfa.start] = 0;
    order.push_back(dfa.start);
    for (std::size_t head = 0; head < order.size(); ++head)
        for (Letter a = 0; a < k; ++a) {
            const State t = dfa.next(order[head], a);
            if (index[t] == no_state) {
                index[t] = State(order.size());
                order.push_back(t);
            }
        }
    Dfa out;
    out.name = dfa.name;
    out.alphabet = dfa.alphabet;
    out.start = 0;
    out.accepting.resize(order.size());
    out.delta.resize(order.size() * k);
    if (!dfa.state_names.empty()) out.state_names.resize(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        const State q = order[i];
        out.accepting[i] = dfa.accepting[q];
        for (Letter a = 0; a < k; ++a) out.delta[i * k + a] = index[dfa.next(q, a)];
        if (!dfa.state_names.empty()) out.state_names[i] = dfa.state_names[q];
    }
    return out;
}

// Hopcroft's algorithm. The partition lives in one permutation `elems` of the states: block b is
// elems[first[b] .. end[b]), and during a round its marked states are moved to the front,
// elems[first[b] .. mid[b]). A split keeps the larger part under the old id and gives the smaller
// part a new id; the new part is then queued with every letter. That one rule covers both cases of
// the classic algorithm: if (b, c) was queued, the queue now holds both halves; if it was not, it
// holds the smaller half. Each state therefore enters a splitter O(log n) times, and since every
// block is queued with all letters at once, the queue holds blocks and a splitter's predecessors
// are read for all letters in one pass (they are adjacent in memory).
StateClasses language_classes(const Dfa& dfa) {
    const std::size_t n = dfa.num_states(), k = dfa.num_letters();
    StateClasses result;
    if (n == 0) return result;
    check_index_range(dfa, n * k, "/transitions");

    // Predecessors grouped by (target, letter): pred[pred_begin[t k + a] .. pred_begin[t k + a + 1]).
    std::vector<Index> pred_begin(n * k + 1, 0);
    std::vector<State> pred(n * k);
    for (std::size_t i = 0; i < n * k; ++i) ++pred_begin[std::size_t(dfa.delta[i]) * k + i % k + 1];
    for (std::size_t i = 1; i <= n * k; ++i) pred_begin[i] += pred_begin[i - 1];
    for (std::size_t i = 0; i < n * k; ++i) pred[pred_begin[std::size_t(dfa.delta[i]) * k + i % k]++] = State(i / k);
    for (std::size_t i = n * k; i > 0; --i) pred_begin[i] = pred_begin[i - 1];  // undo the cursor shift
    pred_begin[0] = 0;

    std::vector<State> elems(n), block(n);
    std::vector<Index> loc(n), first, end, mid;
    first.reserve(n);
    end.reserve(n);
    mid.reserve(n);
    // Initial partition: rejecting states, then accepting states (empty blocks are not created).
    std::size_t num_rejecting = 0;
    for (std::size_t q = 0; q < n; ++q) num_rejecting += !dfa.accepting[q];
    {
        std::size_t r = 0, acc = num_rejecting;
        for (State q = 0; q < n; ++q) elems[dfa.accepting[q] ? acc++ : r++] = q;
    }
    for (std::size_t i = 0; i < n; ++i) loc[elems[i]] = Index(i);
    auto add_block = [&](std::size_t from, std::size_t to) {
        for (std::size_t i = from; i < to; ++i) block[elems[i]] = State(first.size());
        first.push_back(Index(from));
        end.push_back(Index(to));
        mid.push_back(Index(from));
    };
    if (num_rejecting > 0) add_block(0, num_rejecting);
    if (num_rejecting < n) add_block(num_rejecting, n);

    // Each queued block stands for (block, every letter): a new block is always queued with all of them.
    std::vector<State> work;
    if (first.size() == 2) work.push_back((end[0] - first[0] <= end[1] - first[1]) ? 0 : 1);

    std::vector<Index> bucket(k + 1);  // marked[bucket[a] .. bucket[a + 1]): predecessors on letter a
    std::vector<State> marked;         // each state at most once per letter
    std::vector<State> touched;        // blocks with at least one marked state
    touched.reserve(n);
    while (!work.empty()) {
        const State splitter = work.back();
        work.pop_back();
        // Collect the predecessors for every letter first, grouped by letter, and split after:
        // splitting permutes elems, also inside the splitter itself. Splitting by the splitter as it
        // was for the later letters is sound, and complete because any part split off it is queued.
        std::fill(bucket.begin(), bucket.end(), 0);
        for (Index i = first[splitter]; i < end[splitter]; ++i) {
            const std::size_t base = std::size_t(elems[i]) * k;
            for (Letter a = 0; a < k; ++a) bucket[a + 1] += pred_begin[base + a + 1] - pred_begin[base + a];
        }
        for (Letter a = 0; a < k; ++a) bucket[a + 1] += bucket[a];
        marked.resize(bucket[k]);
        for (Index i = first[splitter]; i < end[splitter]; ++i) {
            const std::size_t base = std::size_t(elems[i]) * k;
            for (Letter a = 0; a < k; ++a)
                for (Index j = pred_begin[base + a]; j < pred_begin[base + a + 1]; ++j) marked[bucket[a]++] = pred[j];
        }
        // Now bucket[a] is the end of letter a's group.
        for (Letter a = 0; a < k; ++a) {
            for (Index m = a == 0 ? 0 : bucket[a - 1]; m < bucket[a]; ++m) {
                const State p = marked[m], b = block[p];
                if (mid[b] == first[b]) touched.push_back(b);
                const Index to = mid[b]++, from = loc[p];
                const State other = elems[to];
                elems[to] = p;
                loc[p] = to;
                elems[from] = other;
                loc[other] = from;
            }
            for (State b : touched) {
                if (mid[b] == end[b]) {  // every state marked: no split
                    mid[b] = first[b];
                    continue;
                }
                const State nb = State(first.size());
                if (mid[b] - first[b] <= end[b] - mid[b]) {  // the marked part is the smaller one
                    first.push_back(first[b]);
                    end.push_back(mid[b]);
                    first[b] = mid[b];
                } else {
                    first.push_back(mid[b]);
                    end.push_back(end[b]);
                    end[b] = mid[b];
                }
                mid.push_back(first[nb]);
                mid[b] = first[b];
                for (Index i = first[nb]; i < end[nb]; ++i) block[elems[i]] = nb;
                work.push_back(nb);
            }
            touched.clear();
        }
    }

    // Number the classes in order of their first state.
    std::vector<State> renumber(first.size(), no_state);
    result.class_of.resize(n);
    for (std::size_t q = 0; q < n; ++q) {
        State& c = renumber[block[q]];
        if (c == no_state) c = State(result.num_classes++);
        result.class_of[q] = c;
    }
    return result;
}

Dfa minimize(const Dfa& dfa) {
    const Dfa reachable = trim(dfa);
    const StateClasses classes = language_classes(reachable);
    const std::size_t k = reachable.num_letters();
    Dfa quotient;
    quotient.name = reachable.name;
    quotient.alphabet = reachable.alphabet;
    quotient.start = classes.class_of[reachable.start];
    quotient.accepting.resize(classes.num_classes);
    quotient.delta.resize(classes.num_classes * k);
    for (std::size_t q = 0; q < reachable.num_states(); ++q) {
        const State c = classes.class_of[q];
        quotient.accepting[c] = reachable.accepting[q];
        for (Letter a = 0; a < k; ++a) quotient.delta[c * k + a] = classes.class_of[reachable.next(State(q), a)];
    }
    return trim(quotient);  // every class is reachable; trim gives the canonical breadth-first numbering
}

bool is_minimal(const Dfa& dfa) {
    return trim(dfa).num_states() == dfa.num_states() && language_classes(dfa).num_classes == dfa.num_states();
}

Dfa complement(const Dfa& dfa) {
    Dfa out = dfa;
    out.accepting.flip();
    out.name = dfa.name.empty() ? std::string() : "not " + dfa.name;
    return out;
}

namespace {

// For each letter of a, the letter of b with the same symbol. Throws when the symbol sets differ.
std::vector<Letter> match_letters(const Dfa& a, const Dfa& b) {
    std::vector<Letter> to_b(a.num_letters());
    if (a.alphabet == b.alphabet) {
        for (Letter x = 0; x < a.num_letters(); ++x) to_b[x] = x;
        return to_b;
    }
    std::unordered_map<std::string, Letter> in_b;
    for (Letter x = 0; x < b.num_letters(); ++x) in_b.emplace(b.alphabet[x], x);
    for (Letter x = 0; x < a.num_letters(); ++x) {
        auto it = in_b.find(a.alphabet[x]);
        if (it == in_b.end())
            throw InputError(origin_of(b), "alphabet",
                             fmt::format("symbol '{}' of {} is missing; both automata need the same alphabet",
                                         a.alphabet[x], origin_of(a)));
        to_b[x] = it->second;
    }
    if (a.num_letters() != b.num_letters())
        throw InputError(origin_of(b), "alphabet",
                         fmt::format("{} symbols against {} in {}; both automata need the same alphabet",
                                     b.num_letters(), a.num_letters(), origin_of(a)));
    return to_b;
}

// Ids for the pairs of states met in a product search: a dense table when the product is small,
// a hash map when it is not (the reachable part of a large product is usually far smaller).
struct PairIds {
    std::size_t nb = 0;
    std::vector<Index> dense;
    std::unordered_map<std::uint64_t, Index> sparse;
    bool use_dense = false;

    PairIds(std::size_t num_a, std::size_t num_b) : nb(num_b), use_dense(num_a * num_b <= (std::size_t(1) << 22)) {
        if (use_dense) dense.assign(num_a * num_b, std::numeric_limits<Index>::max());
    }
    // The id of (p, q), or `fresh` (recorded as its id) when the pair is new.
    Index find_or_add(State p, State q, Index fresh) {
        if (use_dense) {
            Index& id = dense[std::size_t(p) * nb + q];
            if (id == std::numeric_limits<Index>::max()) id = fresh;
            return id;
        }
        return sparse.try_emplace((std::uint64_t(p) << 32) | q, fresh).first->second;
    }
};

// Breadth-first search over the reachable part of a x b from (a.start, b.start), letters in a's
// order. Calls on_edge(from, letter, to, is_new, target pair) for every arc; stops when it returns
// false.
// Returns the pairs in the order they were found (their ids).
template <class OnEdge>
std::vector<std::pair<State, State>> explore_product(const Dfa& a, const Dfa& b, OnEdge&& on_edge) {
    const std::vector<Letter> to_b = match_letters(a, b);
    PairIds ids(a.num_states(), b.num_states());
    std::vector<std::pair<State, State>> pairs{{a.start, b.start}};
    ids.find_or_add(a.start, b.start, 0);
    for (std::size_t head = 0; head < pairs.size(); ++head) {
        const auto [p, q] = pairs[head];
        for (Letter x = 0; x < a.num_letters(); ++x) {
            const State p2 = a.next(p, x), q2 = b.next(q, to_b[x]);
            const Index id = ids.find_or_add(p2, q2, Index(pairs.size()));
            const bool is_new = id == pairs.size();
            if (is_new) {
                check_index_range(a, pairs.size() + 1, "product");
                pairs.emplace_back(p2, q2);
            }
            if (!on_edge(Index(head), x, id, is_new, std::pair<State, State>{p2, q2})) return pairs;
        }
    }
    return pairs;
}

template <class Accept>
Dfa product(const Dfa& a, const Dfa& b, Accept accept, const char* op) {
    Dfa out;
    out.name = a.name.empty() && b.name.empty() ? std::string() : fmt::format("({} {} {})", a.name, op, b.name);
    out.alphabet = a.alphabet;
    out.start = 0;
    const auto pairs = explore_product(a, b, [&](Index, Letter, Index to, bool, std::pair<State, State>) {
        out.delta.push_back(State(to));
        return true;
    });
    out.accepting.resize(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i)
        out.accepting[i] = accept(bool(a.accepting[pairs[i].first]), bool(b.accepting[pairs[i].second]));
    return out;
}

}  // namespace

std::optional<std::vector<Letter>> distinguishing_word(const Dfa& a, const Dfa& b) {
    match_letters(a, b);  // the alphabet check also applies when the starts already differ
    if (a.accepting[a.start] != b.accepting[b.start]) return std::vector<Letter>{};
    // Breadth-first discovery order is by nondecreasing depth, so the first disagreeing pair found
    // ends a shortest distinguishing word.
    std::vector<Index> parent{0};
    std::vector<Letter> via{0};
    std::optional<Index> found;
    explore_product(a, b, [&](Index from, Letter x, Index to, bool is_new, std::pair<State, State> pq) {
        if (!is_new) return true;
        parent.push_back(from);
        via.push_back(x);
        if (a.accepting[pq.first] == b.accepting[pq.second]) return true;
        found = to;
        return false;
    });
    if (!found) return std::nullopt;
    std::vector<Letter> word;
    for (Index i = *found; i != 0; i = parent[i]) word.push_back(via[i]);
    return std::vector<Letter>(word.rbegin(), word.rend());
}

Dfa intersection(const Dfa& a, const Dfa& b) {
    return product(a, b, [](bool x, bool y) { return x && y; }, "and");
}
Dfa union_of(const Dfa& a, const Dfa& b) {
    return product(a, b, [](bool x, bool y) { return x || y; }, "or");
}
Dfa difference(const Dfa& a, const Dfa& b) {
    return product(a, b, [](bool x, bool y) { return x && !y; }, "minus");
}

void enumerate_words(std::size_t num_letters, std::size_t length,
                     const std::function<bool(const std::vector<Letter>&)>& visit) {
    if (length > 0 && num_letters == 0) return;
    std::vector<Letter> word(length, 0);
    for (;;) {
        if (!visit(word)) return;
        // Odometer increment: the last letter fastest, which is lexicographic order.
        std::size_t i = length;
        while (i > 0 && word[i - 1] + 1 == num_letters) word[--i] = 0;
        if (i == 0) return;
        ++word[i - 1];
    }
}

}  // namespace statetrack::automata
