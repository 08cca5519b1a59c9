// Block formats: dequantization, quantization and the CPU dot products that matrix products are
// built from. Scalar reference code defines the semantics; vectorised versions (chosen at run
// time by CPU features) are tested against it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace dl::quant {

// True when dequantize() handles the type.
bool can_dequantize(QType t);
// n elements (a multiple of the block size) from src to dst.
void dequantize(QType t, const void* src, float* dst, int64_t n);

// True when quantize() can produce the type.
bool can_quantize(QType t);
// Quantizes n elements (a multiple of the block size); returns the bytes written.
size_t quantize(QType t, const float* src, void* dst, int64_t n);

// The format activations are converted to before a dot product with weights of type t
// (F32 for float weights; Q8_0 / Q8_1 / Q8_K for block-quantized weights).
QType vec_dot_type(QType t);
// True when vec_dot() handles weights of type t.
bool can_dot(QType t);
// Converts n activations to vec_dot_type(t)'s format (dst holds row_size(vec_dot_type(t), n) bytes).
void quantize_activations(QType t, const float* x, void* dst, int64_t n);
// Dot product of one weight row of type t with activations already in vec_dot_type(t) format.
float vec_dot(QType t, const void* w_row, const void* x, int64_t n);

// Which implementation vec_dot uses now: "avx2", "scalar", ...
const char* cpu_backend();

}  // namespace dl::quant
