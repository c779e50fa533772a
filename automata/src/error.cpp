#include "statetrack/automata/error.hpp"

namespace statetrack {

namespace {
std::string join_message(const std::string& file, const std::string& place, const std::string& message) {
    std::string out = file.empty() ? std::string("<input>") : file;
    if (!place.empty()) out += ": " + place;
    return out + ": " + message;
}
}  // namespace

InputError::InputError(std::string file, std::string place, std::string message)
    : std::runtime_error(join_message(file, place, message)),
      file_(std::move(file)),
      place_(std::move(place)),
      message_(std::move(message)) {}

}  // namespace statetrack
