// Which entries of a pool are free: the blocks of the paged KV cache (Kernels::kKvBlock rows each;
// block b is the same rows of every attention layer's key and value pools), or the recurrent
// state's slots. A session takes entries as it opens or grows and gives them back when it shrinks
// or closes; sessions of one driver may do so on different threads.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace dl::vk {

class FreeList {
  public:
    explicit FreeList(uint32_t size) : size_(size) {
        // Taken from the back: entry 0 first.
        for (uint32_t b = size; b-- > 0;) free_.push_back(b);
    }
    uint32_t size() const { return size_; }
    uint32_t free() const {
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
    const uint32_t size_;
    mutable std::mutex mutex_;
    std::vector<uint32_t> free_;
};

}  // namespace dl::vk
