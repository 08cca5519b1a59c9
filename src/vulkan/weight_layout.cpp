// Device byte order of weight rows (see weight_layout.h).
#include "vulkan/weight_layout.h"

#include <cstring>

#include "core/error.h"
#include "quant/types.h"

namespace dl::vk {

bool tiled(QType t) {
    return t == QType::Q4_K || t == QType::Q6_K;
}

uint64_t device_bytes(QType t, uint64_t cols, uint64_t rows) {
    if (tiled(t)) rows = (rows + kTileRows - 1) / kTileRows * kTileRows;
    return row_size(t, cols) * rows;
}

void to_device_layout(QType t, uint32_t cols, uint64_t rows, const uint8_t* src, uint8_t* dst) {
    const uint64_t rb = row_size(t, cols);
    if (!tiled(t)) {
        std::memcpy(dst, src, rb * rows);
        return;
    }
    to_tiles(t, cols, rows, kTileRows, src, dst);
}

void to_tiles(QType t, uint32_t cols, uint64_t rows, uint32_t tile, const uint8_t* src,
              uint8_t* dst) {
    DL_ASSERT(tiled(t) && cols % QK_K == 0 && tile > 0);
    const uint64_t rb = row_size(t, cols), nb = cols / QK_K, bs = rb / nb, fields = bs / 16;
    const uint64_t tiles = (rows + tile - 1) / tile;
    std::memset(dst, 0, tiles * tile * rb);
    for (uint64_t r = 0; r < rows; ++r) {
        const uint64_t lane = r % tile;
        uint8_t* first = dst + r / tile * tile * rb;
        for (uint64_t kb = 0; kb < nb; ++kb) {
            const uint8_t* block = src + r * rb + kb * bs;
            uint8_t* chunk = first + kb * bs * tile;
            for (uint64_t f = 0; f < fields; ++f)
                std::memcpy(chunk + (f * tile + lane) * 16, block + f * 16, 16);
            if (bs % 16) std::memcpy(chunk + fields * 16 * tile + lane * 2, block + fields * 16, 2);
        }
    }
}

}  // namespace dl::vk
