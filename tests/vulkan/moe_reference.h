// The mixture-of-experts tests' reference routing, shared with the mixture's speed report
// (bench/vk_speed/moe_speed.cpp).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "quant/types.h"

namespace dl::vk::test {

// A case of the window's expert GEMM tests (expert_tiles_test.cpp, expert_sorted_test.cpp): the
// stack's format, the rows computed of each expert, columns, experts, slots a row, window rows,
// and whether the stack is a fused gate and up (2 · rows an expert, the second half read).
struct ExpertTileCase {
    QType type;
    uint32_t rows, cols, n_expert, k, n_rows;
    bool fused;
};
inline std::string expert_tile_case_name(const ExpertTileCase& c) {
    return fmt::format("{}_{}x{}_e{}k{}r{}{}", qtype_name(c.type), c.rows, c.cols, c.n_expert, c.k,
                       c.n_rows, c.fused ? "_fused" : "");
}

// The reference routing of one row: ids by descending logit, the lower index first on a tie;
// softmax over all experts in double; the k renormalised; then sorted by id.
inline void reference_route(const float* logits, uint32_t n, uint32_t k, std::vector<uint32_t>& ids,
                            std::vector<double>& w) {
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
    const double mx = *std::max_element(logits, logits + n);
    double all = 0;
    for (uint32_t e = 0; e < n; ++e) all += std::exp(logits[e] - mx);
    std::vector<std::pair<uint32_t, double>> chosen;
    double sum = 0;
    for (uint32_t j = 0; j < k; ++j) {
        const double p = std::exp(logits[order[j]] - mx) / all;
        chosen.push_back({order[j], p});
        sum += p;
    }
    std::sort(chosen.begin(), chosen.end());
    ids.clear();
    w.clear();
    for (const auto& [id, p] : chosen) {
        ids.push_back(id);
        w.push_back(p / sum);
    }
}

}  // namespace dl::vk::test
