#pragma once
// The device tests' first line: without a usable CUDA device (or a build without the backend) the
// test is skipped, with the reason.
#include <gtest/gtest.h>

#include <string>

#include "statetrack/gpu/cuda_backend.hpp"

#define SKIP_WITHOUT_GPU()                                                                        \
    do {                                                                                          \
        std::string why;                                                                          \
        if (!::statetrack::gpu::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why; \
    } while (0)
