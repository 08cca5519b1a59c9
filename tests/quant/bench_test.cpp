// Speed sanity checks, disabled by default (run with --gtest_also_run_disabled_tests): dot
// product throughput per format and backend, the batched kernel's gain over single dots, and
// quantization speed. They print numbers and assert nothing about time.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <vector>

#include "quant/quant.h"

namespace dl::quant {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(Bench, DISABLED_DotThroughput) {
    const int64_t n = 4096;
    const int rows = 512, cols = 32;
    std::mt19937 rng(1);
    std::normal_distribution<float> g;
    std::vector<float> w(n * rows), x(n * cols);
    for (auto& v : w) v = g(rng);
    for (auto& v : x) v = g(rng);
    for (QType t : {QType::F32, QType::F16, QType::BF16, QType::Q8_0, QType::Q4_0, QType::Q4_K,
                    QType::Q5_K, QType::Q6_K, QType::IQ4_NL, QType::Q3_K, QType::IQ4_XS}) {
        const size_t ws = row_size(t, n), xs = row_size(vec_dot_type(t), n);
        std::vector<uint8_t> wq(ws * rows), xq(xs * cols);
        for (int r = 0; r < rows; ++r) quantize(t, w.data() + r * n, wq.data() + r * ws, n);
        for (int c = 0; c < cols; ++c)
            quantize_activations(t, x.data() + c * n, xq.data() + c * xs, n);
        std::vector<float> out(rows * cols);
        for (CpuBackend b : {CpuBackend::scalar, CpuBackend::avx2}) {
            if (!cpu_supports(b)) continue;
            set_cpu_backend(b);
            auto t0 = std::chrono::steady_clock::now();
            float sink = 0;
            for (int c = 0; c < cols; ++c)
                for (int r = 0; r < rows; ++r)
                    sink += vec_dot(t, wq.data() + r * ws, xq.data() + c * xs, n);
            double single = seconds_since(t0);
            t0 = std::chrono::steady_clock::now();
            vec_dot_rows(t, wq.data(), ws, rows, xq.data(), xs, cols, out.data(), rows, n);
            double batched = seconds_since(t0);
            double gmac = (double)n * rows * cols / 1e9;
            std::printf("  %-7s %-6s vec_dot %6.2f GMAC/s  vec_dot_rows %6.2f GMAC/s (%.1fx)%s\n",
                        std::string(qtype_name(t)).c_str(), cpu_backend(), gmac / single,
                        gmac / batched, single / batched, sink == 12345 ? "!" : "");
        }
    }
    set_cpu_backend(cpu_supports(CpuBackend::avx2) ? CpuBackend::avx2 : CpuBackend::scalar);
}

TEST(Bench, DISABLED_QuantizeSpeed) {
    const int64_t n = 1 << 20;
    std::mt19937 rng(2);
    std::normal_distribution<float> g;
    std::vector<float> x(n);
    for (auto& v : x) v = g(rng);
    std::vector<uint8_t> q(n * 4);
    for (QType t : {QType::Q8_0, QType::Q4_0, QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::Q3_K,
                    QType::Q2_K, QType::IQ4_XS, QType::Q8_K}) {
        auto t0 = std::chrono::steady_clock::now();
        quantize(t, x.data(), q.data(), n);
        std::printf("  %-7s quantize %7.1f M values/s\n", std::string(qtype_name(t)).c_str(),
                    n / seconds_since(t0) / 1e6);
    }
}

}  // namespace
}  // namespace dl::quant
