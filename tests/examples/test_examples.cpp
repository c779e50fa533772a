// Builds (via CMake) and runs each example program; the example DFA files compile and verify.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

TEST(Examples, CompileZooRunsAndCertifies) {
    // The CLI is <build>/cli/statetrack; the examples are built into <build>/examples.
    const std::string cli = STATETRACK_CLI;
    const std::string build = cli.substr(0, cli.rfind("/cli/"));
    const std::string exe = build + "/examples/example_compile_zoo";
    const std::string out = ::testing::TempDir() + "/example_compile_zoo.txt";
    ASSERT_EQ(std::system((exe + " > " + out).c_str()), 0);
    std::ifstream in(out);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Both networks are printed factor by factor and certified for every length.
    EXPECT_NE(text.find("zoo:parity: 1 layer(s), construction parity"), std::string::npos) << text;
    EXPECT_NE(text.find("zoo:symreg:3: 1 layer(s), construction onehot"), std::string::npos) << text;
    EXPECT_NE(text.find("I - 2 v v^T / v.v, v = (1)"), std::string::npos) << text;
    std::size_t certified = 0;
    for (auto at = text.find("correct for every length"); at != std::string::npos; at = text.find("correct for every length", at + 1)) ++certified;
    EXPECT_EQ(certified, 2u) << text;
}

TEST(Examples, ExampleDfaFilesCompile) {
    for (const char* file : {"second_to_last_a.json", "mod3.json"}) {
        const std::string cmd = std::string(STATETRACK_CLI) + " compile " + STATETRACK_SOURCE_DIR + "/examples/" + file + " -o " +
                                ::testing::TempDir() + "/example_model.json > /dev/null";
        EXPECT_EQ(std::system(cmd.c_str()), 0) << file;
    }
}
