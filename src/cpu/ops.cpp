// The shared building blocks of the forward passes. The attention inner loops have an AVX2/F16C
// version chosen at run time (the library is built for baseline x86-64); the scalar loops define
// the semantics and serve every other CPU.
#include "cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "core/env.h"
#include "core/half.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dl::cpu {

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
    float r = static_cast<float>(1.0 / std::sqrt(ss / double(n) + double(eps)));
    if (w)
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r * w[i];
    else
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r;
}

void rope_angles(int64_t pos, const float* inv_freq, int64_t n_rot, float* cos, float* sin) {
    for (int64_t j = 0; j < n_rot / 2; ++j) {
        // The angle is formed in float (pos * inv_freq) as the reference does, then evaluated
        // exactly.
        float a = static_cast<float>(pos) * inv_freq[j];
        cos[j] = static_cast<float>(std::cos(double(a)));
        sin[j] = static_cast<float>(std::sin(double(a)));
    }
}

void rope_neox(float* x, int64_t n_rot, const float* cos, const float* sin) {
    int64_t h = n_rot / 2;
    for (int64_t j = 0; j < h; ++j) {
        float a = x[j], b = x[j + h];
        x[j] = a * cos[j] - b * sin[j];
        x[j + h] = b * cos[j] + a * sin[j];
    }
}

void rope_interleaved(float* x, int64_t n_rot, const float* cos, const float* sin) {
    for (int64_t j = 0; j < n_rot / 2; ++j) {
        float a = x[2 * j], b = x[2 * j + 1];
        x[2 * j] = a * cos[j] - b * sin[j];
        x[2 * j + 1] = b * cos[j] + a * sin[j];
    }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

void to_f16(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

namespace {

// Row access for the two cache element types.
inline float load(const uint16_t* p) {
    return f16_to_f32(*p);
}
inline float load(const float* p) {
    return *p;
}

template <typename T>
float dot_scalar(const float* q, const T* k, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += q[i] * load(k + i);
    return s;
}

template <typename T>
void axpy_scalar(float a, const T* v, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * load(v + i);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c"))) inline __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
__attribute__((target("avx2,fma,f16c"))) inline __m256 load8(const float* p) {
    return _mm256_loadu_ps(p);
}

template <typename T>
__attribute__((target("avx2,fma,f16c"))) float dot_avx2(const float* q, const T* k, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(k + i), acc);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_hadd_ps(s, s);
    s = _mm_hadd_ps(s, s);
    float r = _mm_cvtss_f32(s);
    for (; i < n; ++i) r += q[i] * load(k + i);
    return r;
}

template <typename T>
__attribute__((target("avx2,fma,f16c"))) void axpy_avx2(float a, const T* v, float* y, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load8(v + i), _mm256_loadu_ps(y + i)));
    for (; i < n; ++i) y[i] += a * load(v + i);
}

bool use_avx2() {
    static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                           __builtin_cpu_supports("f16c") &&
                           env::get_string("DELTALLM_CPU_FEATURES") != "scalar";
    return ok;
}
#endif

template <typename T>
float dot(const float* q, const T* k, int64_t n) {
#if defined(__x86_64__)
    if (use_avx2()) return dot_avx2(q, k, n);
#endif
    return dot_scalar(q, k, n);
}

template <typename T>
void axpy(float a, const T* v, float* y, int64_t n) {
#if defined(__x86_64__)
    if (use_avx2()) return axpy_avx2(a, v, y, n);
#endif
    axpy_scalar(a, v, y, n);
}

template <typename T>
void attend_impl(const float* q, const T* K, const T* V, int64_t row_stride, int64_t n_rows,
                 int64_t head_dim, float scale, float* scores, float* out) {
    float mx = -INFINITY;
    for (int64_t r = 0; r < n_rows; ++r) {
        scores[r] = scale * dot(q, K + r * row_stride, head_dim);
        mx = std::max(mx, scores[r]);
    }
    double sum = 0;
    for (int64_t r = 0; r < n_rows; ++r) {
        scores[r] = std::exp(scores[r] - mx);
        sum += scores[r];
    }
    std::fill(out, out + head_dim, 0.f);
    float inv = static_cast<float>(1.0 / sum);
    for (int64_t r = 0; r < n_rows; ++r) axpy(scores[r] * inv, V + r * row_stride, out, head_dim);
}

}  // namespace

void attend(const float* q, const uint16_t* K, const uint16_t* V, int64_t row_stride,
            int64_t n_rows, int64_t head_dim, float scale, float* scores, float* out) {
    attend_impl(q, K, V, row_stride, n_rows, head_dim, scale, scores, out);
}

void attend(const float* q, const float* K, const float* V, int64_t row_stride, int64_t n_rows,
            int64_t head_dim, float scale, float* scores, float* out) {
    attend_impl(q, K, V, row_stride, n_rows, head_dim, scale, scores, out);
}

}  // namespace dl::cpu
