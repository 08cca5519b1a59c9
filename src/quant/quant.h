// Block formats: dequantization, quantization and the CPU dot products that matrix products are
// built from. Scalar reference code defines the semantics; vectorised versions (chosen at run
// time by CPU features) are tested against it. Block layouts: quant/blocks.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace dl::quant {

// True when a row of n elements of type t is well formed: n > 0, a known type and n a multiple of
// its block size. Loaders check this (and reject the file) before any other call here; the
// functions below treat a bad n as a programming error (DL_ASSERT).
bool row_ok(QType t, int64_t n);

// True when dequantize() handles the type: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS.
bool can_dequantize(QType t);
// n elements (a multiple of the block size) from src to dst.
void dequantize(QType t, const void* src, float* dst, int64_t n);

// True when quantize() can produce the type (the same list as can_dequantize).
bool can_quantize(QType t);
// Quantizes n elements (a multiple of the block size); returns the bytes written
// (row_size(t, n)). Low-bit formats search their scales for the least squared error.
size_t quantize(QType t, const float* src, void* dst, int64_t n);

// The format activations are converted to before a dot product with weights of type t:
// F32 for F32/F16/BF16; Q8_0 for Q4_0, Q5_0, Q8_0, IQ4_NL; Q8_1 for Q4_1, Q5_1; Q8_K for the
// K-quants and IQ4_XS.
QType vec_dot_type(QType t);
// True when vec_dot() handles weights of type t (every can_dequantize type but Q8_1 and Q8_K).
bool can_dot(QType t);
// Converts n activations to vec_dot_type(t)'s format (dst holds row_size(vec_dot_type(t), n)
// bytes).
void quantize_activations(QType t, const float* x, void* dst, int64_t n);
// Dot product of one weight row of type t with activations already in vec_dot_type(t) format.
float vec_dot(QType t, const void* w_row, const void* x, int64_t n);
// The scalar reference for vec_dot, whatever the CPU: what the vectorised kernels are tested
// against (they differ only in float summation order).
float vec_dot_reference(QType t, const void* w_row, const void* x, int64_t n);

// Batched dot products for matrix products (prefill): weights W [n_rows x n] of type t (row r at
// w + r * w_stride bytes) against n_cols activation rows already converted by
// quantize_activations (row c at x + c * x_stride bytes):
//     out[c * out_stride + r] = vec_dot(t, W row r, x row c, n)   for r < n_rows, c < n_cols
// i.e. out is [n_cols x n_rows] with row stride out_stride (in floats): one output row per token.
// Each weight block is decoded once for up to 4 activation rows and weight rows are walked in
// small tiles so they stay in cache across all columns. Single-threaded: callers split the rows
// (or columns) of a product across threads. Results equal vec_dot's up to float summation order.
void vec_dot_rows(QType t, const void* w, size_t w_stride, int n_rows, const void* x,
                  size_t x_stride, int n_cols, float* out, size_t out_stride, int64_t n);

// Implementations of the dot products. The default is the best the CPU supports, unless
// DELTALLM_CPU_FEATURES names a lesser one (scalar: the portable code; avx2). avx512_vnni is the
// AVX2 set with the block formats' kernels in AVX-512 VNNI instructions.
enum class CpuBackend { scalar, avx2, avx512_vnni };
// Which implementation vec_dot uses now: "avx512-vnni", "avx2" or "scalar".
const char* cpu_backend();
// True when this CPU can run the backend (scalar always can).
bool cpu_supports(CpuBackend b);
// Switches the implementation for the whole process (tests compare both); b must be supported.
// Not thread-safe against concurrent dot products.
void set_cpu_backend(CpuBackend b);

}  // namespace dl::quant
