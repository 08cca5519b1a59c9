// Test helper: runs the deltallm binary of this build with arguments and stdin text and returns
// its exit code and output (cli_runner.h does the running), plus the checks every front-end test
// makes of an error (one "error:" line, exit code 1).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_runner.h"

namespace dl::test {

inline std::string test_binary_dir() {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(".") : exe.parent_path().string();
}

inline std::string tmp_dir() {
    const char* d = std::getenv("DELTALLM_TEST_TMP");
    std::string t = d && *d ? std::string(d) : test_binary_dir() + "/tmp";
    std::filesystem::create_directories(t);
    return t;
}

inline std::string deltallm_bin() {
    const char* b = std::getenv("DELTALLM_BIN");
    if (b && *b) return b;
    return test_binary_dir() + "/../deltallm";
}

// Runs `[prefix] deltallm ARGS` (prefix: e.g. "timeout 20" or an environment assignment).
inline CliResult deltallm_run(const std::string& args, const std::string& stdin_text = "",
                              const std::string& prefix = "") {
    const std::string bin = deltallm_bin();
    EXPECT_TRUE(std::filesystem::exists(bin)) << bin << " does not exist (set DELTALLM_BIN)";
    std::string base = tmp_dir() + "/cli_h_" + std::to_string(::getpid());
    std::ofstream(base + ".in", std::ios::binary) << stdin_text;
    return run_captured(prefix.empty() ? bin : prefix + " " + bin, args, base + ".in", base);
}

// Whether `deltallm info --devices` lists a Vulkan device (lavapipe counts); asked once.
inline bool has_vulkan_device() {
    static const bool yes =
        deltallm_run("info --devices").out.find("vulkan:0 ") != std::string::npos;
    return yes;
}

inline void expect_one_error_line(const CliResult& r, const std::string& what,
                                  const std::string& part = "") {
    EXPECT_EQ(r.rc, 1) << what << "\n" << r.err;
    int n_error = 0;
    std::istringstream ss(r.err);
    for (std::string l; std::getline(ss, l);) n_error += l.rfind("error: ", 0) == 0 ? 1 : 0;
    EXPECT_EQ(n_error, 1) << what << "\n" << r.err;
    if (!part.empty()) {
        EXPECT_NE(r.err.find(part), std::string::npos) << what << "\n" << r.err;
    }
}

}  // namespace dl::test
