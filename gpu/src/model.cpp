#include "statetrack/gpu/model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "statetrack/automata/error.hpp"
#include "statetrack/gpu/random.hpp"
#include "json_unsigned.hpp"

namespace statetrack::gpu {

void parse_model_name(const std::string& text, ModelConfig& config) {
    config.factors = 1;
    if (text == "deltanet") config.mixer = Mixer::deltanet;
    else if (text == "mamba") config.mixer = Mixer::mamba;
    else if (text == "lstm") config.mixer = Mixer::lstm;
    else if (text.starts_with("deltaproduct:")) {
        const std::string n = text.substr(13);
        std::size_t value = 0;
        const auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), value);
        if (n.empty() || ec != std::errc() || ptr != n.data() + n.size() || value < 1 || value > max_factors)
            throw InputError("argument", "--model", fmt::format("'{}': N in deltaproduct:N must be 1..{}", text, max_factors));
        config.mixer = Mixer::deltaproduct;
        config.factors = value;
    } else {
        throw InputError("argument", "--model",
                         fmt::format("unknown model '{}' (deltanet, deltaproduct:N, mamba, lstm)", text));
    }
}

EigRange parse_eig_range(const std::string& text) {
    if (text == "0,1") return EigRange::unit;
    if (text == "-1,1") return EigRange::signed_unit;
    throw InputError("argument", "--eig", fmt::format("unknown eigenvalue range '{}' (0,1 or -1,1)", text));
}

const char* to_string(EigRange eig) { return eig == EigRange::unit ? "0,1" : "-1,1"; }

std::string model_name(const ModelConfig& config) {
    switch (config.mixer) {
        case Mixer::deltanet: return "deltanet";
        case Mixer::deltaproduct: return fmt::format("deltaproduct:{}", config.factors);
        case Mixer::mamba: return "mamba";
        case Mixer::lstm: return "lstm";
    }
    return "?";
}

void validate(const ModelConfig& c) {
    auto bad = [](const char* option, std::string message) { throw InputError("argument", option, std::move(message)); };
    if (c.layers < 1 || c.layers > max_layers) bad("--layers", fmt::format("{} layers: must be 1..{}", c.layers, max_layers));
    if (c.d_model < 1 || c.d_model > max_d_model) bad("--d-model", fmt::format("d_model {} must be 1..{}", c.d_model, max_d_model));
    if (c.heads < 1) bad("--heads", "at least one head");
    if (c.d_model % c.heads != 0)
        bad("--heads", fmt::format("d_model {} is not divisible by {} heads", c.d_model, c.heads));
    if (c.factors < 1 || c.factors > max_factors) bad("--model", fmt::format("{} factors: must be 1..{}", c.factors, max_factors));
    if (c.mixer != Mixer::deltaproduct && c.factors != 1) bad("--model", "only deltaproduct has several factors");
    if (c.vocab < 1) bad("--task", "the alphabet is empty");
    if (c.classes < 2) bad("--task", "the task has fewer than two classes (one state, or --target state on a one-state DFA)");
    if (c.conv_kernel < 1 || c.conv_kernel > 64) bad("conv_kernel", "the conv kernel must be 1..64 taps");
    if (c.mlp_width() > 4 * max_d_model) bad("--mlp", "MLP width beyond the limit");
}

nlohmann::json config_to_json(const ModelConfig& c) {
    return {{"model", model_name(c)}, {"eig", to_string(c.eig)}, {"layers", c.layers},
            {"d_model", c.d_model},   {"heads", c.heads},        {"vocab", c.vocab},
            {"classes", c.classes},   {"mlp_hidden", c.mlp_width()}, {"conv_kernel", c.conv_kernel}};
}

ModelConfig config_from_json(const nlohmann::json& json, const std::string& origin) {
    try {
        ModelConfig c;
        parse_model_name(json.at("model").get<std::string>(), c);
        c.eig = parse_eig_range(json.at("eig").get<std::string>());
        c.layers = json_unsigned(json.at("layers"));
        c.d_model = json_unsigned(json.at("d_model"));
        c.heads = json_unsigned(json.at("heads"));
        c.vocab = json_unsigned(json.at("vocab"));
        c.classes = json_unsigned(json.at("classes"));
        c.mlp_hidden = json_unsigned(json.at("mlp_hidden"));
        c.conv_kernel = json_unsigned(json.at("conv_kernel"));
        validate(c);
        return c;
    } catch (const nlohmann::json::exception& e) {
        throw InputError(origin, "/model", fmt::format("malformed model configuration: {}", e.what()));
    } catch (const InputError& e) {
        throw InputError(origin, "/model", e.message());
    }
}

namespace {
// The rows of [wq; wk; wv; gate]: q, F factors of k and v, and the gate (mamba's dt, or a beta per factor and head).
std::size_t projection_block_rows(const ModelConfig& c) {
    const std::size_t d = c.d_model, F = c.factors;
    return (1 + 2 * F) * d + (c.mixer == Mixer::mamba ? d : F * c.heads);
}
}  // namespace

std::size_t projection_rows(const ModelConfig& c) {
    const std::size_t m = projection_rows_multiple;
    return (projection_block_rows(c) + m - 1) / m * m;
}

ParameterLayout parameter_layout(const ModelConfig& c, GateSlot gate) {
    ParameterLayout layout;
    const std::size_t d = c.d_model, F = c.factors, H = c.heads, m = c.mlp_width(), K = c.conv_kernel;
    auto add = [&](std::string name, std::size_t rows, std::size_t cols, bool decay) {
        const std::size_t offset = layout.total;
        layout.tensors.push_back({std::move(name), offset, rows, cols, decay});
        layout.total += rows * cols;
        return offset;
    };
    layout.embed = add("embed", c.vocab, d, true);
    for (std::size_t l = 0; l < c.layers; ++l) {
        const std::string p = fmt::format("layers.{}.", l);
        LayerSlots s;
        s.norm1 = add(p + "norm1", 1, d, false);
        if (c.mixer == Mixer::lstm) {
            s.lstm_wx = add(p + "lstm_wx", 4 * d, d, true);
            s.lstm_wh = add(p + "lstm_wh", 4 * d, d, true);
            s.lstm_bias = add(p + "lstm_bias", 1, 4 * d, false);
        } else {
            s.wq = add(p + "wq", d, d, true);
            s.wk = add(p + "wk", F * d, d, true);
            s.wv = add(p + "wv", F * d, d, true);
            auto add_gate = [&] {
                if (c.mixer == Mixer::mamba) s.wdt = add(p + "wdt", d, d, true);
                else s.wbeta = add(p + "wbeta", F * H, d, true);
            };
            if (gate == GateSlot::after_values) {
                add_gate();
                // rows of no tensor after the gate, up to a multiple of projection_rows_multiple
                layout.total += (projection_rows(c) - projection_block_rows(c)) * d;
            }
            s.conv_q = add(p + "conv_q", d, K, false);
            s.conv_k = add(p + "conv_k", F * d, K, false);
            s.conv_v = add(p + "conv_v", F * d, K, false);
            if (gate == GateSlot::after_taps) add_gate();
            if (c.mixer == Mixer::mamba) {
                s.bdt = add(p + "bdt", 1, d, false);
                s.decay_log = add(p + "decay_log", 1, d, false);
            }
            s.onorm = add(p + "onorm", 1, d, false);
        }
        s.wo = add(p + "wo", d, d, true);
        s.norm2 = add(p + "norm2", 1, d, false);
        s.wgate = add(p + "wgate", m, d, true);
        s.wup = add(p + "wup", m, d, true);
        s.wdown = add(p + "wdown", d, m, true);
        layout.layers.push_back(s);
    }
    layout.norm_f = add("norm_f", 1, d, false);
    layout.head = add("head", c.classes, d, true);
    layout.head_bias = add("head_bias", 1, c.classes, false);
    return layout;
}

void reorder_parameters(const ParameterLayout& from, std::span<const float> src, const ParameterLayout& to,
                        std::span<float> dst) {
    if (from.tensors.size() != to.tensors.size() || src.size() != from.total || dst.size() != to.total)
        throw std::invalid_argument("reorder_parameters: the layouts or the buffers do not match");
    for (const TensorSlot& t : from.tensors) {
        const auto same = std::find_if(to.tensors.begin(), to.tensors.end(), [&](const TensorSlot& u) { return u.name == t.name; });
        if (same == to.tensors.end() || same->size() != t.size())
            throw std::invalid_argument("reorder_parameters: no tensor " + t.name + " of that size in the other layout");
        std::copy_n(src.begin() + std::ptrdiff_t(t.offset), t.size(), dst.begin() + std::ptrdiff_t(same->offset));
    }
}

std::size_t first_nonzero_padding(const ParameterLayout& layout, std::span<const float> buffer) {
    if (buffer.size() != layout.total) throw std::invalid_argument("first_nonzero_padding: the buffer does not match the layout");
    std::vector<const TensorSlot*> by_offset;
    for (const TensorSlot& t : layout.tensors) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](const TensorSlot* a, const TensorSlot* b) { return a->offset < b->offset; });
    std::size_t next = 0;  // the first entry past the tensors seen so far
    auto first_nonzero = [&](std::size_t from, std::size_t end) {
        for (std::size_t i = from; i < end; ++i)
            if (buffer[i] != 0.0f) return i;  // NaN too
        return layout.total;
    };
    for (const TensorSlot* t : by_offset) {
        if (const std::size_t i = first_nonzero(next, t->offset); i != layout.total) return i;
        next = std::max(next, t->offset + t->size());
    }
    return first_nonzero(next, layout.total);
}

nlohmann::json layout_to_json(const ParameterLayout& layout) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& t : layout.tensors)
        tensors.push_back({{"name", t.name}, {"offset", t.offset}, {"shape", {t.rows, t.cols}}, {"decay", t.decay}});
    return {{"total", layout.total}, {"tensors", tensors}};
}

template <class Scalar>
void init_parameters(const ModelConfig& c, const ParameterLayout& layout, std::uint64_t seed, std::span<Scalar> params) {
    Rng rng = make_rng(seed, 0x1417);
    const std::size_t dh = c.head_dim();
    for (const auto& t : layout.tensors) {
        Scalar* p = params.data() + t.offset;
        const auto ends_with = [&](const char* suffix) { return t.name.ends_with(suffix); };
        if (ends_with("norm1") || ends_with("norm2") || ends_with("onorm") || t.name == "norm_f") {
            for (std::size_t i = 0; i < t.size(); ++i) p[i] = Scalar(1);
        } else if (t.name == "embed") {
            for (std::size_t i = 0; i < t.size(); ++i) p[i] = Scalar(normal(rng));
        } else if (ends_with("bdt")) {
            // softplus^-1 of a step size log-uniform in [1e-3, 1e-1] (Mamba's initialisation)
            for (std::size_t i = 0; i < t.size(); ++i) {
                const double dt = std::exp(std::log(1e-3) + uniform01(rng) * (std::log(1e-1) - std::log(1e-3)));
                p[i] = Scalar(dt + std::log(-std::expm1(-dt)));
            }
        } else if (ends_with("decay_log")) {
            // A = exp(decay_log) in 1..dh per head, as Mamba's A = arange(1, N + 1)
            for (std::size_t i = 0; i < t.size(); ++i) p[i] = Scalar(std::log(double(1 + i % dh)));
        } else if (ends_with("lstm_bias")) {
            // gate order i, f, g, o; forget bias 1
            const std::size_t d = c.d_model;
            for (std::size_t i = 0; i < t.size(); ++i) p[i] = Scalar(i >= d && i < 2 * d ? 1 : 0);
        } else if (ends_with("head_bias")) {
            for (std::size_t i = 0; i < t.size(); ++i) p[i] = Scalar(0);
        } else {
            // linear weights and conv taps: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's default
            const double bound = 1.0 / std::sqrt(double(t.cols));
            for (std::size_t i = 0; i < t.size(); ++i) p[i] = Scalar((2 * uniform01(rng) - 1) * bound);
        }
    }
}

template void init_parameters<float>(const ModelConfig&, const ParameterLayout&, std::uint64_t, std::span<float>);
template void init_parameters<double>(const ModelConfig&, const ParameterLayout&, std::uint64_t, std::span<double>);

}  // namespace statetrack::gpu
