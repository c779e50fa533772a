#pragma once
// A test's scratch folder: one per test process, so processes that run side by side (ctest -j,
// the sanitizer stage's shards of one executable) never empty a folder another is writing.

#include <filesystem>
#include <string>

#include <unistd.h>

namespace statetrack::testing {

// <tmp>/statetrack_<name>_<pid>, removed with everything in it; created only when `create`.
inline std::filesystem::path fresh_scratch_dir(const std::string& name, bool create = false) {
    const auto dir = std::filesystem::temp_directory_path() / ("statetrack_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    if (create) std::filesystem::create_directories(dir);
    return dir;
}

}  // namespace statetrack::testing
