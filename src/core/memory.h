// How much memory the process can still take: the system's available memory (MemAvailable, which
// counts reclaimable cache) and, inside a container, the room left under its cgroup limit. Total
// RAM is the wrong yardstick for "will this session fit": other processes and a container limit
// both make the real room smaller.
#pragma once

#include <cstdint>
#include <string_view>

namespace dl {

// The smaller of MemAvailable and the cgroup's remaining room; 0 when neither can be read.
uint64_t usable_memory_bytes();

// The pieces, for tests: MemAvailable from /proc/meminfo's text in bytes (0 when absent), and the
// room under a cgroup v2 limit from memory.max and memory.current ("max": no limit, UINT64_MAX).
uint64_t mem_available_from_meminfo(std::string_view meminfo);
uint64_t cgroup_room(std::string_view memory_max, std::string_view memory_current);

}  // namespace dl
