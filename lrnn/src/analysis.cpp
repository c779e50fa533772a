#include "statetrack/lrnn/analysis.hpp"

#include <Eigen/Eigenvalues>
#include <Eigen/SVD>
#include <fmt/format.h>

#include <algorithm>

namespace statetrack::lrnn {

Eigen::MatrixXd transition_matrix(const Transition& t, std::size_t dim) {
    const auto n = Eigen::Index(dim);
    Eigen::MatrixXd a = Eigen::MatrixXd::Identity(n, n);
    for (const auto& f : t.factors) {
        Eigen::VectorXd v = Eigen::VectorXd::Zero(n);
        for (const auto& [i, x] : f.v.entries) v[Eigen::Index(i)] = x.approx;
        const Eigen::MatrixXd g = Eigen::MatrixXd::Identity(n, n) - (f.beta.approx / v.squaredNorm()) * v * v.transpose();
        a = g * a;
    }
    if (!t.diagonal.empty())
        for (Eigen::Index i = 0; i < n; ++i) a.row(i) *= t.diagonal[std::size_t(i)].approx;
    return a;
}

std::vector<std::complex<double>> eigenvalues(const Eigen::MatrixXd& m) {
    Eigen::EigenSolver<Eigen::MatrixXd> solver(m, false);
    std::vector<std::complex<double>> out;
    for (Eigen::Index i = 0; i < solver.eigenvalues().size(); ++i) out.push_back(solver.eigenvalues()[i]);
    return out;
}

double spectral_norm(const Eigen::MatrixXd& m) {
    if (m.size() == 0) return 0;
    Eigen::JacobiSVD<Eigen::MatrixXd> svd(m);
    return svd.singularValues()[0];
}

NetworkSummary summarize(const Network& net) {
    NetworkSummary s;
    s.total_dim = total_dimension(net);
    for (const auto& layer : net.layers) {
        LayerSummary ls;
        ls.dim = layer.dim;
        ls.inputs = layer.num_inputs;
        ls.transitions = layer.transitions.size();
        double sum = 0;
        for (auto t : layer.input_transition) {
            const std::size_t k = layer.transitions[t].factors.size();
            ls.max_factors = std::max(ls.max_factors, k);
            sum += double(k);
        }
        ls.mean_factors = layer.num_inputs ? sum / double(layer.num_inputs) : 0;
        s.layers.push_back(ls);
        for (const auto& t : layer.transitions) {
            for (const auto& f : t.factors) {
                s.betas.insert(to_string(f.beta));
                s.min_eigenvalue = std::min(s.min_eigenvalue, 1 - f.beta.approx);
                s.max_eigenvalue = std::max(s.max_eigenvalue, 1 - f.beta.approx);
                for (const auto& [i, x] : f.v.entries) s.exact = s.exact && x.is_exact();
            }
            for (const auto& d : t.diagonal) {
                s.has_diagonal = true;
                s.min_eigenvalue = std::min(s.min_eigenvalue, d.approx);
                s.max_eigenvalue = std::max(s.max_eigenvalue, d.approx);
            }
            s.has_bias = s.has_bias || !t.bias.empty();
        }
    }
    return s;
}

}  // namespace statetrack::lrnn
