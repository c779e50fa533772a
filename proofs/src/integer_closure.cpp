// integer_closure(): lrnn's step semantics (factors in order, diagonal, bias; readout; shift or
// literal wiring) over int64 states, with nodes stored flat and deduplicated by open addressing.
#include "statetrack/proofs/integer_closure.hpp"

#include <fmt/format.h>
#include <mpfr.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "statetrack/automata/dfa.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/state_set.hpp"

namespace statetrack::proofs {

using automata::Dfa;
using automata::Letter;
using automata::State;
using lrnn::Network;
using lrnn::Number;

namespace {

// Beyond this the integer layers give up (no construction of the toolkit comes near it).
constexpr std::int64_t value_guard = std::int64_t(1) << 31;
constexpr unsigned max_angle_denominator = 1 << 20;
constexpr double recognition_tolerance = 1e-9;  // radians, and |radius - 1|

std::optional<std::int64_t> as_integer(const Number& x) {
    if (!x.is_exact() || x.exact.find('/') != std::string::npos || x.exact.size() > 12) return std::nullopt;
    return std::stoll(x.exact);
}

// The value of a stored number at 448 bits: exact ones from their fraction, others from the
// high-precision digits when present.
struct Mp {
    mpfr_t x;
    Mp() { mpfr_init2(x, 448); }  // beyond the 120 stored digits
    ~Mp() { mpfr_clear(x); }
    Mp(const Mp&) = delete;
    Mp& operator=(const Mp&) = delete;
};
void set_number(mpfr_t out, const Number& n) {
    if (n.is_exact()) {
        const auto slash = n.exact.find('/');
        mpfr_set_str(out, n.exact.substr(0, slash).c_str(), 10, MPFR_RNDN);
        if (slash != std::string::npos) {
            Mp q;
            mpfr_set_str(q.x, n.exact.substr(slash + 1).c_str(), 10, MPFR_RNDN);
            mpfr_div(out, out, q.x, MPFR_RNDN);
        }
    } else if (!n.high.empty()) {
        mpfr_set_str(out, n.high.c_str(), 10, MPFR_RNDN);
    } else {
        mpfr_set_d(out, n.approx, MPFR_RNDN);
    }
}

// The angle of a 2-D vector in units of pi, in [0, 2), and its length.
std::pair<double, double> polar(const std::vector<Number>& v) {
    Mp a, b, r, pi;
    set_number(a.x, v[0]);
    set_number(b.x, v[1]);
    mpfr_hypot(r.x, a.x, b.x, MPFR_RNDN);
    mpfr_atan2(a.x, b.x, a.x, MPFR_RNDN);
    mpfr_const_pi(pi.x, MPFR_RNDN);
    mpfr_div(a.x, a.x, pi.x, MPFR_RNDN);
    double t = mpfr_get_d(a.x, MPFR_RNDN);
    if (t < 0) t += 2;
    return {t, mpfr_get_d(r.x, MPFR_RNDN)};
}

// |angle of v - k pi / n| in radians, at 448 bits (the recognition error of one entry).
double angle_error(const std::vector<Number>& v, std::int64_t k, std::int64_t n) {
    Mp a, b, pi, t;
    set_number(a.x, v[0]);
    set_number(b.x, v[1]);
    mpfr_atan2(a.x, b.x, a.x, MPFR_RNDN);
    mpfr_const_pi(pi.x, MPFR_RNDN);
    mpfr_mul_si(t.x, pi.x, long(k), MPFR_RNDN);
    mpfr_div_si(t.x, t.x, long(n), MPFR_RNDN);
    mpfr_sub(a.x, a.x, t.x, MPFR_RNDN);
    mpfr_mul_2ui(pi.x, pi.x, 1, MPFR_RNDN);
    mpfr_remainder(a.x, a.x, pi.x, MPFR_RNDN);  // into [-pi, pi]
    return std::abs(mpfr_get_d(a.x, MPFR_RNDN));
}

// Smallest denominator d with t within the tolerance of a multiple of 1/d.
std::optional<unsigned> denominator(double t) {
    for (unsigned d = 1; d <= 720; ++d)
        if (std::abs(t * d - std::nearbyint(t * d)) * M_PI < recognition_tolerance * d) return d;
    return std::nullopt;
}

struct IntFactor {
    std::vector<std::uint32_t> support;
    std::vector<std::int64_t> v;
    std::int64_t coefficient = 0;
};
struct IntTransition {
    std::vector<IntFactor> factors;
    std::vector<std::int64_t> diagonal;
    std::vector<std::pair<std::uint32_t, std::int64_t>> bias;
    std::vector<double> mirror_turns;  // angle layers: per factor, the angle of v in units of pi
    std::vector<std::vector<Number>> mirror_vectors;  // angle layers: per factor, v (2-D)
    std::vector<std::int64_t> mirrors; // ... as k of k pi / N
};
struct IntLayer {
    bool angle = false;
    std::size_t width = 0;  // slots in a node: dim, or 1 for an angle
    std::vector<std::int64_t> h0;
    std::vector<IntTransition> transitions;
    std::vector<std::vector<std::int64_t>> anchors;
    std::vector<double> h0_turns;  // angle layers, before N is known
    std::vector<double> anchor_turns;
    const lrnn::Layer* source = nullptr;
};

struct Compiled {
    std::vector<IntLayer> layers;
    std::int64_t n = 0;  // angles are k pi / N, k mod 2N
    double recognition_error = 0;
    std::string why_not;
};

bool integers(const std::vector<Number>& v, std::vector<std::int64_t>& out) {
    out.clear();
    for (const auto& x : v) {
        const auto i = as_integer(x);
        if (!i) return false;
        out.push_back(*i);
    }
    return true;
}

std::optional<IntLayer> integer_layer(const lrnn::Layer& layer) {
    IntLayer l;
    l.width = layer.dim;
    if (!integers(layer.h0, l.h0)) return std::nullopt;
    for (const auto& t : layer.transitions) {
        IntTransition it;
        for (const auto& f : t.factors) {
            IntFactor g;
            std::int64_t dot = 0;
            for (const auto& [i, x] : f.v.entries) {
                const auto value = as_integer(x);
                if (!value) return std::nullopt;
                if (*value != 0) g.support.push_back(i), g.v.push_back(*value), dot += *value * *value;
            }
            // beta / v.v must be an integer: beta = p/q exactly, p / (q dot) integral.
            if (!f.beta.is_exact() || dot == 0) return std::nullopt;
            const auto slash = f.beta.exact.find('/');
            const std::int64_t p = std::stoll(f.beta.exact.substr(0, slash));
            const std::int64_t q = slash == std::string::npos ? 1 : std::stoll(f.beta.exact.substr(slash + 1));
            if (p % (q * dot) != 0) return std::nullopt;
            g.coefficient = p / (q * dot);
            it.factors.push_back(std::move(g));
        }
        if (!integers(t.diagonal, it.diagonal)) return std::nullopt;
        std::vector<std::int64_t> bias;
        if (!integers(t.bias, bias)) return std::nullopt;
        for (std::size_t i = 0; i < bias.size(); ++i)
            if (bias[i] != 0) it.bias.emplace_back(std::uint32_t(i), bias[i]);
        l.transitions.push_back(std::move(it));
    }
    for (const auto& a : layer.readout.anchors) {
        std::vector<std::int64_t> v;
        if (!integers(a, v)) return std::nullopt;
        l.anchors.push_back(std::move(v));
    }
    return l;
}

std::optional<IntLayer> angle_layer(const lrnn::Layer& layer) {
    if (layer.dim != 2 || layer.readout.kind != lrnn::Readout::Kind::nearest) return std::nullopt;
    IntLayer l;
    l.angle = true;
    l.source = &layer;
    l.width = 1;
    auto unit_turns = [&](const std::vector<Number>& v) -> std::optional<double> {
        const auto [t, r] = polar(v);
        if (std::abs(r - 1) > recognition_tolerance) return std::nullopt;
        return t;
    };
    const auto h0 = unit_turns(layer.h0);
    if (!h0) return std::nullopt;
    l.h0_turns = {*h0};
    for (const auto& t : layer.transitions) {
        IntTransition it;
        for (const auto& f : t.factors) {
            if (f.beta.exact != "2") return std::nullopt;
            it.mirror_vectors.push_back(lrnn::dense_vector(f.v));
            it.mirror_turns.push_back(polar(it.mirror_vectors.back()).first);
        }
        for (const auto& d : t.diagonal)
            if (d.exact != "1") return std::nullopt;
        for (const auto& b : t.bias)
            if (!b.is_zero()) return std::nullopt;
        l.transitions.push_back(std::move(it));
    }
    for (const auto& a : layer.readout.anchors) {
        const auto t = unit_turns(a);
        if (!t) return std::nullopt;
        l.anchor_turns.push_back(*t);
    }
    return l;
}

Compiled compile(const Network& net) {
    Compiled c;
    std::vector<double> all_turns;
    for (std::size_t i = 0; i < net.layers.size(); ++i) {
        auto l = integer_layer(net.layers[i]);
        if (!l) l = angle_layer(net.layers[i]);
        if (!l) {
            c.why_not = fmt::format("layer {} is neither integer (entries and beta / v.v integers) nor a 2-D reflection layer at angles k pi / N", i);
            return c;
        }
        if (l->angle) {
            all_turns.insert(all_turns.end(), l->h0_turns.begin(), l->h0_turns.end());
            all_turns.insert(all_turns.end(), l->anchor_turns.begin(), l->anchor_turns.end());
            for (const auto& t : l->transitions) all_turns.insert(all_turns.end(), t.mirror_turns.begin(), t.mirror_turns.end());
        }
        c.layers.push_back(std::move(*l));
    }
    if (all_turns.empty()) return c;
    std::int64_t n = 1;
    for (double t : all_turns) {
        const auto d = denominator(t);
        if (!d) {
            c.why_not = fmt::format("an angle ({} pi) is not recognised as a rational multiple of pi", t);
            c.layers.clear();
            return c;
        }
        n = std::lcm(n, std::int64_t(*d));
        if (n > max_angle_denominator) {
            c.why_not = "the common denominator of the angles is too large";
            c.layers.clear();
            return c;
        }
    }
    c.n = n;
    auto k_of = [&](double t, const std::vector<Number>& v) {
        const std::int64_t k = std::int64_t(std::nearbyint(t * double(n))) % (2 * n);
        c.recognition_error = std::max(c.recognition_error, angle_error(v, k, n));
        return k;
    };
    for (auto& l : c.layers) {
        if (!l.angle) continue;
        l.h0 = {k_of(l.h0_turns[0], l.source->h0)};
        for (std::size_t a = 0; a < l.anchor_turns.size(); ++a) l.anchors.push_back({k_of(l.anchor_turns[a], l.source->readout.anchors[a])});
        for (auto& t : l.transitions)
            for (std::size_t f = 0; f < t.mirror_turns.size(); ++f) t.mirrors.push_back(k_of(t.mirror_turns[f], t.mirror_vectors[f]));
    }
    return c;
}

struct Layout {
    std::vector<std::size_t> offset;  // per layer: first slot of its hidden state; outputs at 1 + layer
    std::size_t classes = 0;          // lrnn::num_token_classes
};

// One token on the node at `x` (slots: DFA state, one output per layer, then hidden states),
// written into `y`. Returns false when a value leaves the guard or a readout ties.
bool step(const Network& net, const Compiled& c, const Layout& layout, std::int64_t* y, Letter token, bool& tie) {
    const std::size_t layers = c.layers.size();
    const bool shift = net.wiring == lrnn::Wiring::shift;
    std::int64_t upstream_before = 0, upstream_after = 0;
    for (std::size_t i = 0; i < layers; ++i) {
        const lrnn::Layer& layer = net.layers[i];
        const IntLayer& l = c.layers[i];
        const std::size_t input = lrnn::input_letter(net, layout.classes, i, std::uint32_t(shift ? upstream_before : upstream_after), token);
        const IntTransition& t = l.transitions[layer.input_transition[input]];
        std::int64_t* h = y + layout.offset[i];
        std::size_t best = 0;
        bool tied = false;
        if (l.angle) {
            const std::int64_t period = 2 * c.n;
            for (std::int64_t b : t.mirrors) h[0] = ((2 * b + c.n - h[0]) % period + period) % period;
            std::int64_t best_d = period;
            for (std::size_t k = 0; k < l.anchors.size(); ++k) {
                std::int64_t d = std::abs(h[0] - l.anchors[k][0]) % period;
                d = std::min(d, period - d);
                if (d < best_d) best_d = d, best = k, tied = false;
                else if (d == best_d && layer.readout.labels[k] != layer.readout.labels[best]) tied = true;
            }
        } else {
            for (const auto& f : t.factors) {
                std::int64_t dot = 0;
                for (std::size_t k = 0; k < f.support.size(); ++k) dot += f.v[k] * h[f.support[k]];
                const std::int64_t scale = f.coefficient * dot;
                for (std::size_t k = 0; k < f.support.size(); ++k) h[f.support[k]] -= scale * f.v[k];
            }
            if (!t.diagonal.empty())
                for (std::size_t k = 0; k < l.width; ++k) h[k] *= t.diagonal[k];
            for (const auto& [k, b] : t.bias) h[k] += b;
            for (std::size_t k = 0; k < l.width; ++k)
                if (h[k] > value_guard || h[k] < -value_guard) return false;
            if (layer.readout.kind == lrnn::Readout::Kind::argmax) {
                std::int64_t top = h[0];  // the first largest: the maximum (vectorizes), then its place
                for (std::size_t k = 1; k < l.width; ++k) top = std::max(top, h[k]);
                while (h[best] != top) ++best;
            } else {
                std::int64_t best_d = std::numeric_limits<std::int64_t>::max();
                for (std::size_t k = 0; k < l.anchors.size(); ++k) {
                    std::int64_t d = 0;
                    for (std::size_t j = 0; j < l.width; ++j) d += (h[j] - l.anchors[k][j]) * (h[j] - l.anchors[k][j]);
                    if (d < best_d) best_d = d, best = k;
                }
            }
        }
        tie = tie || tied;
        const std::uint32_t label = layer.readout.labels[best];
        const std::int64_t out = lrnn::output_symbol(layer.readout, label, input);
        upstream_before = y[1 + i];
        y[1 + i] = out;
        upstream_after = out;
    }
    return true;
}

}  // namespace

IntegerClosure integer_closure(const Network& net, const Dfa& dfa, std::size_t max_pairs, const HiddenVisitor& visit) {
    lrnn::check_same_alphabet(net, dfa);
    IntegerClosure result;
    const Compiled c = compile(net);
    if (c.layers.empty()) {
        result.message = c.why_not.empty() ? "the network has no layers" : c.why_not;
        return result;
    }
    result.applicable = true;
    result.angle_denominator = unsigned(c.n);
    result.recognition_error = c.recognition_error;
    for (const auto& l : c.layers) result.ideal = result.ideal || l.angle;
    Layout layout;
    std::size_t width = 1 + c.layers.size();
    for (const auto& l : c.layers) layout.offset.push_back(width), width += l.width;
    layout.classes = lrnn::num_token_classes(net);
    std::vector<std::int64_t> current(width, 0), next(width);
    current[0] = dfa.start;
    for (std::size_t i = 0; i < c.layers.size(); ++i) {
        current[1 + i] = net.layers[i].initial_output;
        std::copy(c.layers[i].h0.begin(), c.layers[i].h0.end(), current.begin() + long(layout.offset[i]));
    }
    lrnn::SparseStateSet<std::int64_t> nodes(width);  // one-hot layers: O(layers) memory per pair
    nodes.insert(current.data());
    std::vector<std::pair<std::uint32_t, Letter>> parent{{0, 0}};
    const std::vector<Letter> letters = lrnn::closure_letters(net, dfa);
    auto fail = [&](std::size_t node, Letter a) {
        std::vector<Letter> word{a};
        for (std::size_t x = node; x != 0; x = parent[x].first) word.push_back(parent[x].second);
        return std::vector<Letter>(word.rbegin(), word.rend());
    };
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        nodes.get(std::uint32_t(i), current.data());
        for (Letter a : letters) {
            next = current;
            std::int64_t* y = next.data();
            const State q = dfa.next(State(y[0]), a);
            y[0] = q;
            bool tie = false;
            if (!step(net, c, layout, y, a, tie)) {
                result.pairs = nodes.size() + 1;
                result.message = "a hidden value left the integer guard (2^31)";
                return result;
            }
            const std::int64_t symbol = y[c.layers.size()];
            if (tie) {
                result.pairs = nodes.size();
                result.message = fmt::format("no proof: after \"{}\" the ideal state is equidistant from anchors of different labels",
                                             automata::format_word(dfa, fail(i, a)));
                return result;
            }
            if (net.accept[std::size_t(symbol)] != bool(dfa.accepting[q]) || net.states[std::size_t(symbol)] != std::int64_t(q)) {
                result.counterexample = fail(i, a);
                result.complete = true;
                result.pairs = nodes.size();
                result.message = "a reachable pair reads out a different answer than the DFA";
                return result;
            }
            const auto [index, inserted] = nodes.insert(y);
            if (!inserted) continue;
            if (nodes.size() > max_pairs) {
                result.pairs = max_pairs;
                result.message = fmt::format("stopped at the limit of {} pairs", max_pairs);
                return result;
            }
            parent.emplace_back(std::uint32_t(i), a);
        }
    }
    result.pairs = nodes.size();
    result.complete = result.certified = true;
    result.message = fmt::format("all {} reachable (DFA state, network state) pairs agree: correct for every length", result.pairs);
    if (visit) {
        std::vector<std::vector<double>> hidden(c.layers.size());
        for (std::size_t i = 0; i < result.pairs; ++i) {
            nodes.get(std::uint32_t(i), current.data());
            for (std::size_t l = 0; l < c.layers.size(); ++l) {
                const std::int64_t* h = current.data() + layout.offset[l];
                if (c.layers[l].angle) {
                    const double angle = double(h[0]) * M_PI / double(c.n);
                    hidden[l] = {std::cos(angle), std::sin(angle)};
                } else {
                    hidden[l].assign(h, h + c.layers[l].width);
                }
            }
            visit(hidden);
        }
    }
    return result;
}

}  // namespace statetrack::proofs
