#include "statetrack/automata/files.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "statetrack/automata/error.hpp"

namespace statetrack {

namespace {

namespace fs = std::filesystem;

// Set during static initialisation, before main: when this process started.
const fs::file_time_type process_start = fs::file_time_type::clock::now();

// A process killed during a write leaves its temporary ".NAME.tmpXXXXXXXX" behind (never under the
// final name). After a successful write of NAME, its temporaries last modified before this process
// started are such leftovers (a write in progress keeps touching its own): removed, best effort.
void remove_stale_temporaries(const fs::path& dir, const std::string& name) {
    const std::string prefix = "." + name + ".tmp";
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string file = it->path().filename().string();
        if (file.size() != prefix.size() + 8 || file.compare(0, prefix.size(), prefix) != 0 ||
            file.find_first_not_of("0123456789abcdef", prefix.size()) != std::string::npos)
            continue;
        std::error_code e;
        const fs::file_time_type written = fs::last_write_time(it->path(), e);
        if (!e && written < process_start && it->is_regular_file(e)) fs::remove(it->path(), e);
    }
}

}  // namespace

std::string read_text_file(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw InputError(path, "", "no such file");
    if (std::filesystem::is_directory(path, ec)) throw InputError(path, "", "is a directory, not a file");
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > max_input_file_bytes)
        throw LimitError(path, "", fmt::format("file of {} bytes exceeds the limit of {} bytes", size, max_input_file_bytes));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "", fmt::format("cannot open: {}", std::strerror(errno)));
    // Counted while reading too: a device or a pipe (/dev/zero behind a link named x.json) has no
    // size to check first, and would otherwise be read until memory runs out.
    std::string text;
    if (!ec) text.reserve(size);
    std::vector<char> chunk(std::size_t(1) << 16);
    while (in.read(chunk.data(), std::streamsize(chunk.size())) || in.gcount() > 0) {
        text.append(chunk.data(), std::size_t(in.gcount()));
        if (text.size() > max_input_file_bytes)
            throw LimitError(path, "", fmt::format("input of more than {} bytes (not a regular file?) exceeds the limit of {} bytes",
                                                   max_input_file_bytes, max_input_file_bytes));
    }
    if (in.bad()) throw InputError(path, "", "read error");
    return text;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw InputError(path, "", "the output folder does not exist");
    std::random_device rd;
    const fs::path tmp = dir / fmt::format(".{}.tmp{:08x}", target.filename().string(), rd());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) throw InputError(path, "", fmt::format("cannot write: {}", std::strerror(errno)));
    std::size_t done = 0;
    while (done < contents.size()) {
        const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            throw InputError(path, "", fmt::format("write failed: {}", std::strerror(err)));
        }
        done += std::size_t(n);
    }
    // Flush to disk before the rename so a crash never leaves an empty file under the final name.
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        ::unlink(tmp.c_str());
        throw InputError(path, "", fmt::format("write failed: {}", std::strerror(errno)));
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        throw InputError(path, "", fmt::format("cannot rename into place: {}", std::strerror(err)));
    }
    remove_stale_temporaries(dir, target.filename().string());
}

}  // namespace statetrack
