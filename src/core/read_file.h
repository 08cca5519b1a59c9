// Reading small input files (prompts, JSON configurations) whole, with a bound on their size and
// a refusal of what is not a file: a FIFO, a device or a folder given by mistake gives one clear
// error instead of a hang, an endless read or an exception from the stream library.
#pragma once

#include <cstddef>
#include <string>

namespace dl {

enum class FileKind {
    regular_only,    // refuse FIFOs, devices and folders before reading (configurations, models)
    regular_or_pipe  // also a pipe or a terminal (a prompt file may be /dev/stdin), still bounded
};

// The whole content of path, which must hold at most max_bytes; throws dl::Error naming `what`
// (e.g. "the prompt file") and the path otherwise.
std::string read_file_bounded(const std::string& path, size_t max_bytes, FileKind kind,
                              const char* what);

// Opens path for reading without blocking on a FIFO (O_NONBLOCK until it is known to be a regular
// file) and returns the descriptor of a regular file; throws dl::Error for anything else.
int open_regular_file(const std::string& path, const char* what);

}  // namespace dl
