// Building blocks of the CPU forward passes that every architecture shares: RMS norm, rotary
// embedding (NeoX halves and interleaved pairs), SwiGLU, and causal attention of one query head
// over a KV cache held in f16 or f32.
#pragma once

#include <cstdint>

namespace dl::cpu {

// y = x / sqrt(mean(x^2) + eps) * w (w may be null: no scale). y may be x.
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps);

// cos/sin of pos * inv_freq[j] (model/rope.h) for the n_rot/2 pairs.
void rope_angles(int64_t pos, const float* inv_freq, int64_t n_rot, float* cos, float* sin);
// Rotates the first n_rot dims of x; NeoX pairs are (j, j + n_rot/2), interleaved pairs are
// (2j, 2j + 1). Dims from n_rot on pass through.
void rope_neox(float* x, int64_t n_rot, const float* cos, const float* sin);
void rope_interleaved(float* x, int64_t n_rot, const float* cos, const float* sin);

inline float sigmoid(float x) {
    return 1.f / (1.f + __builtin_expf(-x));
}
inline float silu(float x) {
    return x * sigmoid(x);
}
// out[i] = silu(gate[i]) * up[i]; out may be gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// Rows of a KV cache: f16 (the default, half the memory) or f32 (exact, for parity runs).
// One query head attends causally to rows [0, n_rows) of its key/value head:
//   out = softmax(scale * q . K[r]) . V[r]
// K and V point at the head's first element of row 0; consecutive rows are row_stride elements
// apart. scores is scratch of n_rows floats.
void attend(const float* q, const uint16_t* K, const uint16_t* V, int64_t row_stride,
            int64_t n_rows, int64_t head_dim, float scale, float* scores, float* out);
void attend(const float* q, const float* K, const float* V, int64_t row_stride, int64_t n_rows,
            int64_t head_dim, float scale, float* scores, float* out);

// f32 -> f16 rows for the cache (round to nearest even).
void to_f16(const float* x, uint16_t* y, int64_t n);

}  // namespace dl::cpu
