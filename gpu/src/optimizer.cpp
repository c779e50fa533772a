#include "statetrack/gpu/optimizer.hpp"

#include <cmath>
#include <numbers>

namespace statetrack::gpu {

double learning_rate(const AdamWOptions& o, std::size_t step, std::size_t total) {
    const auto warmup = std::size_t(std::ceil(o.warmup_fraction * double(total)));
    if (step < warmup) return o.lr * double(step + 1) / double(warmup);
    // the last step (total - 1) gets min_lr exactly
    const double span = double(std::max<std::size_t>(1, total - warmup - 1));
    const double progress = std::min(1.0, double(step - warmup) / span);
    return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

template <class Scalar>
double gradient_norm(std::span<const Scalar> grads) {
    double ss = 0;
    for (Scalar g : grads) ss += double(g) * double(g);
    return std::sqrt(ss);
}

template <class Scalar>
void adamw_step(const AdamWOptions& o, const ParameterLayout& layout, std::size_t step, double lr, double norm,
                std::span<Scalar> params, std::span<Scalar> grads, std::span<Scalar> m, std::span<Scalar> v) {
    const Scalar scale = o.clip > 0 && norm > o.clip ? Scalar(o.clip / norm) : Scalar(1);
    const Scalar b1 = Scalar(o.beta1), b2 = Scalar(o.beta2), eps = Scalar(o.eps), rate = Scalar(lr);
    const Scalar c1 = Scalar(1 - std::pow(o.beta1, double(step + 1)));
    const Scalar c2 = Scalar(1 - std::pow(o.beta2, double(step + 1)));
    for (const auto& t : layout.tensors) {
        const Scalar decay = t.decay ? Scalar(1 - lr * o.weight_decay) : Scalar(1);
        for (std::size_t i = t.offset; i < t.offset + t.size(); ++i) {
            const Scalar g = grads[i] * scale;
            grads[i] = g;
            m[i] = b1 * m[i] + (Scalar(1) - b1) * g;
            v[i] = b2 * v[i] + (Scalar(1) - b2) * g * g;
            params[i] = params[i] * decay - rate * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
        }
    }
}

template double gradient_norm<float>(std::span<const float>);
template double gradient_norm<double>(std::span<const double>);
template void adamw_step<float>(const AdamWOptions&, const ParameterLayout&, std::size_t, double, double,
                                std::span<float>, std::span<float>, std::span<float>, std::span<float>);
template void adamw_step<double>(const AdamWOptions&, const ParameterLayout&, std::size_t, double, double,
                                 std::span<double>, std::span<double>, std::span<double>, std::span<double>);

}  // namespace statetrack::gpu
