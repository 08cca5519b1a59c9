// Random tensors written directly in their stored format: random quants with scales chosen so
// the decoded values have about the requested standard deviation and mean about zero. Far faster
// than quantizing random floats, which is what makes multi-gigabyte synthetic models cheap.
#pragma once

#include <cstdint>

#include "quant/types.h"

namespace dl::convert {

// Fills rows x ne0 elements of type t at dst. Deterministic in seed (per row, whatever the thread
// count). Returns false for types it cannot write directly.
bool random_blocks(QType t, uint8_t* dst, int64_t rows, int64_t ne0, float sigma, uint64_t seed);

// Float values with about this standard deviation (uniform), deterministic in seed.
void random_floats(float* dst, int64_t n, float mean, float sigma, uint64_t seed);

}  // namespace dl::convert
