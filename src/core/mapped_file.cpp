// mmap of a whole file.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "core/read_file.h"

namespace dl {

namespace {

// The mappings the SIGBUS handler knows, in fixed storage (a handler may not allocate). A slot
// is in use while base is non-zero; its path is written before base is.
constexpr int kSlots = 64;
struct Slot {
    std::atomic<uintptr_t> base{0};
    std::atomic<size_t> size{0};
    std::atomic<bool> truncated{false};
    char path[512];
};
Slot g_slots[kSlots];
struct sigaction g_previous_bus;

extern "C" void on_sigbus(int sig, siginfo_t* info, void* ctx) {
    const uintptr_t addr = (uintptr_t)info->si_addr;
    const uintptr_t page = (uintptr_t)::sysconf(_SC_PAGESIZE);
    for (Slot& s : g_slots) {
        const uintptr_t base = s.base.load();
        const size_t size = s.size.load();
        if (base == 0 || addr < base || addr >= base + size) continue;
        // Zero pages from the faulting page to the end of the mapping: the read that faulted is
        // retried and completes, and the mark makes it an error at the next check.
        const uintptr_t from = addr & ~(page - 1);
        void* p = ::mmap((void*)from, base + size - from, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (p != MAP_FAILED) {
            s.truncated.store(true);
            return;
        }
    }
    // Not a mapped model file: whatever the process did before.
    if (g_previous_bus.sa_flags & SA_SIGINFO) {
        if (g_previous_bus.sa_sigaction) return g_previous_bus.sa_sigaction(sig, info, ctx);
    } else if (g_previous_bus.sa_handler != SIG_DFL && g_previous_bus.sa_handler != SIG_IGN) {
        return g_previous_bus.sa_handler(sig);
    }
    ::signal(SIGBUS, SIG_DFL);
    ::raise(SIGBUS);
}

int register_mapping(const uint8_t* base, size_t size, const std::string& path) {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGBUS, &sa, &g_previous_bus);
    });
    static std::mutex m;
    std::lock_guard<std::mutex> lock(m);
    for (int i = 0; i < kSlots; ++i) {
        Slot& s = g_slots[i];
        if (s.base.load() != 0) continue;
        std::snprintf(s.path, sizeof s.path, "%s", path.c_str());
        s.truncated.store(false);
        s.size.store(size);
        s.base.store((uintptr_t)base);
        return i;
    }
    return -1;  // more mappings than slots: this one is not watched
}

}  // namespace

void check_mapped_files() {
    for (const Slot& s : g_slots)
        if (s.base.load() != 0 && s.truncated.load())
            fail("'{}' was truncated while it was being read; its data is incomplete", s.path);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
    // A FIFO or a device is refused before anything could block on it.
    int fd = open_regular_file(path, "model file");
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        fail("cannot stat '{}': {}", path, std::strerror(e));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            fail("cannot map '{}': {}", path, std::strerror(e));
        }
        data_ = static_cast<const uint8_t*>(p);
        slot_ = register_mapping(data_, size_, path);
    }
    ::close(fd);
}

MappedFile::~MappedFile() {
    if (slot_ >= 0) g_slots[slot_].base.store(0);
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : slot_(std::exchange(o.slot_, -1)),
      path_(std::move(o.path_)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        if (slot_ >= 0) g_slots[slot_].base.store(0);
        if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
        slot_ = std::exchange(o.slot_, -1);
        path_ = std::move(o.path_);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
    }
    return *this;
}

}  // namespace dl
