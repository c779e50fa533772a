#pragma once
// What every subcommand file shares: how it registers with the app, and how it ends.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>

namespace statetrack::cli {

// Thrown by a subcommand to end the program with this exit code after it printed its result
// (1: a check failed). Bad input is reported by throwing statetrack::InputError (exit code 2).
struct Exit {
    int code;
};

// Prints JSON to stdout, pretty, with a trailing newline.
void print_json(const nlohmann::json& value);

// One function per subcommand, defined in cmd_<name>.cpp, called from main.cpp.
void add_info(CLI::App& app);
void add_convert(CLI::App& app);
void add_minimize(CLI::App& app);
void add_zoo(CLI::App& app);
void add_decompose(CLI::App& app);
void add_compile(CLI::App& app);
void add_run(CLI::App& app);
void add_verify(CLI::App& app);
void add_prove(CLI::App& app);
void add_report(CLI::App& app);
void add_train(CLI::App& app);
void add_eval(CLI::App& app);
void add_sweep(CLI::App& app);

}  // namespace statetrack::cli
