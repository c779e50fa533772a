#pragma once
// Dense views of transitions, for analysis only (evaluation never builds matrices), and the
// summary `statetrack compile` prints.
#include <Eigen/Core>

#include <complex>
#include <set>
#include <string>
#include <vector>

#include "statetrack/lrnn/network.hpp"

namespace statetrack::lrnn {

// A = D G_k ... G_1 in fp64 (from the numbers' fp64 values).
Eigen::MatrixXd transition_matrix(const Transition& transition, std::size_t dim);
std::vector<std::complex<double>> eigenvalues(const Eigen::MatrixXd& matrix);
double spectral_norm(const Eigen::MatrixXd& matrix);

struct LayerSummary {
    std::size_t dim = 0, inputs = 0, transitions = 0;
    std::size_t max_factors = 0;  // per input letter
    double mean_factors = 0;
};
struct NetworkSummary {
    std::vector<LayerSummary> layers;
    std::size_t total_dim = 0;
    std::set<std::string> betas;             // as text
    double min_eigenvalue = 1, max_eigenvalue = 1;  // over every factor (1 - beta, and 1) and diagonal entry
    bool has_diagonal = false, has_bias = false, exact = true;
};
NetworkSummary summarize(const Network& network);

}  // namespace statetrack::lrnn
