// Dispatch of the CPU dot products: activation formats, the choice between scalar, AVX2 and
// AVX-512 VNNI kernels (CPU features and DELTALLM_CPU_FEATURES), and the tiled multi-row,
// multi-column loop matrix products use for prefill.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/env.h"
#include "core/error.h"
#include "quant/kernels.h"
#include "quant/quant.h"

namespace dl::quant {

namespace {

CpuBackend initial_backend() {
    const std::string want = env::get_string("DELTALLM_CPU_FEATURES");
    if (want == "scalar") return CpuBackend::scalar;
    if (want == "avx2")
        return cpu_supports(CpuBackend::avx2) ? CpuBackend::avx2 : CpuBackend::scalar;
    if (want != "auto" && !want.empty())
        fail("DELTALLM_CPU_FEATURES='{}' is not understood (use 'auto', 'avx2' or 'scalar')", want);
    for (CpuBackend b : {CpuBackend::avx512_vnni, CpuBackend::avx2})
        if (cpu_supports(b)) return b;
    return CpuBackend::scalar;
}

std::atomic<int>& backend_state() {
    static std::atomic<int> b{(int)initial_backend()};
    return b;
}

CpuBackend backend() {
    return (CpuBackend)backend_state().load(std::memory_order_relaxed);
}

// The backend's kernel for t, else the next lesser backend's.
kernels::DotColsFn pick(QType t) {
    const CpuBackend b = backend();
    if (b == CpuBackend::avx512_vnni)
        if (auto f = kernels::avx512_vnni(t)) return f;
    if (b != CpuBackend::scalar)
        if (auto f = kernels::avx2(t)) return f;
    return kernels::scalar(t);
}

}  // namespace

bool cpu_supports(CpuBackend b) {
    if (b == CpuBackend::scalar) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c") && kernels::avx2(QType::F32) != nullptr;
    if (b == CpuBackend::avx2) return avx2;
    return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
           kernels::avx512_vnni(QType::Q4_K) != nullptr;
#else
    return false;
#endif
}

const char* cpu_backend() {
    switch (backend()) {
        case CpuBackend::avx512_vnni:
            return "avx512-vnni";
        case CpuBackend::avx2:
            return "avx2";
        default:
            return "scalar";
    }
}

void set_cpu_backend(CpuBackend b) {
    DL_ASSERT(cpu_supports(b));
    backend_state().store((int)b);
}

QType vec_dot_type(QType t) {
    switch (t) {
        case QType::F32:
        case QType::F16:
        case QType::BF16:
            return QType::F32;
        case QType::Q4_0:
        case QType::Q5_0:
        case QType::Q8_0:
        case QType::IQ4_NL:
            return QType::Q8_0;
        case QType::Q4_1:
        case QType::Q5_1:
            return QType::Q8_1;
        case QType::Q2_K:
        case QType::Q3_K:
        case QType::Q4_K:
        case QType::Q5_K:
        case QType::Q6_K:
        case QType::IQ4_XS:
            return QType::Q8_K;
        default:
            fail("no dot product for tensors of type {}", qtype_name(t));
    }
}

bool can_dot(QType t) {
    return kernels::scalar(t) != nullptr;
}

void quantize_activations(QType t, const float* x, void* dst, int64_t n) {
    QType a = vec_dot_type(t);
    DL_ASSERT(row_ok(a, n) && row_ok(t, n));
    if (a == QType::F32) {
        std::memcpy(dst, x, (size_t)n * sizeof(float));
        return;
    }
    if (backend() != CpuBackend::scalar)
        if (auto f = kernels::avx2_quantize(a)) return f(x, dst, n);
    quantize(a, x, dst, n);
}

float vec_dot(QType t, const void* w_row, const void* x, int64_t n) {
    DL_ASSERT(row_ok(t, n));
    auto f = pick(t);
    DL_ASSERT(f != nullptr);
    float out;
    f(w_row, x, 0, 1, &out, n);
    return out;
}

float vec_dot_reference(QType t, const void* w_row, const void* x, int64_t n) {
    DL_ASSERT(row_ok(t, n));
    auto f = kernels::scalar(t);
    DL_ASSERT(f != nullptr);
    float out;
    f(w_row, x, 0, 1, &out, n);
    return out;
}

void vec_dot_rows(QType t, const void* w, size_t w_stride, int n_rows, const void* x,
                  size_t x_stride, int n_cols, float* out, size_t out_stride, int64_t n) {
    DL_ASSERT(row_ok(t, n) && n_rows >= 0 && n_cols >= 0);
    auto f = pick(t);
    DL_ASSERT(f != nullptr);
    const char* wb = static_cast<const char*>(w);
    const char* xb = static_cast<const char*>(x);
    // A tile of weight rows small enough to stay in L2 while every column passes over it.
    const size_t row_bytes = row_size(t, n);
    const int tile = (int)std::clamp<size_t>((256u << 10) / std::max<size_t>(row_bytes, 1), 1, 64);
    float tmp[kernels::kMaxCols];
    for (int r0 = 0; r0 < n_rows; r0 += tile) {
        const int r1 = std::min(n_rows, r0 + tile);
        for (int c0 = 0; c0 < n_cols; c0 += kernels::kMaxCols) {
            const int nc = std::min(kernels::kMaxCols, n_cols - c0);
            for (int r = r0; r < r1; ++r) {
                f(wb + (size_t)r * w_stride, xb + (size_t)c0 * x_stride, x_stride, nc, tmp, n);
                for (int c = 0; c < nc; ++c) out[(size_t)(c0 + c) * out_stride + r] = tmp[c];
            }
        }
    }
}

}  // namespace dl::quant
