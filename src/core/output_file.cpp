// The temporary-file-and-rename writer, and the signal handler that removes temporary files.
#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"

namespace dl {

namespace {

// The temporary files open now, for the signal handler: fixed storage, since a handler may not
// allocate. A slot is claimed by setting its flag after its path is written.
constexpr int kSlots = 16;
char g_paths[kSlots][PATH_MAX + 16];
std::atomic<bool> g_used[kSlots];

extern "C" void remove_temporaries_and_reraise(int sig) {
    for (int i = 0; i < kSlots; ++i)
        if (g_used[i].load()) ::unlink(g_paths[i]);
    // Die of the same signal, as the caller (a shell, a supervisor) expects.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

void install_handlers() {
    static std::once_flag once;
    std::call_once(once, [] {
        for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
            struct sigaction old {};
            ::sigaction(sig, nullptr, &old);
            if (old.sa_handler == SIG_IGN) continue;  // e.g. nohup: keep ignoring it
            struct sigaction sa {};
            sa.sa_handler = remove_temporaries_and_reraise;
            sigemptyset(&sa.sa_mask);
            ::sigaction(sig, &sa, nullptr);
        }
        // Past the file size limit the write then fails with EFBIG and the error path cleans up.
        ::signal(SIGXFSZ, SIG_IGN);
    });
}

int claim_slot(const std::string& path) {
    if (path.size() >= sizeof g_paths[0]) return -1;
    for (int i = 0; i < kSlots; ++i) {
        if (g_used[i].load()) continue;
        std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
        bool expected = false;
        if (g_used[i].compare_exchange_strong(expected, true)) return i;
    }
    return -1;
}

const char* kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a folder";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

// The file that is replaced (path with a symbolic link resolved) and its status; exists is false
// when there is none.
std::string resolve_target(const std::string& path, struct stat& st, bool& exists) {
    if (path.empty()) fail("no output file name given");
    struct stat lst {};
    if (::lstat(path.c_str(), &lst) != 0) {
        if (errno != ENOENT) fail("cannot write '{}': {}", path, std::strerror(errno));
        exists = false;
        return path;
    }
    std::string target = path;
    st = lst;
    if (S_ISLNK(lst.st_mode)) {
        char* real = ::realpath(path.c_str(), nullptr);
        if (!real)
            fail("cannot write '{}': it is a symbolic link to a missing file or folder ({})", path,
                 std::strerror(errno));
        target = real;
        std::free(real);
        if (::stat(target.c_str(), &st) != 0)
            fail("cannot write '{}': {}", path, std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
        fail("will not write '{}': it is {}, and only regular files are written", path,
             kind_of(st.st_mode));
    if (st.st_nlink > 1)
        fail(
            "will not replace '{}': it has {} hard links, which would keep the old content; "
            "remove it first or write elsewhere",
            path, (unsigned long)st.st_nlink);
    exists = true;
    return target;
}

}  // namespace

void check_output_path(const std::string& path) {
    struct stat st {};
    bool exists = false;
    resolve_target(path, st, exists);
}

OutputFile::OutputFile(const std::string& path) : path_(path) {
    struct stat st {};
    target_ = resolve_target(path, st, replace_);
    if (replace_) {
        mode_ = st.st_mode & 07777;
        uid_ = st.st_uid;
        gid_ = st.st_gid;
    } else {
        const mode_t mask = ::umask(0);
        ::umask(mask);
        mode_ = 0666 & ~mask;
    }
    install_handlers();
    temp_ = target_ + ".XXXXXX";
    // The slot is claimed before the file exists, so that no signal can leave it behind.
    slot_ = claim_slot(temp_);
    fd_ = ::mkstemp(temp_.data());
    if (fd_ < 0) {
        int e = errno;
        if (slot_ >= 0) g_used[slot_].store(false);
        fail("cannot create a file next to '{}': {}", path, std::strerror(e));
    }
    // mkstemp filled in the X's: the handler needs the real name.
    if (slot_ >= 0) std::memcpy(g_paths[slot_], temp_.c_str(), temp_.size() + 1);
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!temp_.empty()) ::unlink(temp_.c_str());
    if (slot_ >= 0) g_used[slot_].store(false);
}

void OutputFile::commit() {
    if (replace_ && ::geteuid() == 0) {
        // Root replacing another user's file gives it back to that user.
        if (::fchown(fd_, uid_, gid_) != 0)
            fail("cannot write '{}': {}", path_, std::strerror(errno));
    }
    if (::fchmod(fd_, mode_) != 0) fail("cannot write '{}': {}", path_, std::strerror(errno));
    int r = ::close(fd_);
    fd_ = -1;
    if (r != 0) fail("cannot write '{}': {}", path_, std::strerror(errno));
    if (::rename(temp_.c_str(), target_.c_str()) != 0)
        fail("cannot rename '{}' to '{}': {}", temp_, target_, std::strerror(errno));
    temp_.clear();
    if (slot_ >= 0) g_used[slot_].store(false);
    slot_ = -1;
}

}  // namespace dl
