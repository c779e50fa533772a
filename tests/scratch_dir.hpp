#pragma once
// A test's scratch folder: one per test process, so processes that run side by side (ctest -j,
// the sanitizer stage's shards of one executable) never empty a folder another is writing.

#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace statetrack::testing {

namespace detail {
// The folders fresh_scratch_dir handed out, removed when the process ends: their names carry the
// pid, so one a test leaves behind is never reused, and /tmp would fill run after run.
struct ScratchFolders {
    std::mutex mutex;
    std::vector<std::filesystem::path> dirs;
    ~ScratchFolders() {
        std::error_code ignored;
        for (const auto& dir : dirs) std::filesystem::remove_all(dir, ignored);
    }
};
inline ScratchFolders& scratch_folders() {
    static ScratchFolders folders;
    return folders;
}
}  // namespace detail

// <tmp>/statetrack_<name>_<pid>, removed with everything in it now and again when the process ends;
// created only when `create`.
inline std::filesystem::path fresh_scratch_dir(const std::string& name, bool create = false) {
    const auto dir = std::filesystem::temp_directory_path() / ("statetrack_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    if (create) std::filesystem::create_directories(dir);
    detail::ScratchFolders& folders = detail::scratch_folders();
    const std::lock_guard lock(folders.mutex);
    folders.dirs.push_back(dir);
    return dir;
}

}  // namespace statetrack::testing
