// Device byte order of weight rows (see weight_layout.h).
#include "vulkan/weight_layout.h"

#include <cstring>

#include "core/error.h"
#include "quant/blocks.h"
#include "quant/types.h"

namespace dl::vk {

bool relaid(QType t) {
    return t == QType::Q6_K;
}

void to_device_layout(QType t, uint32_t cols, uint64_t rows, const uint8_t* src, uint8_t* dst) {
    const uint64_t rb = row_size(t, cols);
    if (!relaid(t)) {
        std::memcpy(dst, src, rb * rows);
        return;
    }
    using quant::block_q6_K;
    DL_ASSERT(cols % QK_K == 0);
    const uint64_t nb = cols / QK_K;
    for (uint64_t r = 0; r < rows; ++r) {
        const auto* b = reinterpret_cast<const block_q6_K*>(src + r * rb);
        uint8_t* ql = dst + r * rb;
        uint8_t* qh = ql + 128 * nb;
        uint8_t* sc = qh + 64 * nb;
        uint8_t* d = sc + 16 * nb;
        for (uint64_t i = 0; i < nb; ++i) {
            std::memcpy(ql + 128 * i, b[i].ql, 128);
            std::memcpy(qh + 64 * i, b[i].qh, 64);
            std::memcpy(sc + 16 * i, b[i].scales, 16);
            std::memcpy(d + 2 * i, &b[i].d, 2);
        }
    }
}

}  // namespace dl::vk
