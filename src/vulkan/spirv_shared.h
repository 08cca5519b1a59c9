// The shared (workgroup) memory a compute module declares, read from its SPIR-V with its
// specialization constants applied, so a launcher that must fit a workgroup in the device's
// shared memory asks the module rather than mirroring its declarations by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace dl::vk {

// The sum of the natural sizes (scalars and vector components of their width, arrays of their
// length, structs of their members, no padding) of the Workgroup variables of a SPIR-V module
// whose specialization constant i (SpecId i) is spec[i], or its default where spec has no
// element i. Empty when the words are not a well-formed module, or a size depends on something
// it does not evaluate (an operation of a specialization constant it does not know). A driver
// may add padding or a reserve of its own on top.
std::optional<uint64_t> workgroup_bytes(std::span<const uint32_t> words,
                                        std::span<const uint32_t> spec);

}  // namespace dl::vk
