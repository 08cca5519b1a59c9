// What the mixture-of-experts speed reports share (moe_speed.cpp, moe_rows_speed.cpp): a host
// dot product, random choices of experts, and the forms of the batched GEMV's switches.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "speed.h"

namespace dl::vk {

// The double dot product of n values of w and x, and the sum of its terms' magnitudes.
inline std::pair<double, double> dot_and_magnitude(const float* w, const float* x, uint32_t n) {
    double dot = 0, mag = 0;
    for (uint32_t c = 0; c < n; ++c) {
        dot += (double)w[c] * x[c];
        mag += std::fabs((double)w[c] * x[c]);
    }
    return {dot, mag};
}

// Each of n_rows rows' choice of k distinct experts of n_expert at random, in ascending order (as
// moe_route writes them): row r's at [r · k ..].
inline std::vector<uint32_t> random_choice(std::mt19937& rng, uint32_t n_rows, uint32_t n_expert,
                                           uint32_t k) {
    std::vector<uint32_t> ids((size_t)n_rows * k), pool(n_expert);
    for (uint32_t r = 0; r < n_rows; ++r) {
        std::iota(pool.begin(), pool.end(), 0u);
        std::shuffle(pool.begin(), pool.end(), rng);
        std::sort(pool.begin(), pool.begin() + k);
        std::copy(pool.begin(), pool.begin() + k, ids.begin() + (size_t)r * k);
    }
    return ids;
}

// The expert GEMVs' forms (the batched GEMV's switches): by the rule, then its weight rows a
// workgroup, its threads, and each slice decoded once.
struct BatchForm {
    uint32_t rows = 0, threads = 0;
    bool once = false;
    std::string name() const {
        if (!rows && !threads && !once) return "";
        return fmt::format(" (rows {}, threads {}{})", rows, threads, once ? ", decoded once" : "");
    }
};
inline std::vector<BatchForm> all_batch_forms() {
    return {{},
            {1, 0, false},
            {2, 0, false},
            {4, 0, false},
            {8, 0, false},
            {0, 32, false},
            {0, 128, false},
            {0, 256, false},
            {2, 128, false},
            {0, 0, true}};
}
// The tuning of a form, for as long as it lives.
struct BatchFormScope {
    BatchFormScope(Kernels& K, const BatchForm& f)
        : rows(K.tuning.gemv_batch_rows, f.rows),
          threads(K.tuning.gemv_batch_threads, f.threads),
          once(K.tuning.gemv_batch_decode_once, f.once) {}
    test::Scoped<uint32_t> rows, threads;
    test::Scoped<bool> once;
};

}  // namespace dl::vk
