// The entries of a pool and who holds them: the blocks of the paged KV cache (Kernels::kKvBlock
// rows each; block b is the same rows of every attention layer's key and value pools), or the
// recurrent state's slots. A session takes entries as it opens or grows and gives them back when
// it shrinks or closes. A KV block may have several holders: a snapshot holds the blocks of the
// session it copied, and a session restored from it holds them too, until one of them writes (it
// then writes a copy of its own, ResidentDriver::reserve_rows). An entry is free once its last
// holder gives it back. Sessions of one driver may do all this on different threads.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "core/error.h"

namespace dl::vk {

class FreeList {
  public:
    explicit FreeList(uint32_t size) : size_(size), holders_(size, 0) {
        // Taken from the back: entry 0 first.
        for (uint32_t b = size; b-- > 0;) free_.push_back(b);
    }
    uint32_t size() const { return size_; }
    uint32_t free() const {
        std::lock_guard lock(mutex_);
        return (uint32_t)free_.size();
    }
    // A free entry, now held once; none when all are taken.
    std::optional<uint32_t> take() {
        std::lock_guard lock(mutex_);
        if (free_.empty()) return std::nullopt;
        const uint32_t b = free_.back();
        free_.pop_back();
        holders_[b] = 1;
        return b;
    }
    // One more holder of a taken entry.
    void hold(uint32_t b) {
        std::lock_guard lock(mutex_);
        DL_ASSERT(b < size_ && holders_[b] > 0);
        ++holders_[b];
    }
    // Whether another holder than the caller's has the entry.
    bool shared(uint32_t b) const {
        std::lock_guard lock(mutex_);
        return holders_[b] > 1;
    }
    void give(uint32_t b) {
        std::lock_guard lock(mutex_);
        DL_ASSERT(b < size_ && holders_[b] > 0);
        if (--holders_[b] == 0) free_.push_back(b);
    }

  private:
    const uint32_t size_;
    mutable std::mutex mutex_;
    std::vector<uint32_t> free_;
    std::vector<uint32_t> holders_;
};

}  // namespace dl::vk
