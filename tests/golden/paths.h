// Where the golden tests find their inputs and scratch space: CTest's environment when it
// carries DELTALLM_TEST_DATA / DELTALLM_TEST_TMP / DELTALLM_BIN, else paths relative to this
// test binary (build/tests). Scratch files are per process, as CTest runs cases in parallel.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace golden {

inline std::string test_binary_dir() {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(".") : exe.parent_path().string();
}

inline std::string data_dir() {
    const char* d = std::getenv("DELTALLM_TEST_DATA");
    return d && *d ? d : test_binary_dir() + "/../../tests/data";
}

inline std::string tmp_dir() {
    const char* d = std::getenv("DELTALLM_TEST_TMP");
    std::string root = (d && *d ? d : test_binary_dir() + "/tmp") + std::string("/golden_") +
                       std::to_string(::getpid());
    std::filesystem::create_directories(root);
    return root;
}

inline std::string deltallm_bin() {
    const char* b = std::getenv("DELTALLM_BIN");
    return b && *b ? b : test_binary_dir() + "/../deltallm";
}

}  // namespace golden
