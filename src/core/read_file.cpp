// Bounded whole-file reads and the regular-file check done before anything can block.
#include "core/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/bytes.h"
#include "core/error.h"

namespace dl {

namespace {

const char* kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a folder";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

// open() with O_NONBLOCK returns at once for a FIFO without a writer, where a plain open() would
// wait for one forever; fstat then tells what was opened.
int open_checked(const std::string& path, const char* what, bool allow_stream, struct stat& st) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail("cannot open {} '{}': {}", what, path, std::strerror(errno));
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        fail("cannot read {} '{}': {}", what, path, std::strerror(e));
    }
    const bool stream = S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode);
    if (!S_ISREG(st.st_mode) && !(allow_stream && stream)) {
        ::close(fd);
        fail("{} '{}' is {}, not a regular file", what, path, kind_of(st.st_mode));
    }
    // Reads block as usual from here on (a pipe's writer may be slow).
    int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

}  // namespace

int open_regular_file(const std::string& path, const char* what) {
    struct stat st {};
    return open_checked(path, what, false, st);
}

std::string read_file_bounded(const std::string& path, size_t max_bytes, FileKind kind,
                              const char* what) {
    struct stat st {};
    int fd = open_checked(path, what, kind == FileKind::regular_or_pipe, st);
    std::string out;
    if (S_ISREG(st.st_mode)) {
        if ((uint64_t)st.st_size > max_bytes) {
            ::close(fd);
            fail("{} '{}' holds {}, more than the {} accepted", what, path,
                 human_bytes((uint64_t)st.st_size), human_bytes(max_bytes));
        }
        out.reserve((size_t)st.st_size);
    }
    char buf[1 << 16];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            ::close(fd);
            fail("cannot read {} '{}': {}", what, path, std::strerror(e));
        }
        if (n == 0) break;
        if (out.size() + (size_t)n > max_bytes) {
            ::close(fd);
            fail("{} '{}' holds more than the {} accepted", what, path, human_bytes(max_bytes));
        }
        out.append(buf, (size_t)n);
    }
    ::close(fd);
    return out;
}

}  // namespace dl
