#pragma once
// An unsigned integer field of a JSON header (checkpoint, options, model configuration, task).
// nlohmann's get<std::size_t>() converts a floating-point or negative number without a check, and
// a float beyond the type's range is undefined behaviour (found by fuzzing: "batch": 6.7e58). This
// throws the library's type_error instead, which every reader here turns into an InputError.
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace statetrack::gpu {

template <class T = std::size_t>
T json_unsigned(const nlohmann::json& value) {
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() > std::numeric_limits<T>::max())
        throw nlohmann::json::type_error::create(
            302, std::string("expected an unsigned integer of the field's range, got ") + value.type_name(), nullptr);
    return static_cast<T>(value.get<std::uint64_t>());
}

}  // namespace statetrack::gpu
