// Gives every test binary the paths it needs (test data, the deltallm binary, a scratch folder)
// as environment variables, from values CMake compiles in. CTest's ENVIRONMENT property cannot
// carry them through gtest_discover_tests (it splits the list), and a test started by hand should
// find them too. A variable already set in the environment wins.
#include <cstdlib>

namespace {

struct TestEnvironment {
    TestEnvironment() {
        setenv("DELTALLM_TEST_DATA", DELTALLM_TEST_DATA_DIR, 0);
        setenv("DELTALLM_BIN", DELTALLM_BIN_PATH, 0);
        setenv("DELTALLM_TEST_TMP", DELTALLM_TEST_TMP_DIR, 0);
    }
};

const TestEnvironment test_environment;

}  // namespace
