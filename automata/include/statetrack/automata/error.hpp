#pragma once
// Errors that cross the library boundary. The CLI maps InputError to exit code 2
// and CheckFailed to exit code 1 (DESIGN.md, "Command line").
#include <stdexcept>
#include <string>

namespace statetrack {

// Bad input: a file, the place inside it (JSON pointer, "line N", "argument"), and what is wrong.
// what() is "FILE: PLACE: MESSAGE", the one line the CLI prints.
class InputError : public std::runtime_error {
public:
    InputError(std::string file, std::string place, std::string message);
    const std::string& file() const { return file_; }
    const std::string& place() const { return place_; }
    const std::string& message() const { return message_; }

private:
    std::string file_, place_, message_;
};

// A size or resource limit documented in docs/ was exceeded by the input (also exit code 2).
class LimitError : public InputError {
public:
    using InputError::InputError;
};

// A check ran and failed (a counterexample, a verification failure): exit code 1.
class CheckFailed : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace statetrack
