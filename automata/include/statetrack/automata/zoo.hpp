#pragma once
// The zoo: named benchmark languages, built in code (docs/zoo.md describes each).
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"

namespace statetrack::automata {

struct ZooEntry {
    std::string name;         // e.g. "mod"
    std::string usage;        // e.g. "mod:K"
    std::string example;      // e.g. "mod:3"
    std::string description;  // one line
};

const std::vector<ZooEntry>& zoo_entries();
// Builds `NAME[:ARGS]` (without the "zoo:" prefix). Throws InputError for an unknown name or bad
// arguments (origin "zoo:" + spec).
Dfa zoo(const std::string& spec);

}  // namespace statetrack::automata
