// The byte order of a weight matrix on the device. Every block format keeps its GGUF rows byte
// for byte except Q6_K, whose rows the driver lays out by field: a row of nb blocks becomes the
// nb 128-byte runs of low nibbles (ql), then the nb 64-byte runs of high bits (qh), the nb
// 16-byte runs of scales and the nb f16 d, the same 210·nb bytes. A GGUF Q6_K block is 210
// bytes, so its fields start at every even offset and the kernels assembled each 8-byte run
// from three word loads; laid out by field, a row whose length is a multiple of 16 bytes (a
// multiple of 2048 values) has every run 16-byte aligned, and the eight threads of a block read
// one 16-byte vector of nibbles and one of high bits each. On an H200:
// the 248k-row Q6_K head GEMV 294 -> 249 us, a 4096 x 12288 one 81 -> 57 us, decode +3 % on
// Qwen3.5-9B Q4_K_M (docs/PERF.md 2026-11-30, late). Shaders that read Q6_K read this layout:
// blocks.glsl and gemv.comp through shaders/q6_k_layout.glsl, gemm_cm2.comp in its own words.
#pragma once

#include <cstdint>

#include "quant/types.h"

namespace dl::vk {

// True where the device holds rows of type t in another byte order than the GGUF file.
bool relaid(QType t);

// `rows` rows of `cols` values of type t from their GGUF bytes (src) into the device's byte
// order (dst, as many bytes; src and dst must not overlap).
void to_device_layout(QType t, uint32_t cols, uint64_t rows, const uint8_t* src, uint8_t* dst);

}  // namespace dl::vk
