// verify(): the exact certificate (lrnn's rational closure, or an interval orbit) and the
// per-precision closure / failing-word search. The scalar-generic parts are templates over the
// evaluation types of lrnn/scalars.hpp, instantiated only in this file.
#include "statetrack/proofs/verify.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <unordered_map>

#include "statetrack/automata/error.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/evaluate.hpp"
#include "brent.hpp"
#include "statetrack/proofs/integer_closure.hpp"
#include "statetrack/lrnn/scalars.hpp"
#include "same_bits.hpp"

namespace statetrack::proofs {

using automata::Dfa;
using automata::Letter;
using automata::State;
using lrnn::Network;
using lrnn::NetworkState;
using lrnn::Precision;
using lrnn::PreparedNetwork;

namespace {

template <class T>
bool same_state(const NetworkState<T>& a, const NetworkState<T>& b) {
    if (a.outputs != b.outputs) return false;
    for (std::size_t i = 0; i < a.hidden.size(); ++i)
        for (std::size_t k = 0; k < a.hidden[i].size(); ++k)
            if (!detail::same_bits(a.hidden[i][k], b.hidden[i][k])) return false;
    return true;
}

bool agrees(const Network& net, const Dfa& dfa, State q, std::uint32_t symbol, bool certain) {
    return certain && net.accept[symbol] == bool(dfa.accepting[q]) && net.states[symbol] == std::int64_t(q);
}

Word rebuild(const std::vector<std::pair<std::size_t, Letter>>& parent, std::size_t node) {
    Word word;
    while (node != 0) {
        word.push_back(parent[node].second);
        node = parent[node].first;
    }
    return {word.rbegin(), word.rend()};
}

// Breadth-first exploration of (DFA state, network state) pairs; nodes with equal keys are merged.
// Stops at the first disagreement (a shortest failing word) or at max_nodes.
template <class T>
struct Exploration {
    std::vector<std::pair<State, NetworkState<T>>> nodes;
    std::vector<std::pair<std::size_t, Letter>> parent;
    std::vector<std::size_t> depth;
    bool complete = false;
    std::optional<Word> failure;
    std::size_t exhaustive_length = 0;  // all words up to this length were stepped
};

template <class T, class Key>
Exploration<T> explore(const Network& net, const PreparedNetwork<T>& prepared, const Dfa& dfa, std::size_t max_nodes, Key key) {
    Exploration<T> ex;
    std::unordered_map<std::string, std::size_t> index;
    ex.nodes.emplace_back(dfa.start, lrnn::initial_state(prepared));
    ex.parent.emplace_back(0, 0);
    ex.depth.push_back(0);
    index.emplace(key(dfa.start, ex.nodes[0].second), 0);
    for (std::size_t i = 0; i < ex.nodes.size(); ++i) {
        ex.exhaustive_length = ex.depth[i];  // every node of smaller depth has been expanded
        for (Letter a = 0; a < dfa.num_letters(); ++a) {
            NetworkState<T> s = ex.nodes[i].second;
            s.certain = true;
            const std::uint32_t symbol = lrnn::step(prepared, s, a);
            const State q = dfa.next(ex.nodes[i].first, a);
            if (!agrees(net, dfa, q, symbol, s.certain)) {
                Word w = rebuild(ex.parent, i);
                w.push_back(a);
                ex.failure = std::move(w);
                return ex;
            }
            auto [it, inserted] = index.emplace(key(q, s), ex.nodes.size());
            if (!inserted) continue;
            if (ex.nodes.size() >= max_nodes) return ex;
            ex.nodes.emplace_back(q, std::move(s));
            ex.parent.emplace_back(i, a);
            ex.depth.push_back(ex.depth[i] + 1);
        }
    }
    ex.complete = true;
    ex.exhaustive_length = std::numeric_limits<std::size_t>::max();
    return ex;
}

// Brent's cycle detection on (DFA state, network state) under a^k, checking every k on the way.
template <class T>
RepeatedLetter repeated_letter(const Network& net, const PreparedNetwork<T>& prepared, const Dfa& dfa, Letter a, std::size_t max_steps) {
    RepeatedLetter r;
    r.letter = a;
    struct Pair {
        State q;
        NetworkState<T> s;
    };
    auto advance = [&](Pair& p) {
        const std::uint32_t symbol = lrnn::step(prepared, p.s, a);
        p.q = dfa.next(p.q, a);
        return agrees(net, dfa, p.q, symbol, p.s.certain);
    };
    auto same = [](const Pair& x, const Pair& y) { return x.q == y.q && same_state(x.s, y.s); };
    const Pair start{dfa.start, lrnn::initial_state(prepared)};
    Pair tortoise = start, hare = start;
    std::size_t power = 1, lambda = 1, k = 1;
    if (!advance(hare)) {
        r.first_failure = 1;
        r.steps = 1;
        return r;
    }
    while (!same(tortoise, hare)) {
        if (k >= max_steps) {
            r.steps = k;
            return r;
        }
        if (power == lambda) {
            tortoise = hare;
            power *= 2;
            lambda = 0;
        }
        ++k;
        ++lambda;
        if (!advance(hare)) {
            r.first_failure = k;
            r.steps = k;
            return r;
        }
    }
    // The hare has checked k >= mu + lambda positions: every later one repeats a checked one.
    r.cycle_found = true;
    r.pre_period = detail::pre_period(start, lambda, advance, same).first;
    r.period = lambda;
    r.steps = k;
    return r;
}

struct Scale {
    double max_norm = 0;  // largest 2-norm of a reachable hidden state (all layers)
    double margin = std::numeric_limits<double>::infinity();
};

// Readout margin of one layer's hidden vector given as doubles: how far (2-norm) it may move
// before the readout can change its label.
double layer_margin(const lrnn::Layer& layer, const std::vector<double>& h, const std::vector<std::vector<double>>& anchors) {
    const auto& r = layer.readout;
    if (r.kind == lrnn::Readout::Kind::argmax) {
        std::size_t best = 0;
        for (std::size_t i = 1; i < h.size(); ++i)
            if (h[best] < h[i]) best = i;
        double gap = std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < h.size(); ++i)
            if (r.labels[i] != r.labels[best]) gap = std::min(gap, h[best] - h[i]);
        return gap / 2;
    }
    std::vector<double> d(anchors.size());
    std::size_t best = 0;
    for (std::size_t k = 0; k < anchors.size(); ++k) {
        double s = 0;
        for (std::size_t i = 0; i < h.size(); ++i) s += (h[i] - anchors[k][i]) * (h[i] - anchors[k][i]);
        d[k] = std::sqrt(s);
        if (d[k] < d[best]) best = k;
    }
    double gap = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < anchors.size(); ++k)
        if (r.labels[k] != r.labels[best]) gap = std::min(gap, d[k] - d[best]);
    return gap / 2;
}

template <class T>
double to_double(const T& x) {
    if constexpr (std::is_same_v<T, lrnn::Rational>) {
        return x.template convert_to<double>();
    } else if constexpr (std::is_same_v<T, lrnn::MpfiFloat>) {
        return mpfi_get_d(x.get());  // the midpoint
    } else {
        return static_cast<double>(x);
    }
}

// Largest state norm and smallest readout margin over reachable hidden states given as doubles,
// one state (per layer, its hidden vector) at a time: large closures stream them.
struct ScaleAccumulator {
    const Network& net;
    std::vector<std::vector<std::vector<double>>> anchors;
    Scale scale;
    explicit ScaleAccumulator(const Network& n) : net(n), anchors(n.layers.size()) {
        for (std::size_t l = 0; l < net.layers.size(); ++l)
            for (const auto& a : net.layers[l].readout.anchors) {
                std::vector<double> v;
                for (const auto& x : a) v.push_back(x.approx);
                anchors[l].push_back(std::move(v));
            }
    }
    void add(const std::vector<std::vector<double>>& node) {
        double norm2 = 0;
        for (std::size_t l = 0; l < node.size(); ++l) {
            for (double x : node[l]) norm2 += x * x;
            scale.margin = std::min(scale.margin, layer_margin(net.layers[l], node[l], anchors[l]));
        }
        scale.max_norm = std::max(scale.max_norm, std::sqrt(norm2));
    }
};

Scale scale_from(const Network& net, const std::vector<std::vector<std::vector<double>>>& hidden) {
    ScaleAccumulator acc(net);
    for (const auto& node : hidden) acc.add(node);
    return acc.scale;
}

template <class T>
Scale scale_of(const Network& net, const std::vector<std::pair<State, NetworkState<T>>>& nodes) {
    std::vector<std::vector<std::vector<double>>> hidden;
    for (const auto& node : nodes) {
        hidden.emplace_back();
        for (const auto& layer : node.second.hidden) {
            hidden.back().emplace_back();
            for (const auto& x : layer) hidden.back().back().push_back(to_double(x));
        }
    }
    return scale_from(net, hidden);
}

// First-order bound on the 2-norm error one step adds in a precision with unit roundoff u: each GH
// factor (support s, beta) costs beta (2 s + 6) R u (dot product, scaling, update and the rounded
// parameters), a diagonal R u, a bias (R + |B|) u, and every coordinate one more rounding.
double step_error_bound(const Network& net, double max_norm, double u) {
    const double R = std::max(max_norm, 1.0);
    double total = 0;
    for (const auto& layer : net.layers) {
        double worst = 0;
        for (const auto& t : layer.transitions) {
            double c = 0;
            for (const auto& f : t.factors) {
                std::size_t support = 0;
                for (const auto& [i, x] : f.v.entries) support += x.approx != 0;
                c += std::abs(f.beta.approx) * double(2 * support + 6) * R;
            }
            if (!t.diagonal.empty()) c += R;
            double bias = 0;
            for (const auto& b : t.bias) bias += b.approx * b.approx;
            if (!t.bias.empty()) c += R + std::sqrt(bias);
            worst = std::max(worst, c + R);
        }
        total += worst;
    }
    return total * u;
}

// ---- the interval orbit (irrational networks) ----

using lrnn::MpfiFloat;

double upper(const MpfiFloat& x) {
    mpfr_t r;
    mpfr_init2(r, mpfi_get_prec(x.get()));
    mpfi_get_right(r, x.get());
    const double d = mpfr_get_d(r, MPFR_RNDU);
    mpfr_clear(r);
    return d;
}
double lower(const MpfiFloat& x) {
    mpfr_t r;
    mpfr_init2(r, mpfi_get_prec(x.get()));
    mpfi_get_left(r, x.get());
    const double d = mpfr_get_d(r, MPFR_RNDD);
    mpfr_clear(r);
    return d;
}
MpfiFloat midpoint(const MpfiFloat& x) {
    MpfiFloat m;
    mpfr_t r;
    mpfr_init2(r, mpfi_get_prec(x.get()) + 1);
    mpfi_mid(r, x.get());
    mpfi_set_fr(m.get(), r);
    mpfr_clear(r);
    return m;
}
MpfiFloat interval_sqrt(const MpfiFloat& x) {
    MpfiFloat r;
    mpfi_sqrt(r.get(), x.get());
    return r;
}
// x^2 as a square (x * x of an interval around 0 would have a negative lower end, and its square
// root no lower end at all).
MpfiFloat square(const MpfiFloat& x) {
    MpfiFloat r;
    mpfi_sqr(r.get(), x.get());
    return r;
}

// Key: DFA state, output symbols and midpoints rounded to 2^-40 (distinct orbit points of the
// compiled constructions are far apart; a wrong merge only makes the drift bound large).
std::string orbit_key(State q, const NetworkState<MpfiFloat>& s) {
    std::string key = std::to_string(q);
    for (std::size_t i = 0; i < s.hidden.size(); ++i) {
        key += '|';
        key += std::to_string(s.outputs[i]);
        for (const auto& x : s.hidden[i]) key += fmt::format(",{}", std::nearbyint(mpfi_get_d(x.get()) * 0x1p40) + 0.0);  // -0 -> 0
    }
    return key;
}

// Rigorous lower bound of the readout margin (2-norm) at a thin state.
double interval_margin(const lrnn::Layer& layer, const std::vector<MpfiFloat>& h, const std::vector<std::vector<MpfiFloat>>& anchors) {
    const auto& r = layer.readout;
    std::vector<MpfiFloat> score;  // argmax: the values; nearest: minus the distances
    if (r.kind == lrnn::Readout::Kind::argmax) {
        score = h;
    } else {
        for (const auto& a : anchors) {
            MpfiFloat s(0);
            for (std::size_t i = 0; i < h.size(); ++i) s = s + square(h[i] - a[i]);
            score.push_back(MpfiFloat(0) - interval_sqrt(s));
        }
    }
    std::size_t best = 0;
    for (std::size_t i = 1; i < score.size(); ++i)
        if (mpfi_get_d(score[best].get()) < mpfi_get_d(score[i].get())) best = i;
    double gap = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < score.size(); ++i)
        if (r.labels[i] != r.labels[best]) gap = std::min(gap, lower(score[best] - score[i]));
    return gap / 2;
}

ExactCertificate interval_orbit(const Network& net, const Dfa& dfa, std::size_t max_nodes) {
    lrnn::ScopedPrecision scope(256);
    const PreparedNetwork<MpfiFloat> prepared = lrnn::prepare<MpfiFloat>(net);
    ExactCertificate cert;
    cert.method = "interval orbit";
    // Representatives: thin (midpoint) states, so every step starts from an exact point.
    auto thin = [](NetworkState<MpfiFloat> s) {
        for (auto& layer : s.hidden)
            for (auto& x : layer) x = midpoint(x);
        return s;
    };
    std::vector<std::pair<State, NetworkState<MpfiFloat>>> reps{{dfa.start, thin(lrnn::initial_state(prepared))}};
    std::vector<std::pair<std::size_t, Letter>> parent{{0, 0}};
    std::unordered_map<std::string, std::size_t> index{{orbit_key(dfa.start, reps[0].second), 0}};
    double drift = 0;
    double e0 = 0;
    {
        const auto h0 = lrnn::initial_state(prepared);
        MpfiFloat s(0);
        for (std::size_t l = 0; l < h0.hidden.size(); ++l)
            for (std::size_t i = 0; i < h0.hidden[l].size(); ++i)
                s = s + square(h0.hidden[l][i] - reps[0].second.hidden[l][i]);
        e0 = upper(interval_sqrt(s));
    }
    for (std::size_t i = 0; i < reps.size(); ++i) {
        for (Letter a = 0; a < dfa.num_letters(); ++a) {
            NetworkState<MpfiFloat> s = reps[i].second;
            s.certain = true;
            const std::uint32_t symbol = lrnn::step(prepared, s, a);
            const State q = dfa.next(reps[i].first, a);
            if (s.certain && !agrees(net, dfa, q, symbol, true)) {
                Word w = rebuild(parent, i);
                w.push_back(a);
                cert.counterexample = w;
                cert.complete = true;
                cert.pairs = reps.size();
                cert.proves = fmt::format("the model disagrees with the DFA on a word of length {} (decided with certainty by 256-bit intervals)", w.size());
                return cert;
            }
            if (!s.certain) {
                cert.pairs = reps.size();
                cert.proves = "no proof: a readout along the orbit could not be decided by 256-bit intervals";
                return cert;
            }
            const std::string key = orbit_key(q, s);
            auto it = index.find(key);
            std::size_t j;
            if (it == index.end()) {
                if (reps.size() >= max_nodes) {
                    cert.pairs = reps.size();
                    cert.proves = fmt::format("no all-length proof: the orbit exceeded {} representatives", max_nodes);
                    return cert;
                }
                j = reps.size();
                index.emplace(key, j);
                reps.emplace_back(q, thin(s));
                parent.emplace_back(i, a);
            } else {
                j = it->second;
            }
            MpfiFloat d(0);
            for (std::size_t l = 0; l < s.hidden.size(); ++l)
                for (std::size_t k = 0; k < s.hidden[l].size(); ++k) {
                    d = d + square(s.hidden[l][k] - reps[j].second.hidden[l][k]);
                }
            drift = std::max(drift, upper(interval_sqrt(d)));
        }
    }
    std::vector<std::vector<std::vector<MpfiFloat>>> anchors;
    for (const auto& l : prepared.layers) anchors.push_back(l.anchors);
    double margin = std::numeric_limits<double>::infinity();
    for (const auto& [q, s] : reps)
        for (std::size_t l = 0; l < s.hidden.size(); ++l) margin = std::min(margin, interval_margin(net.layers[l], s.hidden[l], anchors[l]));
    cert.complete = true;
    cert.pairs = reps.size();
    cert.margin = margin;
    cert.drift = drift;
    if (margin <= e0) {
        cert.proves = "no proof: the readout margin is not larger than the initial enclosure";
        return cert;
    }
    if (drift == 0) {
        cert.certified = true;
        cert.log2_certified_length = std::numeric_limits<double>::infinity();
        cert.proves = fmt::format("correct for every length: the orbit closes exactly on {} states and every readout is separated (margin {:.3g})", reps.size(), margin);
        return cert;
    }
    cert.log2_certified_length = std::log2((margin - e0) / drift);
    cert.proves = fmt::format(
        "correct for every word of length < 2^{:.1f}: {} orbit representatives, per-step drift <= {:.3g}, readout margin >= {:.3g}, "
        "|A| <= 1 (rigorous 256-bit interval bounds; they hold for every parameter value inside the stored enclosures, the ideal "
        "irrational ones included). Intervals alone prove no more: a product of the stored reflections is a rotation by an "
        "angle that is not exactly a rational multiple of pi, so the orbit of the stored decimals is in general infinite",
        cert.log2_certified_length, reps.size(), drift, margin);
    return cert;
}

// ---- per precision ----

template <class T>
PrecisionVerdict analyse_as(const Network& net, const Dfa& dfa, const Precision& precision, const VerifyOptions& options, const Scale& scale) {
    PrecisionVerdict v;
    v.name = precision.name();
    v.unit_roundoff = std::ldexp(1.0, -int(precision.bits));
    const PreparedNetwork<T> prepared = lrnn::prepare<T>(net);
    auto ex = explore<T>(net, prepared, dfa, options.precision_max_pairs, [](State q, const NetworkState<T>& s) { return lrnn::state_key(q, s); });
    v.states = ex.nodes.size();
    v.closure_complete = ex.complete;
    v.exhaustive_length = ex.exhaustive_length;
    if (ex.failure) {
        v.first_failure = ex.failure;
        v.failure_is_shortest = true;
        v.failure_found_by = "closure";
        v.exhaustive_length = ex.failure->size() - 1;
    } else if (ex.complete) {
        v.all_lengths = true;
    }
    auto consider = [&](Word w, const char* by) {
        if (!v.first_failure || w.size() < v.first_failure->size()) {
            v.first_failure = std::move(w);
            v.failure_found_by = by;
        }
    };
    if (!v.all_lengths && !v.failure_is_shortest) {
        for (Letter a = 0; a < dfa.num_letters(); ++a) {
            RepeatedLetter r = repeated_letter<T>(net, prepared, dfa, a, options.repeated_max_steps);
            if (r.first_failure) consider(Word(*r.first_failure, a), "repeated letter");
            v.repeated.push_back(r);
        }
        const lrnn::WordCheck random =
            lrnn::check_random_words(net, dfa, options.random_words, options.random_max_length, options.seed, precision);
        if (random.counterexample) consider(*random.counterexample, "random words");
    }
    v.step_error_bound = step_error_bound(net, scale.max_norm, v.unit_roundoff);
    v.certified_length = std::floor(scale.margin / v.step_error_bound);
    return v;
}

PrecisionVerdict analyse(const Network& net, const Dfa& dfa, const Precision& precision, const VerifyOptions& options, const Scale& scale) {
    using K = Precision::Kind;
    switch (precision.kind) {
        case K::fp16: return analyse_as<lrnn::Half>(net, dfa, precision, options, scale);
        case K::bf16: return analyse_as<lrnn::BFloat16>(net, dfa, precision, options, scale);
        case K::fp32: return analyse_as<float>(net, dfa, precision, options, scale);
        case K::fp64: return analyse_as<double>(net, dfa, precision, options, scale);
        case K::bits:
        case K::mpfr: {
            lrnn::ScopedPrecision scope(precision.bits);
            return analyse_as<lrnn::MpfrFloat>(net, dfa, precision, options, scale);
        }
        default: throw InputError("--precisions", precision.name(), "verify takes fp16, bf16, fp32, fp64, bits:P or mpfr:P");
    }
}

}  // namespace

std::vector<Precision> default_precisions() {
    return {lrnn::parse_precision("fp16"), lrnn::parse_precision("bf16"), lrnn::parse_precision("fp32"), lrnn::parse_precision("fp64")};
}

std::vector<Precision> parse_precision_list(const std::string& text) {
    std::vector<Precision> out;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (item.empty()) throw InputError("--precisions", text, "empty item in the list");
        const Precision p = lrnn::parse_precision(item);
        if (p.kind == Precision::Kind::exact || p.kind == Precision::Kind::interval)
            throw InputError("--precisions", item, "exact and interval arithmetic are covered by the exact certificate; list finite precisions");
        out.push_back(p);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

VerifyResult verify(const Network& net, const Dfa& dfa, const VerifyOptions& options) {
    lrnn::check_same_alphabet(net, dfa);
    auto say = [&](const std::string& m) {
        if (options.progress) options.progress(m);
    };
    VerifyResult result;
    Scale scale;
    ExactCertificate& e = result.exact;
    say("exact closure");
    ScaleAccumulator integer_scale(net);
    const IntegerClosure ic = integer_closure(net, dfa, options.exact_max_pairs,
                                              [&](const std::vector<std::vector<double>>& node) { integer_scale.add(node); });
    if (ic.applicable && !ic.ideal) {
        e.method = "integer closure";
        e.complete = ic.complete;
        e.certified = ic.certified;
        e.pairs = ic.pairs;
        e.counterexample = ic.counterexample;
        scale = integer_scale.scale;
    } else if (ic.applicable) {
        // The ideal model closes exactly on angles; the stored decimals get the interval orbit.
        say("angle closure (ideal model) and interval orbit (256 bits, stored model)");
        const ExactCertificate stored = interval_orbit(net, dfa, options.orbit_max_nodes);
        e.method = "angle closure (ideal model) + interval orbit (stored model)";
        e.ideal = true;
        e.recognition_error = ic.recognition_error;
        e.complete = ic.complete;
        e.certified = ic.certified;
        e.pairs = ic.pairs;
        e.drift = stored.drift;
        e.log2_certified_length = stored.log2_certified_length;
        e.stored_proves = stored.proves;
        if (ic.counterexample) {
            // Confirm on the stored model with certainty before calling it a counterexample.
            const auto run = lrnn::run_network(net, *ic.counterexample, Precision{Precision::Kind::interval, 256});
            const State q = automata::run(dfa, *ic.counterexample);
            const auto& last = run.accept.back();
            if (last && (*last != bool(dfa.accepting[q]) || run.states.back() != std::int64_t(q))) e.counterexample = ic.counterexample;
            else e.stored_proves += fmt::format("; the ideal model disagrees with the DFA on \"{}\", which 256-bit intervals cannot decide for the stored model",
                                                automata::format_word(dfa, *ic.counterexample));
        }
        if (!e.counterexample && stored.counterexample) e.counterexample = stored.counterexample;
        scale = integer_scale.scale;
        scale.margin = std::min(scale.margin, stored.margin);
    } else {
        lrnn::ClosureOptions co;
        co.max_pairs = options.exact_max_pairs;
        const lrnn::ClosureResult c = lrnn::exact_closure(net, dfa, co);
        if (c.applicable) {
            e.method = "rational closure";
            e.complete = c.complete;
            e.certified = c.certified;
            e.pairs = c.pairs;
            e.counterexample = c.counterexample;
            if (c.certified) {
                const PreparedNetwork<lrnn::Rational> prepared = lrnn::prepare<lrnn::Rational>(net);
                auto ex = explore<lrnn::Rational>(net, prepared, dfa, options.exact_max_pairs,
                                                  [](State q, const NetworkState<lrnn::Rational>& s) { return lrnn::state_key(q, s); });
                scale = scale_of(net, ex.nodes);
            }
        } else {
            say("interval orbit (256 bits)");
            e = interval_orbit(net, dfa, options.orbit_max_nodes);
            lrnn::ScopedPrecision scope(256);
            const PreparedNetwork<lrnn::MpfiFloat> prepared = lrnn::prepare<lrnn::MpfiFloat>(net);
            auto ex = explore<lrnn::MpfiFloat>(net, prepared, dfa, options.orbit_max_nodes, orbit_key);
            scale = scale_of(net, ex.nodes);
            if (e.complete && !e.counterexample) scale.margin = std::min(scale.margin, e.margin);
        }
    }
    if (e.method != "interval orbit") {
        if (e.certified) {
            e.margin = scale.margin;
            e.log2_certified_length = e.ideal ? e.log2_certified_length : std::numeric_limits<double>::infinity();
            e.proves = e.ideal ? fmt::format("the ideal model (its irrational entries taken as the cosines and sines of multiples of pi / {} "
                                             "recognised from the stored digits, within {:.1e}) is correct for every length: all {} reachable "
                                             "(DFA state, exact state) pairs agree. The stored decimals: {}",
                                             ic.angle_denominator, ic.recognition_error, e.pairs, e.stored_proves)
                               : fmt::format("correct for every length: all {} reachable (DFA state, exact network state) pairs agree", e.pairs);
        } else if (e.counterexample) {
            e.proves = fmt::format("the model disagrees with the DFA (exact arithmetic) on a word of length {}", e.counterexample->size());
        } else {
            e.proves = "no all-length proof: " + (ic.applicable ? ic.message : e.method == "rational closure" ? std::string("the closure did not finish") : ic.message);
        }
    }
    result.counterexample = e.counterexample;
    if (scale.max_norm == 0 && scale.margin == std::numeric_limits<double>::infinity()) scale.margin = 0;
    for (const Precision& p : options.precisions.empty() ? default_precisions() : options.precisions) {
        say("precision " + p.name());
        result.precisions.push_back(analyse(net, dfa, p, options, scale));
    }
    return result;
}

nlohmann::json to_json(const VerifyResult& r, const Dfa& dfa) {
    using nlohmann::json;
    auto word = [&](const std::optional<Word>& w) { return w ? json(automata::format_word(dfa, *w)) : json(nullptr); };
    auto number = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
    json j;
    j["exact"] = {{"method", r.exact.method},
                  {"certified", r.exact.certified},
                  {"complete", r.exact.complete},
                  {"pairs", r.exact.pairs},
                  {"margin", number(r.exact.margin)},
                  {"drift", r.exact.drift},
                  {"log2_certified_length", r.exact.certified ? json("inf") : number(r.exact.log2_certified_length)},
                  {"proves", r.exact.proves},
                  {"ideal_model", r.exact.ideal},
                  {"recognition_error", r.exact.recognition_error},
                  {"stored_model_log2_length", r.exact.ideal ? number(r.exact.log2_certified_length) : json(nullptr)},
                  {"counterexample", word(r.exact.counterexample)}};
    json ps = json::object();
    for (const auto& p : r.precisions) {
        json rep = json::array();
        for (const auto& x : p.repeated)
            rep.push_back({{"letter", dfa.alphabet[x.letter]},
                           {"cycle_found", x.cycle_found},
                           {"pre_period", x.pre_period},
                           {"period", x.period},
                           {"first_failure", x.first_failure ? json(*x.first_failure) : json(nullptr)},
                           {"steps", x.steps}});
        ps[p.name] = {{"all_lengths", p.all_lengths},
                      {"closure_complete", p.closure_complete},
                      {"states", p.states},
                      {"exhaustive_length", p.closure_complete ? json("all") : json(p.exhaustive_length)},
                      {"first_failure", p.first_failure ? json{{"length", p.first_failure->size()},
                                                               {"word", automata::format_word(dfa, *p.first_failure)},
                                                               {"shortest", p.failure_is_shortest},
                                                               {"found_by", p.failure_found_by}}
                                                        : json(nullptr)},
                      {"certified_length", number(p.certified_length)},
                      {"step_error_bound", p.step_error_bound},
                      {"unit_roundoff", p.unit_roundoff},
                      {"repeated_letters", rep}};
    }
    j["precisions"] = ps;
    j["counterexample"] = word(r.counterexample);
    j["passed"] = r.passed();
    return j;
}

}  // namespace statetrack::proofs
