// statetrack: the command-line entry point. Each subcommand lives in cmd_<name>.cpp.
// Exit codes (DESIGN.md): 0 ok, 1 a check failed, 2 bad input or usage, 3 internal error.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "command.hpp"
#include "statetrack/automata/error.hpp"

namespace statetrack::cli {
void print_json(const nlohmann::json& value) { std::cout << value.dump(2) << std::endl; }
}  // namespace statetrack::cli

int main(int argc, char** argv) {
    using namespace statetrack;
    CLI::App app{"statetrack: linear RNNs and regular languages (compile, verify, prove, train)", "statetrack"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "statetrack 0.1.0");
    // The list of subcommands, in the order `--help` shows them.
    cli::add_info(app);
    cli::add_convert(app);
    cli::add_minimize(app);
    cli::add_zoo(app);
    cli::add_decompose(app);
    cli::add_compile(app);
    cli::add_run(app);
    cli::add_verify(app);
    cli::add_prove(app);
    cli::add_report(app);
    cli::add_train(app);
    cli::add_eval(app);
    cli::add_sweep(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::Success& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return 2;
    } catch (const cli::Exit& e) {
        return e.code;
    } catch (const InputError& e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 2;
    } catch (const CheckFailed& e) {
        fmt::print(stderr, "check failed: {}\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        fmt::print(stderr, "error: out of memory (the input is beyond what this machine can hold; see docs/limits.md)\n");
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "internal error: {}\n", e.what());
        return 3;
    }
    return 0;
}
