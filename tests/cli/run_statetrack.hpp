#pragma once
// Runs the built `statetrack` binary (STATETRACK_CLI) with shell-quoted arguments and collects its
// exit code, stdout and stderr through files in a scratch folder. The one helper of the CLI
// end-to-end tests (tests/cli/test_cli_*.cpp).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace statetrack::testing {

struct CliOutcome {
    int code = -1;
    std::string out, err;
};

inline std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// `text` in single quotes for the shell (built by appending: GCC 12 warns falsely on "'" + string).
inline std::string quoted(const std::string& text) {
    std::string q(1, '\'');
    q.append(text);
    q.push_back('\'');
    return q;
}

// `args` is pasted into a shell command line after the binary, `env` (e.g. "NAME=value") before
// it. stdout and stderr go to files named after the process and the call (ctest runs tests in
// parallel, possibly with one scratch folder), which are removed again.
inline CliOutcome run_statetrack(const std::string& args, const std::filesystem::path& scratch,
                                 const std::string& env = "") {
    static int calls = 0;
    const std::string stem = ".statetrack-" + std::to_string(::getpid()) + "-" + std::to_string(calls++);
    const auto out = scratch / (stem + ".stdout"), err = scratch / (stem + ".stderr");
    const std::string command =
        env + " " + quoted(STATETRACK_CLI) + " " + args + " >" + quoted(out.string()) + " 2>" + quoted(err.string());
    const int status = std::system(command.c_str());
    CliOutcome o{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(out), read_text(err)};
    std::filesystem::remove(out);
    std::filesystem::remove(err);
    return o;
}

}  // namespace statetrack::testing
