// Exporting trained transitions as statetrack.lrnn/1: the read-back factors have the trainer's
// learned eigenvalues for the word, a wrong factor is caught, and the lstm and bad words are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <vector>

#include <Eigen/Dense>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/zoo.hpp"
#include "statetrack/gpu/cpu_backend.hpp"
#include "statetrack/gpu/export.hpp"
#include "statetrack/lrnn/analysis.hpp"
#include "statetrack/lrnn/format.hpp"

namespace statetrack::gpu {
namespace {

using Spectrum = std::vector<std::complex<double>>;

// Initialised (untrained) weights: the export path does not care how the weights were reached.
Checkpoint tiny_checkpoint(const std::string& model, const std::string& eig) {
    Checkpoint c;
    c.task = Task{automata::zoo("parity"), "zoo:parity", LabelMode::final_position, Target::accept};
    parse_model_name(model, c.options.model);
    c.options.model.eig = parse_eig_range(eig);
    c.options.model.layers = 2, c.options.model.d_model = 8, c.options.model.heads = 2;
    c.options.model.vocab = vocab_size(c.task), c.options.model.classes = num_classes(c.task);
    const ParameterLayout layout = parameter_layout(c.options.model);
    c.params.resize(layout.total);
    init_parameters<double>(c.options.model, layout, 5, c.params);
    return c;
}

// The trainer's non-trivial eigenvalues per (lrnn layer, position). transition_eigenvalues emits in
// the order layer, position, head: a new position starts when the head index falls back.
std::vector<std::vector<Spectrum>> trainer_spectra(const Checkpoint& c, const std::vector<automata::Letter>& word) {
    const ModelConfig& m = c.options.model;
    const std::size_t T = word.size();
    Batch batch{1, T, std::vector<std::int32_t>(word.begin(), word.end()), {std::int32_t(T)}, std::vector<std::int32_t>(T, -1)};
    std::vector<std::vector<Spectrum>> out(m.layers * m.heads, std::vector<Spectrum>(T));
    std::size_t layer = 0, head = 0, t = 0;
    Workspace<double> ws;
    transition_eigenvalues<double>(m, parameter_layout(m), c.params, batch, ws, [&](std::size_t l, std::size_t h, std::complex<double> e) {
        if (l != layer) layer = l, t = 0;
        else if (h < head) ++t;
        head = h;
        out.at(export_layer_index(c, l, h)).at(t).push_back(e);
    });
    return out;
}

bool near_any(std::complex<double> x, const Spectrum& s, double tol) {
    for (auto y : s)
        if (std::abs(x - y) <= tol) return true;
    return false;
}

// Every trainer eigenvalue is one of the exported A_t's, and every exported eigenvalue is either a
// trainer eigenvalue or 1 (the identity on the complement of span(k)).
bool spectra_match(const lrnn::Network& net, const std::vector<std::vector<Spectrum>>& trainer, double tol) {
    for (std::size_t i = 0; i < net.layers.size(); ++i)
        for (std::size_t t = 0; t < trainer[i].size(); ++t) {
            const lrnn::Layer& layer = net.layers[i];
            const Spectrum exported = lrnn::eigenvalues(lrnn::transition_matrix(layer.transitions[layer.input_transition[t]], layer.dim));
            for (auto e : trainer[i][t])
                if (!near_any(e, exported, tol)) return false;
            Spectrum allowed = trainer[i][t];
            allowed.push_back(1.0);
            for (auto x : exported)
                if (!near_any(x, allowed, tol)) return false;
        }
    return true;
}

void check_round_trip(const std::string& model, const std::string& eig, double tol) {
    const Checkpoint c = tiny_checkpoint(model, eig);
    const std::vector<automata::Letter> word{0, 1, 1, 0, 1};
    const lrnn::Network exported = export_transitions(c, word, "tiny.bin");
    const lrnn::Network net = lrnn::read_network_json(lrnn::write_network_json(exported), "tiny.json");
    ASSERT_EQ(net.layers.size(), 4u);
    ASSERT_EQ(net.alphabet, (std::vector<std::string>{"t1", "t2", "t3", "t4", "t5"}));
    EXPECT_EQ(net.layers[0].dim, 16u);
    const auto trainer = trainer_spectra(c, word);
    EXPECT_TRUE(spectra_match(net, trainer, tol)) << model << " " << eig;

    // The comparison finds a wrong transition: swap two positions' transitions in one layer.
    lrnn::Network wrong = net;
    std::swap(wrong.layers[3].input_transition[0], wrong.layers[3].input_transition[2]);
    EXPECT_FALSE(spectra_match(wrong, trainer, tol)) << model << " " << eig;
}

TEST(Export, DeltaProductFactorsHaveTheTrainersEigenvalues) {
    check_round_trip("deltaproduct:2", "-1,1", 1e-6);
    check_round_trip("deltaproduct:3", "0,1", 1e-6);
}

TEST(Export, MambaDiagonalsHaveTheTrainersEigenvalues) {
    check_round_trip("mamba", "-1,1", 1e-6);
    check_round_trip("mamba", "0,1", 1e-6);
}

TEST(Export, DeltaNetFactorsHaveTheTrainersEigenvalues) {
    check_round_trip("deltanet", "-1,1", 1e-6);
    check_round_trip("deltanet", "0,1", 1e-6);
}

// B_t must be the write terms composed with the factors after them, flattened row-major:
// B = sum_j (G_F ... G_{j+1}) beta_j k_j v_j^T (delta rule), k v^T (mamba); computed here as
// whole matrices, independently of the exporter's running update.
Eigen::MatrixXd expected_bias(const RecurrenceStep& step, std::size_t dh) {
    const auto n = Eigen::Index(dh);
    auto vec = [&](const std::vector<double>& x) { return Eigen::Map<const Eigen::VectorXd>(x.data(), n); };
    if (!step.decay.empty()) return vec(step.keys[0]) * vec(step.values[0]).transpose();
    Eigen::MatrixXd B = Eigen::MatrixXd::Zero(n, n);
    for (std::size_t j = 0; j < step.keys.size(); ++j) {
        Eigen::MatrixXd after = Eigen::MatrixXd::Identity(n, n);
        for (std::size_t i = j + 1; i < step.keys.size(); ++i)
            after = (Eigen::MatrixXd::Identity(n, n) - step.betas[i] * vec(step.keys[i]) * vec(step.keys[i]).transpose()) * after;
        B += after * (step.betas[j] * vec(step.keys[j]) * vec(step.values[j]).transpose());
    }
    return B;
}

TEST(Export, BiasIsTheFlattenedWriteTerm) {
    for (const char* model : {"deltanet", "deltaproduct:3", "mamba"}) {
        const Checkpoint c = tiny_checkpoint(model, "-1,1");
        const std::vector<automata::Letter> word{1, 0, 0, 1};
        const lrnn::Network net = lrnn::read_network_json(lrnn::write_network_json(export_transitions(c, word, "c.bin")), "c.json");
        const ModelConfig& m = c.options.model;
        const std::size_t dh = m.head_dim();
        Batch batch{1, 4, {1, 0, 0, 1}, {4}, std::vector<std::int32_t>(4, -1)};
        Workspace<double> ws;
        std::size_t steps = 0;
        double worst = 0;
        recurrence_steps<double>(m, parameter_layout(m), c.params, batch, ws, [&](const RecurrenceStep& step) {
            const lrnn::Layer& layer = net.layers[export_layer_index(c, step.layer, step.head)];
            const lrnn::Transition& tr = layer.transitions[layer.input_transition[step.position]];
            const Eigen::MatrixXd B = expected_bias(step, dh);
            ASSERT_EQ(tr.bias.size(), dh * dh);
            for (std::size_t r = 0; r < dh; ++r)
                for (std::size_t col = 0; col < dh; ++col)
                    worst = std::max(worst, std::abs(tr.bias[r * dh + col].approx - B(Eigen::Index(r), Eigen::Index(col))));
            ++steps;
        });
        EXPECT_EQ(steps, m.layers * m.heads * word.size());
        EXPECT_LT(worst, 1e-12) << model;
    }
}

TEST(Export, RefusesTheLstmAndBadWords) {
    EXPECT_THROW(export_transitions(tiny_checkpoint("lstm", "-1,1"), {0, 1}, "lstm.bin"), InputError);
    const Checkpoint c = tiny_checkpoint("deltanet", "-1,1");
    EXPECT_THROW(export_transitions(c, {}, "c.bin"), InputError);
    EXPECT_THROW(export_transitions(c, {0, 2}, "c.bin"), InputError);
    EXPECT_THROW(export_transitions(c, std::vector<automata::Letter>(max_export_positions + 1, 0), "c.bin"), InputError);
    EXPECT_NO_THROW(export_transitions(c, std::vector<automata::Letter>(max_export_positions, 1), "c.bin"));
    // The memory bounds, by their formulas (docs/training.md): mamba with head_dim 16 writes
    // 2 layers x 2 x 256 = 1024 numbers per letter; deltaproduct:3 with head_dim 64 holds
    // 2 layers x (3 x 64 + 2) x 4096 = 1589248 per letter.
    auto refusal = [](const Checkpoint& ck, std::size_t letters) -> std::string {
        try {
            export_transitions(ck, std::vector<automata::Letter>(letters, 1), "big.bin");
        } catch (const InputError& e) {
            return e.what();
        }
        return "";
    };
    auto resized = [](const char* model, std::size_t d_model) {
        Checkpoint ck = tiny_checkpoint(model, "-1,1");
        ck.options.model.d_model = d_model, ck.options.model.heads = 1;
        const ParameterLayout layout = parameter_layout(ck.options.model);
        ck.params.resize(layout.total);
        init_parameters<double>(ck.options.model, layout, 5, ck.params);
        return ck;
    };
    EXPECT_NE(refusal(resized("mamba", 16), 1025).find("write 1049600 numbers"), std::string::npos);
    EXPECT_NE(refusal(resized("deltaproduct:3", 64), 11).find("hold 17481728"), std::string::npos);
}

}  // namespace
}  // namespace statetrack::gpu
