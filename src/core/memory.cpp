// Reading /proc/meminfo and the cgroup v2 memory files.
#include "core/memory.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace dl {

namespace {

std::string slurp(const char* path) {
    std::ifstream f(path);
    if (!f) return {};
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

uint64_t leading_number(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() ? v : 0;
}

}  // namespace

uint64_t mem_available_from_meminfo(std::string_view meminfo) {
    const std::string_view key = "MemAvailable:";
    const size_t at = meminfo.find(key);
    if (at == std::string_view::npos) return 0;
    const uint64_t kib = leading_number(meminfo.substr(at + key.size()));
    return kib > std::numeric_limits<uint64_t>::max() / 1024 ? 0 : kib * 1024;
}

uint64_t cgroup_room(std::string_view memory_max, std::string_view memory_current) {
    if (memory_max.empty() || memory_max.substr(0, 3) == "max")
        return std::numeric_limits<uint64_t>::max();
    const uint64_t limit = leading_number(memory_max), used = leading_number(memory_current);
    if (limit == 0) return std::numeric_limits<uint64_t>::max();
    return limit > used ? limit - used : 0;
}

uint64_t usable_memory_bytes() {
    uint64_t room = mem_available_from_meminfo(slurp("/proc/meminfo"));
    const std::string max = slurp("/sys/fs/cgroup/memory.max");
    if (!max.empty()) {
        const uint64_t c = cgroup_room(max, slurp("/sys/fs/cgroup/memory.current"));
        room = room == 0 ? (c == std::numeric_limits<uint64_t>::max() ? 0 : c) : std::min(room, c);
    }
    return room;
}

}  // namespace dl
