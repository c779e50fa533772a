#include "statetrack/gpu/export.hpp"

#include <fmt/format.h>

#include "statetrack/automata/error.hpp"
#include "statetrack/gpu/cpu_backend.hpp"

namespace statetrack::gpu {

namespace {

// fp64 values are approximations (decimal strings that round-trip); exact zeros stay exact so the
// writer can store sparse vectors.
lrnn::Number number(double x) { return x == 0 ? lrnn::integer(0) : lrnn::Number{"", x, ""}; }

std::vector<lrnn::Number> numbers(const std::vector<double>& xs) {
    std::vector<lrnn::Number> out;
    out.reserve(xs.size());
    for (double x : xs) out.push_back(number(x));
    return out;
}

// A_t and B_t of one step on the flattened state S (row-major [r][c], r the key coordinate).
lrnn::Transition step_transition(const RecurrenceStep& step, std::size_t dh) {
    lrnn::Transition tr;
    std::vector<double> bias(dh * dh, 0.0);
    if (!step.decay.empty()) {  // mamba: S <- diag(a) S + k v^T
        std::vector<double> diagonal(dh * dh);
        for (std::size_t r = 0; r < dh; ++r)
            for (std::size_t c = 0; c < dh; ++c) {
                diagonal[r * dh + c] = step.decay[r];
                bias[r * dh + c] = step.keys[0][r] * step.values[0][c];
            }
        tr.diagonal = numbers(diagonal);
    } else {
        for (std::size_t j = 0; j < step.keys.size(); ++j) {
            const auto& k = step.keys[j];
            const double beta = step.betas[j];
            double kk = 0;
            for (double x : k) kk += x * x;
            // I - beta k k^T = I - (beta |k|^2 / k.k) k k^T: the GH factor (k, beta |k|^2); |k| < 1.
            if (kk > 0)
                for (std::size_t c = 0; c < dh; ++c) {
                    std::vector<lrnn::Number> v(dh * dh, lrnn::integer(0));
                    for (std::size_t r = 0; r < dh; ++r) v[r * dh + c] = number(k[r]);
                    tr.factors.push_back({lrnn::sparse_vector(v), number(beta * kk)});
                }
            // The write term, composed with the factors after it: B <- (I - beta k k^T) B + beta k v^T.
            for (std::size_t c = 0; c < dh; ++c) {
                double kb = 0;
                for (std::size_t r = 0; r < dh; ++r) kb += k[r] * bias[r * dh + c];
                for (std::size_t r = 0; r < dh; ++r) bias[r * dh + c] += beta * k[r] * (step.values[j][c] - kb);
            }
        }
    }
    tr.bias = numbers(bias);
    return tr;
}

}  // namespace

lrnn::Network export_transitions(const Checkpoint& checkpoint, const std::vector<automata::Letter>& word,
                                 const std::string& name) {
    const ModelConfig& config = checkpoint.options.model;
    if (config.mixer == Mixer::lstm)
        throw InputError(name, "--export-word", "the lstm has no linear state transition to export (deltanet, deltaproduct:N, mamba only)");
    if (word.empty()) throw InputError(name, "--export-word", "the word is empty");
    if (word.size() > max_export_positions)
        throw InputError(name, "--export-word", fmt::format("{} letters; at most {} can be exported", word.size(), max_export_positions));
    const std::size_t dh = config.head_dim(), T = word.size();
    if (dh * dh > max_export_dimension)
        throw InputError(name, "--export-word", fmt::format("head_dim^2 = {} exceeds the lrnn dimension limit {}", dh * dh, max_export_dimension));
    const std::size_t heads = config.layers * config.heads * T, F = config.factors;
    const std::size_t written = heads * (F + 1) * dh * dh, held = heads * (F * dh + 2) * dh * dh;
    if (written > max_export_numbers || held > max_export_held_numbers)
        throw InputError(name, "--export-word",
                         fmt::format("the export would write {} numbers (at most {}) and hold {} in memory (at most {}): "
                                     "use a shorter word (docs/training.md, Exporting learned transitions)",
                                     written, max_export_numbers, held, max_export_held_numbers));
    const std::size_t letters = vocab_size(checkpoint.task);
    Batch batch{1, T, {}, {std::int32_t(T)}, std::vector<std::int32_t>(T, -1)};
    for (std::size_t t = 0; t < T; ++t) {
        if (word[t] >= letters)
            throw InputError(name, fmt::format("--export-word/{}", t), fmt::format("letter {} is outside the task's alphabet of {}", word[t], letters));
        batch.tokens.push_back(std::int32_t(word[t]));
    }

    lrnn::Network net;
    net.name = fmt::format("{} on \"{}\"", name, automata::format_word(checkpoint.task.dfa, word));
    net.construction = "trained";
    for (std::size_t t = 0; t < T; ++t) net.alphabet.push_back(fmt::format("t{}", t + 1));
    net.layers.resize(config.layers * config.heads);
    for (lrnn::Layer& layer : net.layers) {
        layer.dim = dh * dh;
        layer.h0.assign(layer.dim, lrnn::integer(0));
        layer.num_inputs = T;
        layer.readout.labels.assign(layer.dim, 0);
        layer.readout.num_labels = layer.readout.num_outputs = 1;
        for (std::size_t t = 0; t < T; ++t) layer.input_transition.push_back(std::uint32_t(t));
    }
    net.states = {lrnn::no_dfa_state};
    net.accept = {false};

    const ParameterLayout layout = parameter_layout(config);
    Workspace<double> ws;
    recurrence_steps<double>(config, layout, checkpoint.params, batch, ws, [&](const RecurrenceStep& step) {
        net.layers[export_layer_index(checkpoint, step.layer, step.head)].transitions.push_back(step_transition(step, dh));
    });
    lrnn::validate(net, name);
    return net;
}

}  // namespace statetrack::gpu
