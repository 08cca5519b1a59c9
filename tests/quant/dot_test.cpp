// CPU dot products: the vectorised kernels against the scalar reference (only float summation
// order may differ), the reference against dequantized floats, the batched entry point against
// single dot products, and activation quantization error within its worst-case bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/quant.h"

namespace dl::quant {
namespace {

const QType kDotTypes[] = {QType::F32,  QType::F16,  QType::BF16, QType::Q4_0,   QType::Q4_1,
                           QType::Q5_0, QType::Q5_1, QType::Q8_0, QType::Q2_K,   QType::Q3_K,
                           QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::IQ4_NL, QType::IQ4_XS};

const CpuBackend kBackends[] = {CpuBackend::scalar, CpuBackend::avx2, CpuBackend::avx512_vnni};

// The backend the process starts with: the best the CPU supports.
CpuBackend best_backend() {
    for (CpuBackend b : {CpuBackend::avx512_vnni, CpuBackend::avx2})
        if (cpu_supports(b)) return b;
    return CpuBackend::scalar;
}

std::vector<float> gaussian(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> x(n);
    for (auto& v : x) v = g(rng);
    return x;
}

struct Prepared {
    std::vector<uint8_t> w;  // weight row(s) in type t
    std::vector<float> wf;   // the same, dequantized
    std::vector<uint8_t> x;  // activations in vec_dot_type(t)
    std::vector<float> xf;   // the same, dequantized
};

Prepared prepare(QType t, int64_t n, int rows, int cols, uint32_t seed) {
    Prepared p;
    auto wsrc = gaussian(n * rows, seed);
    auto xsrc = gaussian(n * cols, seed + 1);
    p.w.resize(row_size(t, n) * rows);
    p.wf.resize(n * rows);
    for (int r = 0; r < rows; ++r) {
        quantize(t, wsrc.data() + r * n, p.w.data() + r * row_size(t, n), n);
        dequantize(t, p.w.data() + r * row_size(t, n), p.wf.data() + r * n, n);
    }
    QType a = vec_dot_type(t);
    p.x.resize(row_size(a, n) * cols);
    p.xf.resize(n * cols);
    for (int c = 0; c < cols; ++c) {
        quantize_activations(t, xsrc.data() + c * n, p.x.data() + c * row_size(a, n), n);
        dequantize(a, p.x.data() + c * row_size(a, n), p.xf.data() + c * n, n);
    }
    return p;
}

// Tolerance for two float evaluations of the same exact sum in different orders: a few ulps of the
// sum of magnitudes.
double order_tol(const float* w, const float* x, int64_t n) {
    double mag = 0;
    for (int64_t i = 0; i < n; ++i) mag += std::fabs((double)w[i] * x[i]);
    return 1e-5 * mag + 1e-30;
}

class DotTest : public ::testing::TestWithParam<QType> {};

// The scalar reference computes dot(dequantize(w), dequantize(x)).
TEST_P(DotTest, ReferenceMatchesDequantized) {
    QType t = GetParam();
    for (int64_t n : {block_size(t), (int64_t)256 * 17}) {
        auto p = prepare(t, n, 1, 1, 11);
        double exact = 0;
        for (int64_t i = 0; i < n; ++i) exact += (double)p.wf[i] * p.xf[i];
        float r = vec_dot_reference(t, p.w.data(), p.x.data(), n);
        EXPECT_NEAR(r, exact, order_tol(p.wf.data(), p.xf.data(), n))
            << qtype_name(t) << " n=" << n;
    }
}

// Every implementation the CPU offers equals the reference up to summation order.
TEST_P(DotTest, BackendsMatchReference) {
    QType t = GetParam();
    for (CpuBackend b : kBackends) {
        if (!cpu_supports(b)) continue;
        set_cpu_backend(b);
        const int64_t smallest = block_size(t) == 1 ? 37 : block_size(t);
        for (int64_t n : {smallest, (int64_t)256 * 9, (int64_t)4096}) {
            if (!row_ok(t, n)) continue;
            auto p = prepare(t, n, 1, 1, 100 + (uint32_t)n);
            float r = vec_dot_reference(t, p.w.data(), p.x.data(), n);
            float v = vec_dot(t, p.w.data(), p.x.data(), n);
            EXPECT_NEAR(v, r, order_tol(p.wf.data(), p.xf.data(), n))
                << qtype_name(t) << " " << cpu_backend() << " n=" << n;
        }
    }
    set_cpu_backend(best_backend());
}

// vec_dot_rows gives every (row, column) product at the documented place, for column counts
// around the kernel width and with strided output; cells outside are left alone.
TEST_P(DotTest, RowsMatchSingleDots) {
    QType t = GetParam();
    const int64_t n = 512;
    const int rows = 7;
    for (CpuBackend b : kBackends) {
        if (!cpu_supports(b)) continue;
        set_cpu_backend(b);
        for (int cols : {1, 3, 4, 5, 8, 9, 13, 17}) {
            auto p = prepare(t, n, rows, cols, 7 + cols);
            const size_t ws = row_size(t, n), xs = row_size(vec_dot_type(t), n);
            const size_t out_stride = rows + 3;
            std::vector<float> out(out_stride * cols, NAN);
            vec_dot_rows(t, p.w.data(), ws, rows, p.x.data(), xs, cols, out.data(), out_stride, n);
            for (int c = 0; c < cols; ++c) {
                for (int r = 0; r < rows; ++r) {
                    float ref = vec_dot_reference(t, p.w.data() + r * ws, p.x.data() + c * xs, n);
                    EXPECT_NEAR(out[c * out_stride + r], ref,
                                order_tol(p.wf.data() + r * n, p.xf.data() + c * n, n))
                        << qtype_name(t) << " " << cpu_backend() << " r=" << r << " c=" << c;
                }
                for (size_t r = rows; r < out_stride; ++r)
                    EXPECT_TRUE(std::isnan(out[c * out_stride + r]));
            }
        }
    }
    set_cpu_backend(best_backend());
}

// Weight blocks of random bytes (every scale, min and high-bit pattern, the extreme values
// included) against activations at the ends of the int8 range: each backend equals the
// reference. The blocks' float scales are set to ordinary values, so only the integer parts are
// random.
TEST(Dot, RandomBlocksMatchReference) {
    const int64_t n = 1024;
    std::mt19937 rng(77);
    for (QType t :
         {QType::Q4_0, QType::Q8_0, QType::IQ4_NL, QType::Q4_K, QType::Q5_K, QType::Q6_K}) {
        const size_t ws = row_size(t, n);
        std::vector<uint8_t> w(ws);
        for (auto& b : w) b = (uint8_t)rng();
        // The fp16 scales: d (and dmin) at each block's start, Q6_K's d at its end.
        const size_t bb = row_size(t, block_size(t));
        const uint16_t d16 = 0x2C00, dmin16 = 0x2800;  // 1/16, 1/32
        for (size_t b0 = 0; b0 < ws; b0 += bb) {
            if (t == QType::Q6_K) {
                std::memcpy(w.data() + b0 + bb - 2, &d16, 2);
            } else {
                std::memcpy(w.data() + b0, &d16, 2);
                if (t == QType::Q4_K || t == QType::Q5_K)
                    std::memcpy(w.data() + b0 + 2, &dmin16, 2);
            }
        }
        std::vector<float> wf(n);
        dequantize(t, w.data(), wf.data(), n);
        // Activations: +-1 scaled to +-127 in every block, with a run of maxima of one sign.
        std::vector<float> xsrc(n);
        for (int64_t i = 0; i < n; ++i) xsrc[i] = i % 97 < 40 ? 1.f : (rng() & 1 ? 1.f : -1.f);
        const QType a = vec_dot_type(t);
        std::vector<uint8_t> x(row_size(a, n));
        std::vector<float> xf(n);
        quantize_activations(t, xsrc.data(), x.data(), n);
        dequantize(a, x.data(), xf.data(), n);
        const float ref = vec_dot_reference(t, w.data(), x.data(), n);
        for (CpuBackend b : kBackends) {
            if (!cpu_supports(b)) continue;
            set_cpu_backend(b);
            std::vector<float> out(8, NAN);
            std::vector<uint8_t> x8;
            for (int c = 0; c < 8; ++c) x8.insert(x8.end(), x.begin(), x.end());
            vec_dot_rows(t, w.data(), ws, 1, x8.data(), x.size(), 8, out.data(), 1, n);
            for (int c = 0; c < 8; ++c)
                EXPECT_NEAR(out[c], ref, order_tol(wf.data(), xf.data(), n))
                    << qtype_name(t) << " " << cpu_backend() << " column " << c;
        }
        set_cpu_backend(best_backend());
    }
}

// Against float activations the only extra error is the activation rounding: at most half a step
// of the activation block's scale per element, i.e. |err| <= sum_i |w_i| * d_block(i) / 2, with
// d_block = max|x| / 127 over the activation block (Q8_0/Q8_1: 32, Q8_K: 256 elements).
TEST_P(DotTest, CloseToFloatDot) {
    QType t = GetParam();
    const int64_t n = 2048;
    auto xsrc = gaussian(n, 4242);
    auto p = prepare(t, n, 1, 1, 5);
    std::vector<uint8_t> xq(row_size(vec_dot_type(t), n));
    quantize_activations(t, xsrc.data(), xq.data(), n);
    const int64_t ab = std::max<int64_t>(block_size(vec_dot_type(t)), 1);
    double exact = 0, bound = 0;
    for (int64_t b0 = 0; b0 < n; b0 += ab) {
        float amax = 0;
        for (int64_t i = b0; i < b0 + ab; ++i) amax = std::max(amax, std::fabs(xsrc[i]));
        // fp16 storage of the Q8_0/Q8_1 scale adds a relative 2^-11 on top of the half step
        const double step =
            vec_dot_type(t) == QType::F32 ? 0 : amax / 127.0 * (0.5 + 127 * 0x1p-11);
        for (int64_t i = b0; i < b0 + ab; ++i) {
            exact += (double)p.wf[i] * xsrc[i];
            bound += std::fabs(p.wf[i]) * step;
        }
    }
    float v = vec_dot(t, p.w.data(), xq.data(), n);
    EXPECT_NEAR(v, exact, bound + order_tol(p.wf.data(), xsrc.data(), n)) << qtype_name(t);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DotTest, ::testing::ValuesIn(kDotTypes),
                         [](const auto& info) { return std::string(qtype_name(info.param)); });

TEST(Dot, ActivationTypes) {
    EXPECT_EQ(vec_dot_type(QType::F16), QType::F32);
    EXPECT_EQ(vec_dot_type(QType::Q4_0), QType::Q8_0);
    EXPECT_EQ(vec_dot_type(QType::IQ4_NL), QType::Q8_0);
    EXPECT_EQ(vec_dot_type(QType::Q5_1), QType::Q8_1);
    EXPECT_EQ(vec_dot_type(QType::Q4_K), QType::Q8_K);
    EXPECT_EQ(vec_dot_type(QType::IQ4_XS), QType::Q8_K);
    EXPECT_FALSE(can_dot(QType::IQ2_XXS));
    EXPECT_TRUE(can_dot(QType::Q6_K));
}

TEST(Dot, BackendName) {
    if (cpu_supports(CpuBackend::avx2)) {
        set_cpu_backend(CpuBackend::avx2);
        EXPECT_STREQ(cpu_backend(), "avx2");
    }
    if (cpu_supports(CpuBackend::avx512_vnni)) {
        set_cpu_backend(CpuBackend::avx512_vnni);
        EXPECT_STREQ(cpu_backend(), "avx512-vnni");
    }
    set_cpu_backend(CpuBackend::scalar);
    EXPECT_STREQ(cpu_backend(), "scalar");
    set_cpu_backend(best_backend());
}

// The vectorised activation quantizers write the same bytes as the scalar ones.
TEST(Dot, ActivationQuantizersIdentical) {
    if (!cpu_supports(CpuBackend::avx2)) GTEST_SKIP() << "no AVX2";
    auto x = gaussian(4096, 8);
    x[5] = 0, x[700] = 1e-30f, x[1000] = -50;          // a zero, a denormal-scale value, an outlier
    for (int i = 2048; i < 2048 + 256; ++i) x[i] = 0;  // an all-zero Q8_K block
    for (QType t : {QType::Q4_0, QType::Q4_K, QType::Q4_1}) {
        std::vector<uint8_t> a(row_size(vec_dot_type(t), 4096)), b(a.size());
        set_cpu_backend(CpuBackend::scalar);
        quantize_activations(t, x.data(), a.data(), 4096);
        set_cpu_backend(CpuBackend::avx2);
        quantize_activations(t, x.data(), b.data(), 4096);
        EXPECT_EQ(a, b) << qtype_name(vec_dot_type(t));
    }
}

// A NaN scale in the weights must reach the result (no kernel may silently skip a block).
TEST(Dot, NaNPropagates) {
    const uint16_t nan16 = 0x7E00;
    for (CpuBackend be : kBackends) {
        if (!cpu_supports(be)) continue;
        set_cpu_backend(be);
        for (QType t :
             {QType::F16, QType::Q8_0, QType::Q4_0, QType::Q4_K, QType::Q5_K, QType::Q6_K}) {
            auto x = gaussian(512, 3);
            auto w = gaussian(512, 4);
            std::vector<uint8_t> wq(row_size(t, 512)), xq(row_size(vec_dot_type(t), 512));
            quantize(t, w.data(), wq.data(), 512);
            quantize_activations(t, x.data(), xq.data(), 512);
            // the fp16 d of the second 256-element block (element 300 for F16)
            size_t at = t == QType::F16    ? 600
                        : t == QType::Q6_K ? row_size(t, 256) + 208
                                           : row_size(t, 256);
            std::memcpy(wq.data() + at, &nan16, 2);
            EXPECT_TRUE(std::isnan(vec_dot(t, wq.data(), xq.data(), 512)))
                << qtype_name(t) << " " << cpu_backend();
        }
    }
    set_cpu_backend(best_backend());
}

}  // namespace
}  // namespace dl::quant
