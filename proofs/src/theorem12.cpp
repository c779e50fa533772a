// Theorems 1 and 2: random dense LRNNs with restricted spectra on a constant input, in every
// arithmetic; freeze lengths; the counterparts certified through verify().
#include <fmt/format.h>

#include <chrono>
#include <random>
#include <sstream>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/analysis.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/scalars.hpp"
#include "statetrack/proofs/theorems.hpp"

namespace statetrack::proofs {

namespace {

double uniform(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * double(rng() >> 11) * 0x1p-53; }

Eigen::VectorXd random_vector(std::mt19937_64& rng, Eigen::Index n, double lo, double hi) {
    Eigen::VectorXd v(n);
    for (Eigen::Index i = 0; i < n; ++i) v[i] = uniform(rng, lo, hi);
    return v;
}

// A transition of one family. Theorem 1: diagonal in [0,1], gh1 / gh2 (GH products, beta in
// [0,1]). Theorem 2: diagonal and upper triangular with diagonal in [-1,1].
Eigen::MatrixXd random_transition(std::mt19937_64& rng, const std::string& family, Eigen::Index n) {
    if (family == "diagonal+") return random_vector(rng, n, 0, 1).asDiagonal();
    if (family == "diagonal") return random_vector(rng, n, -1, 1).asDiagonal();
    if (family == "triangular") {
        Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, n);
        for (Eigen::Index i = 0; i < n; ++i) {
            a(i, i) = uniform(rng, -1, 1);
            for (Eigen::Index j = i + 1; j < n; ++j) a(i, j) = uniform(rng, -0.5, 0.5);
        }
        return a;
    }
    const int k = family == "gh1" ? 1 : 2;
    Eigen::MatrixXd a = Eigen::MatrixXd::Identity(n, n);
    std::normal_distribution<double> normal;
    for (int f = 0; f < k; ++f) {
        Eigen::VectorXd v(n);
        for (Eigen::Index i = 0; i < n; ++i) v[i] = normal(rng);
        v.normalize();
        a = a * (Eigen::MatrixXd::Identity(n, n) - uniform(rng, 0, 1) * v * v.transpose());
    }
    return a;
}

DenseLrnn random_model(std::mt19937_64& rng, const std::string& family, std::size_t layers, Eigen::Index n) {
    DenseLrnn m;
    for (std::size_t l = 0; l < layers; ++l) {
        DenseLayer layer;
        layer.h0 = random_vector(rng, n, -1, 1);
        for (int x = 0; x < (l == 0 ? 1 : 2); ++x) {
            layer.A.push_back(random_transition(rng, family, n));
            layer.B.push_back(random_vector(rng, n, -1, 1));
        }
        layer.readout = random_vector(rng, n, -1, 1);
        m.layers.push_back(std::move(layer));
    }
    return m;
}

bool spectra_nonnegative(const std::vector<std::vector<std::complex<double>>>& spectra) {
    for (const auto& s : spectra)
        for (const auto& l : s)
            if (std::abs(l.imag()) > 1e-9 || l.real() < -1e-12) return false;
    return true;
}

std::vector<Arithmetic> arithmetics() {
    return {parse_arithmetic("fp16"), parse_arithmetic("bf16"), parse_arithmetic("fp32"), parse_arithmetic("fp64"),
            parse_arithmetic("bits:12"), parse_arithmetic("grid:8:4"), parse_arithmetic("grid:4:2")};
}

std::string describe(const DenseLrnn& m) {
    std::string s;
    for (std::size_t l = 0; l < m.layers.size(); ++l)
        for (std::size_t x = 0; x < m.layers[l].A.size(); ++x) {
            const Eigen::IOFormat f(17, Eigen::DontAlignCols, ", ", "; ", "", "", "[", "]");
            std::ostringstream o;
            o << m.layers[l].A[x].format(f);
            s += fmt::format(" layer {} input {}: A = {};", l, x, o.str());
        }
    return s;
}

struct Sweep {
    std::size_t trials = 0, decided = 0, out_of_scope = 0, state_period_one = 0, violations = 0;
    std::size_t max_pre_period = 0, max_period = 0;
    std::vector<std::string> counterexamples;
};

template <class Test>
nlohmann::json sweep(std::mt19937_64& rng, const std::vector<std::string>& families, bool nonnegative_only, std::size_t per_cell,
                     std::size_t max_steps, Test test, std::vector<std::string>& lines, bool& holds) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& a : arithmetics()) {
        for (const auto& family : families) {
            Sweep s;
            for (std::size_t t = 0; t < per_cell; ++t) {
                const std::size_t layers = 1 + t % 3;
                const DenseLrnn m = random_model(rng, family, layers, Eigen::Index(1 + (t / 3) % 3));
                ++s.trials;
                if (nonnegative_only && !spectra_nonnegative(cast_spectra(m, a))) {
                    ++s.out_of_scope;
                    continue;
                }
                const Periodicity p = find_period(m, a, max_steps);
                if (!p.found) continue;
                ++s.decided;
                s.state_period_one += p.period == 1;
                s.max_pre_period = std::max(s.max_pre_period, p.pre_period);
                s.max_period = std::max(s.max_period, p.period);
                if (!test(p)) {
                    ++s.violations;
                    if (s.counterexamples.size() < 3)
                        s.counterexamples.push_back(fmt::format("{} {}: pre-period {}, period {}, layer periods [{}];{}", a.name(), family,
                                                                p.pre_period, p.period, fmt::join(p.layer_periods, ", "), describe(m)));
                }
            }
            holds = holds && s.violations == 0;
            lines.push_back(fmt::format("  {:>9} {:>10}: {} models, {} decided, {} out of scope, state period 1 in {}, max pre-period {}, max period {}, violations {}",
                                        a.name(), family, s.trials, s.decided, s.out_of_scope, s.state_period_one, s.max_pre_period,
                                        s.max_period, s.violations));
            for (const auto& c : s.counterexamples) lines.push_back("    COUNTEREXAMPLE: " + c);
            out.push_back({{"arithmetic", a.name()}, {"family", family}, {"models", s.trials}, {"decided", s.decided},
                           {"out_of_scope", s.out_of_scope}, {"state_period_one", s.state_period_one}, {"max_pre_period", s.max_pre_period},
                           {"max_period", s.max_period}, {"violations", s.violations}, {"counterexamples", s.counterexamples}});
        }
    }
    return out;
}

nlohmann::json certify(const std::string& spec, lrnn::Construction c, std::vector<std::string>& lines, bool& holds) {
    const automata::Dfa dfa = automata::zoo(spec);
    lrnn::CompileOptions o;
    o.construction = c;
    const lrnn::Network net = lrnn::compile_dfa(dfa, o);
    VerifyOptions vo;
    vo.precision_max_pairs = 20'000;
    vo.repeated_max_steps = 1 << 14;
    vo.random_words = 4;
    vo.random_max_length = 1024;
    const VerifyResult r = verify(net, dfa, vo);
    const bool ok = r.passed() && r.exact.certified;
    holds = holds && ok;
    lines.push_back(fmt::format("  {} ({}): {}", spec, lrnn::to_string(c), r.exact.proves));
    for (const auto& p : r.precisions)
        lines.push_back(fmt::format("    {}: {}", p.name,
                                    p.all_lengths ? std::string("correct for every length")
                                    : p.first_failure ? fmt::format("first failure at length {}", p.first_failure->size())
                                                      : fmt::format("no failure found up to length {} (and on a^k, random words)", p.exhaustive_length)));
    nlohmann::json j = to_json(r, dfa);
    j["dfa"] = spec;
    j["construction"] = lrnn::to_string(c);
    return j;
}

}  // namespace

bool outputs_alternate(const Periodicity& p) {
    if (!p.found || p.period % 2 != 0) return false;
    for (std::size_t i = 0; i < p.cycle_outputs.size(); ++i)
        if (p.cycle_outputs[i] == p.cycle_outputs[(i + 1) % p.cycle_outputs.size()]) return false;
    return true;
}

bool periods_divide_powers_of_two(const Periodicity& p) {
    for (std::size_t i = 0; i < p.layer_periods.size(); ++i) {
        const std::size_t bound = std::size_t(1) << (i + 1);
        if (p.layer_periods[i] == 0 || bound % p.layer_periods[i] != 0) return false;
    }
    return true;
}

TheoremReport prove_theorem1(const ProveOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    TheoremReport r;
    r.name = "theorem1";
    r.statement = "non-negative spectra => on 1^k the state is eventually constant, so no finite-precision LRNN of them solves parity";
    bool holds = true;
    std::mt19937_64 rng(options.seed);
    r.lines.push_back("Random LRNNs (1-3 layers, dims 1-3) on 1^k; exact pre-period and period of the whole state by Brent's cycle "
                      "detection on its bit pattern; a violation is a model whose outputs on the cycle alternate:");
    const nlohmann::json sweeps = sweep(rng, {"diagonal+", "gh1", "gh2"}, true, options.quick ? 6 : 60, 1 << 18,
                                        [](const Periodicity& p) { return !outputs_alternate(p); }, r.lines, holds);
    // Freeze lengths of h <- a h + 1.
    r.lines.push_back("Freeze lengths of h <- a h + 1 from h = 0 (steps until h stops changing):");
    nlohmann::json freezes = nlohmann::json::array();
    bool freeze_ok = true;
    for (const char* name : {"fp16", "bf16", "fp32", "fp64", "bits:12", "grid:8:4"}) {
        const Arithmetic a = parse_arithmetic(name);
        std::vector<std::string> cells;
        for (double coef : {1.0, 0.99, 0.5, -1.0}) {
            const Freeze f = freeze_length(coef, a, std::size_t(1) << 26);
            cells.push_back(f.length ? fmt::format("a={}: {}{}", coef, *f.length, f.analytic ? " (analytic)" : "")
                                     : fmt::format("a={}: period {}", coef, f.period));
            freezes.push_back({{"arithmetic", name}, {"a", coef}, {"freeze_length", f.length ? nlohmann::json(*f.length) : nlohmann::json(nullptr)},
                               {"period", f.period}, {"analytic", f.analytic}});
            if (coef == 1.0 && a.kind != Arithmetic::Kind::grid && f.length != std::size_t(1) << a.bits) freeze_ok = false;
            if (coef == -1.0 && f.period != 2) freeze_ok = false;
        }
        r.lines.push_back(fmt::format("  {:>9}: {}", name, fmt::join(cells, ", ")));
    }
    holds = holds && freeze_ok;
    r.lines.push_back("Counterpart: the [-1, 1] parity construction (H_0 = -1, A(1) = -1, A(0) = 1):");
    const nlohmann::json parity = certify("parity", lrnn::Construction::parity, r.lines, holds);
    r.holds = holds;
    r.details = {{"sweeps", sweeps}, {"freeze_lengths", freezes}, {"freeze_lengths_as_predicted", freeze_ok}, {"counterpart", parity}};
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

TheoremReport prove_theorem2(const ProveOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    TheoremReport r;
    r.name = "theorem2";
    r.statement = "real triangular / diagonal transitions (negative eigenvalues allowed): layer i's period divides 2^i, so no L-layer model counts mod 3";
    bool holds = true;
    std::mt19937_64 rng(options.seed + 1);
    r.lines.push_back("Random LRNNs with real diagonal or upper-triangular transitions (diagonal in [-1, 1]), 1-3 layers, on 1^k; "
                      "a violation is a layer i whose state period does not divide 2^i:");
    const nlohmann::json sweeps = sweep(rng, {"diagonal", "triangular"}, false, options.quick ? 6 : 60, 1 << 18, periods_divide_powers_of_two,
                                        r.lines, holds);
    r.lines.push_back("Counterparts (complex eigenvalues / permutations) count mod 3:");
    nlohmann::json counterparts = nlohmann::json::array();
    counterparts.push_back(certify("mod:3", lrnn::Construction::rotation, r.lines, holds));
    counterparts.push_back(certify("mod:3", lrnn::Construction::onehot, r.lines, holds));
    r.holds = holds;
    r.details = {{"sweeps", sweeps}, {"counterparts", counterparts}};
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

ParityDecision decide_parity(const lrnn::Network& net, const lrnn::Precision& precision, std::size_t max_steps) {
    ParityDecision d;
    automata::Letter one = 0;
    bool found = false;
    for (automata::Letter a = 0; a < net.alphabet.size(); ++a)
        if (net.alphabet[a] == "1") one = a, found = true;
    if (!found) throw InputError(net.name.empty() ? "<model>" : net.name, "/alphabet", "theorem1 --model needs the letter \"1\" in the model's alphabet");
    d.nonnegative_spectra = true;
    for (const auto& layer : net.layers)
        for (const auto& t : layer.transitions)
            for (const auto& l : lrnn::eigenvalues(lrnn::transition_matrix(t, layer.dim)))
                if (std::abs(l.imag()) > 1e-12 || l.real() < -1e-12) d.nonnegative_spectra = false;
    // The network on 1^k against a one-state "DFA" that accepts nothing is not what we want; run the
    // network alone: cycle detection on its state, outputs recorded.
    auto run = [&](auto tag) {
        using T = decltype(tag);
        const lrnn::PreparedNetwork<T> prepared = lrnn::prepare<T>(net);
        auto same = [](const lrnn::NetworkState<T>& a, const lrnn::NetworkState<T>& b) {
            if (a.outputs != b.outputs) return false;
            for (std::size_t i = 0; i < a.hidden.size(); ++i)
                for (std::size_t k = 0; k < a.hidden[i].size(); ++k)
                    if (lrnn::to_text(a.hidden[i][k]) != lrnn::to_text(b.hidden[i][k])) return false;
            return true;
        };
        const auto start = lrnn::initial_state(prepared);
        auto tortoise = start, hare = start;
        lrnn::step(prepared, hare, one);
        std::size_t power = 1, lambda = 1, steps = 1;
        while (!same(tortoise, hare)) {
            if (steps >= max_steps) return;
            if (power == lambda) tortoise = hare, power *= 2, lambda = 0;
            lrnn::step(prepared, hare, one);
            ++lambda, ++steps;
        }
        auto x = start, y = start;
        for (std::size_t i = 0; i < lambda; ++i) lrnn::step(prepared, y, one);
        std::size_t mu = 0;
        while (!same(x, y)) lrnn::step(prepared, x, one), lrnn::step(prepared, y, one), ++mu;
        d.cycle_found = true;
        d.pre_period = mu;
        d.period = lambda;
        // Outputs at k = mu+1 .. mu+lambda (k >= 1) decide the whole tail.
        std::vector<bool> acc;
        auto z = x;
        for (std::size_t k = 0; k < std::max<std::size_t>(lambda, 2) + 1; ++k) acc.push_back(net.accept[lrnn::step(prepared, z, one)]);
        bool alternates = lambda % 2 == 0;
        for (std::size_t k = 0; k + 1 < acc.size(); ++k) alternates = alternates && acc[k] != acc[k + 1];
        d.can_follow_parity = alternates;
        if (!alternates)
            for (std::size_t k = 0; k + 1 < acc.size(); ++k)
                if (acc[k] == acc[k + 1]) {
                    d.same_output = std::make_pair(mu + 1 + k, mu + 2 + k);
                    break;
                }
    };
    using K = lrnn::Precision::Kind;
    switch (precision.kind) {
        case K::fp16: run(lrnn::Half{}); break;
        case K::bf16: run(lrnn::BFloat16{}); break;
        case K::fp32: run(float{}); break;
        case K::fp64: run(double{}); break;
        case K::exact: run(lrnn::Rational{}); break;
        case K::bits:
        case K::mpfr: {
            lrnn::ScopedPrecision scope(precision.bits);
            run(lrnn::MpfrFloat{});
            break;
        }
        default: throw InputError("--precision", precision.name(), "theorem1 --model takes fp16, bf16, fp32, fp64, bits:P, mpfr:P or exact");
    }
    return d;
}

TheoremReport prove_theorem1_model(const lrnn::Network& net, const lrnn::Precision& precision) {
    TheoremReport r;
    r.name = "theorem1";
    r.statement = "this model: non-negative spectra => its output on 1^k is eventually constant (it cannot solve parity)";
    const ParityDecision d = decide_parity(net, precision);
    r.lines.push_back(fmt::format("spectra of every transition non-negative real: {}", d.nonnegative_spectra ? "yes" : "no"));
    if (!d.cycle_found) {
        r.lines.push_back(fmt::format("no cycle of the state on 1^k within {} steps in {}: undecided", 1 << 20, precision.name()));
        r.holds = true;
    } else {
        r.lines.push_back(fmt::format("on 1^k in {}: pre-period {}, period {}", precision.name(), d.pre_period, d.period));
        if (d.same_output)
            r.lines.push_back(fmt::format("cannot solve parity: 1^{} and 1^{} have different parity and the same output", d.same_output->first,
                                          d.same_output->second));
        else r.lines.push_back("the output alternates on the cycle: it can follow parity on 1^k");
        // A counterexample to the theorem: non-negative spectra and an output that follows parity.
        r.holds = !(d.nonnegative_spectra && d.can_follow_parity);
    }
    r.details = {{"nonnegative_spectra", d.nonnegative_spectra}, {"precision", precision.name()}, {"cycle_found", d.cycle_found},
                 {"pre_period", d.pre_period}, {"period", d.period}, {"can_follow_parity", d.can_follow_parity},
                 {"same_output_lengths", d.same_output ? nlohmann::json{d.same_output->first, d.same_output->second} : nlohmann::json(nullptr)}};
    return r;
}

}  // namespace statetrack::proofs
