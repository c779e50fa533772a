#pragma once
// Reading and writing whole files with the error contract of DESIGN.md: a missing or unreadable
// file is an InputError naming it; outputs go to a temporary file that is renamed into place, so a
// reader sees the old complete file or the new complete one, never a half-written one.
#include <cstddef>
#include <string>

namespace statetrack {

// Documented limit on input files (docs/limits.md): larger files are refused with a LimitError.
inline constexpr std::size_t max_input_file_bytes = std::size_t(256) << 20;

std::string read_text_file(const std::string& path);
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace statetrack
