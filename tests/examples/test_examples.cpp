// Builds (via CMake) and runs each example program; the example DFA files compile and verify.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

TEST(Examples, CompileZooRunsAndCertifies) {
    // The CLI is <build>/cli/statetrack; the examples are built into <build>/examples.
    const std::string cli = STATETRACK_CLI;
    const std::string build = cli.substr(0, cli.rfind("/cli/"));
    const std::string exe = build + "/examples/example_compile_zoo";
    const std::string out = ::testing::TempDir() + "/example_compile_zoo.txt";
    ASSERT_EQ(std::system((exe + " > " + out).c_str()), 0);
}

TEST(Examples, ExampleDfaFilesCompile) {
    for (const char* file : {"second_to_last_a.json", "mod3.json"}) {
        const std::string cmd = std::string(STATETRACK_CLI) + " compile " + STATETRACK_SOURCE_DIR + "/examples/" + file + " -o " +
                                ::testing::TempDir() + "/example_model.json > /dev/null";
        EXPECT_EQ(std::system(cmd.c_str()), 0) << file;
    }
}
