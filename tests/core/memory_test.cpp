// The memory check's readings: MemAvailable from /proc/meminfo and the room under a cgroup limit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <limits>

#include "core/memory.h"

TEST(Memory, MemAvailableIsReadInBytes) {
    const char* meminfo =
        "MemTotal:       24683140 kB\nMemFree:         1000000 kB\n"
        "MemAvailable:   20000000 kB\nBuffers:           12345 kB\n";
    EXPECT_EQ(dl::mem_available_from_meminfo(meminfo), 20000000ull * 1024);
    EXPECT_EQ(dl::mem_available_from_meminfo("MemTotal: 5 kB\n"), 0u);
}

TEST(Memory, CgroupRoomIsTheLimitLessWhatIsUsed) {
    EXPECT_EQ(dl::cgroup_room("8589934592\n", "1073741824\n"), 7516192768ull);
    EXPECT_EQ(dl::cgroup_room("max\n", "1073741824\n"), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(dl::cgroup_room("1000\n", "5000\n"), 0u);
}

TEST(Memory, UsableMemoryIsAtMostTheMachinesTotal) {
    const uint64_t usable = dl::usable_memory_bytes();
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    EXPECT_GT(usable, 0u);
    EXPECT_LE(usable, (uint64_t)pages * (uint64_t)page);
}
