// Runs the deltallm binary (or any command) from a test the way a user's shell would and keeps
// what it printed: the exit code (128 + the signal when it was killed, so a crash is told apart
// from an error exit) and stdout and stderr separately, read back from files beside `base`.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace dl::test {

struct CliResult {
    int rc = -1;
    std::string out, err;
};

inline std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

// Runs `bin args <stdin_path >base.out 2>base.err` through the shell.
inline CliResult run_captured(const std::string& bin, const std::string& args,
                              const std::string& stdin_path, const std::string& base) {
    std::string cmd =
        bin + " " + args + " <" + stdin_path + " >" + base + ".out 2>" + base + ".err";
    int status = std::system(cmd.c_str());
    CliResult r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(base + ".out");
    r.err = slurp(base + ".err");
    return r;
}

}  // namespace dl::test
