// Compiles zoo:parity and zoo:symreg:3 through the library API, prints their GH factors, checks
// them for every length with the exact closure, and runs a word in fp32.
#include <fmt/format.h>

#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/check.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/evaluate.hpp"

int main() {
    using namespace statetrack;
    for (const char* name : {"parity", "symreg:3"}) {
        const automata::Dfa dfa = automata::zoo(name);
        const lrnn::Network net = lrnn::compile_dfa(dfa);
        fmt::print("zoo:{}: {} layer(s), construction {}\n", name, net.layers.size(), net.construction);
        const lrnn::Layer& layer = net.layers[0];
        for (std::size_t a = 0; a < dfa.num_letters(); ++a) {
            const lrnn::Transition& t = layer.transitions[layer.input_transition[a]];
            fmt::print("  letter {}: {} factor(s)\n", dfa.alphabet[a], t.factors.size());
            for (const auto& f : t.factors) {
                std::vector<std::string> v;
                for (const auto& x : lrnn::dense_vector(f.v)) v.push_back(lrnn::to_string(x));
                fmt::print("    I - {} v v^T / v.v, v = ({})\n", lrnn::to_string(f.beta), fmt::join(v, ", "));
            }
        }
        const lrnn::ClosureResult closure = lrnn::exact_closure(net, dfa);
        fmt::print("  exact closure: {}\n", closure.message);
        std::vector<automata::Letter> word;
        for (std::size_t t = 0; t < 10; ++t) word.push_back(automata::Letter((t * 7 + 3) % dfa.num_letters()));
        const lrnn::RunOutput out = lrnn::run_network(net, word, lrnn::parse_precision("fp32"));
        fmt::print("  fp32 on \"{}\": last prefix {} (DFA: {})\n", automata::format_word(dfa, word),
                   *out.accept.back() ? "accepted" : "rejected", automata::accepts(dfa, word) ? "accepted" : "rejected");
        if (!closure.certified || *out.accept.back() != automata::accepts(dfa, word)) return 1;
    }
    return 0;
}
