#include "vulkan/buffer_pool.h"

#include <algorithm>
#include <bit>

namespace dl::vk {

uint64_t BufferPool::class_size(uint64_t size) {
    if (size <= 16) return 16;
    const uint64_t step = std::max<uint64_t>(1, std::bit_floor(size) / 8);
    return (size + step - 1) / step * step;
}

Buffer BufferPool::take(uint64_t size, MemoryKind kind) {
    const uint64_t want = class_size(size);
    {
        std::lock_guard lock(mutex_);
        auto best = kept_.end();
        for (auto it = kept_.begin(); it != kept_.end(); ++it) {
            const uint64_t have = it->buffer.size();
            if (it->kind == kind && have >= want && have <= 2 * want &&
                (best == kept_.end() || have < best->buffer.size()))
                best = it;
        }
        if (best != kept_.end()) {
            Buffer b = std::move(best->buffer);
            kept_.erase(best);
            return b;
        }
    }
    return dev_.create_buffer(want, kind);
}

void BufferPool::give(Buffer b, MemoryKind kind) {
    if (!b) return;
    Buffer freed;  // the one dropped, freed outside the lock
    std::lock_guard lock(mutex_);
    kept_.push_back({std::move(b), kind});
    const size_t same = (size_t)std::count_if(kept_.begin(), kept_.end(),
                                              [&](const Kept& k) { return k.kind == kind; });
    if (same > keep_) {
        auto oldest =
            std::find_if(kept_.begin(), kept_.end(), [&](const Kept& k) { return k.kind == kind; });
        freed = std::move(oldest->buffer);
        kept_.erase(oldest);
    }
}

size_t BufferPool::kept() const {
    std::lock_guard lock(mutex_);
    return kept_.size();
}

}  // namespace dl::vk
