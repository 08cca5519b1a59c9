// Internal to src/quant: the kernel tables the dispatcher in dot.cpp chooses between (portable
// scalar code, AVX2, AVX-512 VNNI). Not for use outside the module; quant.h is the interface.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace dl::quant::kernels {

// One weight row against ncols activation rows (1..kMaxCols), activations already in
// vec_dot_type format, column c at x + c * x_stride bytes; out[c] receives the dot product.
using DotColsFn = void (*)(const void* w, const void* x, size_t x_stride, int ncols, float* out,
                           int64_t n);
inline constexpr int kMaxCols = 4;

// Scalar reference: every type can_dot() accepts.
DotColsFn scalar(QType t);
// AVX2/FMA/F16C versions; nullptr for types without one or when not compiled for x86.
DotColsFn avx2(QType t);
// AVX-512 VNNI versions (256-bit vectors) of the block formats' dot products; nullptr for the
// types without one (the AVX2 kernel serves them) or when not compiled for x86.
DotColsFn avx512_vnni(QType t);

// Activation quantizers (n floats to row_size(t, n) bytes) that vectorise the scalar code of
// quantize() bit for bit; nullptr where there is none (Q8_0 and Q8_K have one).
using QuantizeRowFn = void (*)(const float* x, void* dst, int64_t n);
QuantizeRowFn avx2_quantize(QType t);

}  // namespace dl::quant::kernels
