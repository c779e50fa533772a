#pragma once
// The statetrack.lrnn/1 file format (docs/lrnn-format.md, docs/statetrack.lrnn.schema.json).
#include <string>

#include "statetrack/lrnn/network.hpp"

namespace statetrack::lrnn {

inline constexpr const char* lrnn_format_id = "statetrack.lrnn/1";

// Deterministic JSON text (two-space indentation). Vectors with mostly zero entries are written
// sparse ({"indices": [...], "values": [...]}), irrational numbers as {"approx", "high"}.
std::string write_network_json(const Network& network);
// Parses and validates; throws InputError(origin, JSON pointer, ...) on any problem.
Network read_network_json(const std::string& text, const std::string& origin);
// read_text_file + read_network_json.
Network load_network(const std::string& path);

}  // namespace statetrack::lrnn
