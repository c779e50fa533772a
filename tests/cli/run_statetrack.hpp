#pragma once
// Runs the built `statetrack` binary (STATETRACK_CLI) with shell-quoted arguments and collects its
// exit code, stdout and stderr through files in a scratch folder. For the CLI end-to-end tests.
#include <sys/wait.h>

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

// `args` is pasted into a shell command line after the binary; the output files are removed again.
inline CliOutcome run_statetrack(const std::string& args, const std::filesystem::path& scratch) {
    const auto out = scratch / ".stdout", err = scratch / ".stderr";
    const int status = std::system(("'" STATETRACK_CLI "' " + args + " >'" + out.string() + "' 2>'" + err.string() + "'").c_str());
    CliOutcome o{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(out), read_text(err)};
    std::filesystem::remove(out);
    std::filesystem::remove(err);
    return o;
}

}  // namespace statetrack::testing
