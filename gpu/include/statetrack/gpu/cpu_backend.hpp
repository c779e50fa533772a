#pragma once
// The CPU reference backend: explicit forward and backward passes of the model in model.hpp, in
// fp32 or fp64 (explicitly instantiated in cpu_backend.cpp). The CUDA backend is tested against it.
//
// Activations: rows are positions n = b * T + t of a Batch (row-major [B][T]); every activation is
// a row-major [B*T][width] array inside Workspace::buffer, the one allocation of a training run
// (it grows only when a larger batch shape comes).
#include <complex>
#include <functional>
#include <span>
#include <vector>

#include "statetrack/gpu/model.hpp"
#include "statetrack/gpu/task.hpp"

namespace statetrack::gpu {

template <class Scalar>
struct Workspace {
    std::vector<Scalar> buffer;
};

// Forward pass only (no recurrent states kept for a backward pass); logits() reads the result.
template <class Scalar>
void forward(const ModelConfig& config, const ParameterLayout& layout, std::span<const Scalar> params,
             const Batch& batch, Workspace<Scalar>& ws);

// The logits of the last forward pass: row-major [B*T][classes].
template <class Scalar>
std::span<const Scalar> logits(const ModelConfig& config, const Batch& batch, const Workspace<Scalar>& ws);

// Mean cross-entropy over the labelled positions, and (when `grads` is not empty) its gradient
// with respect to every parameter, written (not accumulated) into `grads` (size layout.total).
template <class Scalar>
double loss_and_gradient(const ModelConfig& config, const ParameterLayout& layout, std::span<const Scalar> params,
                         const Batch& batch, Workspace<Scalar>& ws, std::span<Scalar> grads);

// Correct predictions (argmax of the logits) and labelled positions of the last forward pass, per row.
template <class Scalar>
void count_correct(const ModelConfig& config, const Batch& batch, const Workspace<Scalar>& ws,
                   std::vector<std::size_t>& correct, std::vector<std::size_t>& labelled);
// The same from logits [B*T][classes] computed anywhere (the CUDA backend's, say).
template <class Scalar>
void count_correct(std::span<const Scalar> logits, std::size_t classes, const Batch& batch,
                   std::vector<std::size_t>& correct, std::vector<std::size_t>& labelled);

// Runs the model on `batch` and calls emit(layer, head, eigenvalue) for the non-trivial eigenvalues
// of every transition A(x_t) at real positions: deltanet 1 - beta (A is the identity on k's
// complement); deltaproduct the eigenvalues of A restricted to span(k_1..k_N); mamba the diagonal.
// The LSTM has no linear transition and emits nothing.
template <class Scalar>
void transition_eigenvalues(const ModelConfig& config, const ParameterLayout& layout, std::span<const Scalar> params,
                            const Batch& batch, Workspace<Scalar>& ws,
                            const std::function<void(std::size_t, std::size_t, std::complex<double>)>& emit);

// The inputs of one linear recurrence step at a real position (for gpu/export.hpp). The head's
// state S (head_dim x head_dim, row r = key coordinate) is updated, for j = 1..F in order, as
// S <- (I - beta_j k_j k_j^T) S + beta_j k_j v_j^T (deltanet, deltaproduct; k as the recurrence uses
// it: L2-normalised with the epsilon, so |k| is slightly below 1), or S <- diag(a) S + k v^T (mamba;
// a the effective decay).
struct RecurrenceStep {
    std::size_t layer = 0, head = 0, row = 0, position = 0;
    std::vector<std::vector<double>> keys, values;  // F vectors of head_dim (mamba: one)
    std::vector<double> betas;                      // F (empty for mamba)
    std::vector<double> decay;                      // head_dim (mamba only)
};

// Runs the model on `batch` and calls emit for every layer, head, row and real position, in that
// order. The LSTM has no linear recurrence and emits nothing.
template <class Scalar>
void recurrence_steps(const ModelConfig& config, const ParameterLayout& layout, std::span<const Scalar> params,
                      const Batch& batch, Workspace<Scalar>& ws, const std::function<void(const RecurrenceStep&)>& emit);

}  // namespace statetrack::gpu
