// The blocks of the paged KV cache (Kernels::kKvBlock rows each): which of the pool's blocks are
// free. A session takes blocks as its rows grow and gives them back when it shrinks or closes;
// block b is the same rows of every attention layer's key and value pools. Sessions of one
// driver may open, grow and close on different threads.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace dl::vk {

class KvPool {
  public:
    explicit KvPool(uint32_t blocks) : blocks_(blocks) {
        // Taken from the back: block 0 first.
        for (uint32_t b = blocks; b-- > 0;) free_.push_back(b);
    }
    uint32_t blocks() const { return blocks_; }
    uint32_t free_blocks() const {
        std::lock_guard lock(mutex_);
        return (uint32_t)free_.size();
    }
    std::optional<uint32_t> take() {
        std::lock_guard lock(mutex_);
        if (free_.empty()) return std::nullopt;
        const uint32_t b = free_.back();
        free_.pop_back();
        return b;
    }
    void give(uint32_t b) {
        std::lock_guard lock(mutex_);
        free_.push_back(b);
    }

  private:
    const uint32_t blocks_;
    mutable std::mutex mutex_;
    std::vector<uint32_t> free_;
};

}  // namespace dl::vk
