// Rounding sizes and offsets up to an alignment, shared by the GGUF writer and the Vulkan plan.
#pragma once

#include <cstdint>

namespace dl {

// x rounded up to a multiple of a (a > 0; x + a - 1 must not overflow: sizes the program made,
// not offsets read from a file).
constexpr uint64_t align_up(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

}  // namespace dl
