// libFuzzer target: one input through statetrack::fuzz::one_sweep_spec (fuzz_inputs.hpp says what is checked).
#include "fuzz_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    statetrack::fuzz::one_sweep_spec(std::string(reinterpret_cast<const char*>(data), size));
    return 0;
}
