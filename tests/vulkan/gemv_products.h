// The tiled GEMV tests' CPU products, shared with the GEMV speed reports (bench/vk_speed).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace dl::vk::test {

// The factor 1 / sqrt(mean(x²) + eps) the sums over x before an RMSNorm take.
inline float rms_factor(const std::vector<float>& x) {
    double ss = 0;
    for (float v : x) ss += (double)v * v;
    return (float)(1.0 / std::sqrt(ss / (double)x.size() + 1e-6));
}

// Each row's sum of its values deq times the rounded x, times factor, and the sum of the terms'
// magnitudes (for the tolerance).
struct Products {
    std::vector<double> ref, mag;
};
inline Products products(const std::vector<float>& deq, uint32_t rows, uint32_t cols,
                         const std::vector<float>& x, double factor) {
    Products p{std::vector<double>(rows), std::vector<double>(rows)};
    for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t i = 0; i < cols; ++i) {
            const double v = (double)deq[(size_t)r * cols + i] * x[i] * factor;
            p.ref[r] += v;
            p.mag[r] += std::fabs(v);
        }
    return p;
}

}  // namespace dl::vk::test
