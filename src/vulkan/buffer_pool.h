// Buffers kept for reuse. A prefix-cache snapshot copies a session's recurrent state (about 50 MB
// for a 9B) into a buffer, and its spill to host memory into another. Allocated anew each time,
// snapshots took 120.8 s beside 136.9 s of steps in a multi-turn serving run on an H100
// (docs/perf/history.md, 2026-12-06 (04:40)), where the copies themselves take microseconds: the
// allocations (and the pinning of host memory) are the likely cost; with the pool, spills of
// exact classes still took 22 ms each (1,200 in a 64-client run, 2026-12-07 (01:10)). Sizes are
// rounded up to classes of eighths of a power of two; a buffer given back serves any later request
// of its class or of a class down to half its size.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>

#include "vulkan/device.h"

namespace dl::vk {

class BufferPool {
  public:
    // Keeps up to `keep` given-back buffers of each memory kind (the oldest are freed first).
    BufferPool(Device& dev, size_t keep) : dev_(dev), keep_(keep) {}
    // A buffer of `kind` memory of at least `size` bytes: the smallest kept one of its size
    // class or larger, up to twice the class (a spill's size grows with its KV rows, so spills
    // rarely repeat a class; a new host buffer costs more than the copy into it: its pages
    // zeroed and pinned), else a new one of the class's size.
    Buffer take(uint64_t size, MemoryKind kind);
    // Keeps b (made by take with this kind) for a later take.
    void give(Buffer b, MemoryKind kind);
    // The size take() allocates for `size` bytes: rounded up to an eighth of its power of two.
    static uint64_t class_size(uint64_t size);
    size_t kept() const;

  private:
    struct Kept {
        Buffer buffer;
        MemoryKind kind;
    };
    Device& dev_;
    const size_t keep_;
    mutable std::mutex mutex_;
    std::deque<Kept> kept_;  // oldest first
};

}  // namespace dl::vk
