// What the kernel families share (see kernel_family.h).
#include "vulkan/kernel_family.h"

#include <algorithm>

#include "vulkan/spirv_shared.h"

namespace dl::vk {

uint32_t KernelFamily::wg_size(uint32_t want) const {
    uint32_t limit = std::max<uint32_t>(dev_.features().max_workgroup_invocations, 64);
    uint32_t s = 1;
    while (s * 2 <= std::min(want, limit)) s *= 2;
    return s;
}

std::optional<uint64_t> KernelFamily::module_shared_bytes(const char* name,
                                                          std::vector<uint32_t> spec) {
    auto b = workgroup_bytes(find_module(name), spec);
    if (!b) return std::nullopt;
    return *b + kSharedMargin;
}

const char* KernelFamily::type_suffix(QType t) {
    switch (t) {
        case QType::F32:
            return "f32";
        case QType::F16:
            return "f16";
        case QType::Q4_0:
            return "q4_0";
        case QType::Q8_0:
            return "q8_0";
        case QType::Q4_K:
            return "q4_k";
        case QType::Q5_K:
            return "q5_k";
        case QType::Q6_K:
            return "q6_k";
        default:
            return nullptr;
    }
}

}  // namespace dl::vk
