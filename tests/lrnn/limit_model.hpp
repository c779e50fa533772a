#pragma once
// A one-layer model of dimension `dim` for the tests of the model-size limit (docs/limits.md), made
// from the compiled parity model: h0 = e_0, transition 0 for both letters with `factors` one-entry
// reflections, plus `biases` transitions whose bias is e_0. h0 and biases are held dense, so they
// count dim numbers each; a factor counts 1 (beta) plus its listed entries.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "statetrack/automata/zoo.hpp"
#include "statetrack/lrnn/compile.hpp"
#include "statetrack/lrnn/format.hpp"

namespace statetrack::testing {

inline nlohmann::json limit_model(std::size_t dim, std::size_t biases, std::size_t factors = 0) {
    using nlohmann::json;
    json j = json::parse(lrnn::write_network_json(lrnn::compile_dfa(automata::zoo("parity"))));
    json& layer = j["layers"][0];
    layer["dim"] = dim;
    const json e0 = {{"indices", {0}}, {"values", {"1"}}};
    layer["h0"] = e0;
    json t0 = {{"factors", json::array()}};
    for (std::size_t k = 0; k < factors; ++k) t0["factors"].push_back({{"v", e0}, {"beta", "2"}});
    json transitions = json::array({t0});
    for (std::size_t k = 0; k < biases; ++k) transitions.push_back({{"factors", json::array()}, {"bias", e0}});
    layer["transitions"] = transitions;
    layer["input_transition"] = {0, 0};
    layer["readout"] = {{"kind", "argmax"}, {"labels", std::vector<std::uint32_t>(dim, 0)}, {"num_labels", 1}, {"num_outputs", 1}};
    j["states"] = {0};
    j["accept"] = {true};
    return j;
}

}  // namespace statetrack::testing
