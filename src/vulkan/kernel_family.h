// What every family of kernel launchers (kernels_*.h) shares: the device and its pipelines, the
// workgroup sizes the device allows, the shared memory a module declares, and the knobs of
// every launcher (Tuning). Kernels (kernels.h) is every family in one object; each family
// derives from KernelFamily virtually, so that object holds one device, one set of pipelines
// and one Tuning that every family reads.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "quant/types.h"
#include "vulkan/kernels_tuning.h"
#include "vulkan/pipeline.h"

namespace dl::vk {

class KernelFamily {
  public:
    KernelFamily(Device& dev, Pipelines& pipes) : dev_(dev), pipes_(pipes) {}
    KernelFamily(const KernelFamily&) = delete;
    KernelFamily& operator=(const KernelFamily&) = delete;

    static constexpr uint32_t kNone = 0xffffffffu;  // an offset that is not given

    // The knobs of every family's launchers (kernels_tuning.h).
    Tuning tuning;

  protected:
    // The largest power of two <= want that the device allows in one workgroup.
    uint32_t wg_size(uint32_t want) const;
    // What a compiler may add to a module's shared memory beyond its declarations (an H200
    // reported 43136 bytes for the 43008 the 9B's Q6_K GEMV over a norm's input declares), so a
    // shape chosen to fit does.
    static constexpr uint32_t kSharedMargin = 512;
    // The shared memory module `name` declares with specialization constants spec
    // (spirv_shared.h), with the margin; empty where the build lacks the module.
    static std::optional<uint64_t> module_shared_bytes(const char* name,
                                                       std::vector<uint32_t> spec);
    // The module suffix of weights of type t ("q4_k"), or null for a type no kernel reads.
    static const char* type_suffix(QType t);

    Device& dev_;
    Pipelines& pipes_;
};

}  // namespace dl::vk
