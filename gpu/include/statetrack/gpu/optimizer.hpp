#pragma once
// AdamW with a cosine schedule (linear warm-up over the first 10% of steps, then cosine down to
// min_lr) and optional clipping of the global gradient norm.
#include <span>
#include <vector>

#include "statetrack/gpu/model.hpp"

namespace statetrack::gpu {

struct AdamWOptions {
    double lr = 1e-3, min_lr = 1e-6, warmup_fraction = 0.1;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.1;
    double clip = 0;  // clip the global gradient norm to this value; 0 = off
};

// Learning rate of step `step` (0-based) of `total` steps.
double learning_rate(const AdamWOptions& options, std::size_t step, std::size_t total);

// Global L2 norm of the gradient.
template <class Scalar>
double gradient_norm(std::span<const Scalar> grads);

// One update of step `step` (0-based; bias correction uses step + 1). Clips `grads` in place when
// options.clip > 0 and `norm` exceeds it. Weight decay (decoupled) only on tensors with decay set.
template <class Scalar>
void adamw_step(const AdamWOptions& options, const ParameterLayout& layout, std::size_t step, double lr, double norm,
                std::span<Scalar> params, std::span<Scalar> grads, std::span<Scalar> m, std::span<Scalar> v);

}  // namespace statetrack::gpu
