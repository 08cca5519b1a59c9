// The expert GEMMs of a prefill window as grouped GEMM tiles (shaders/gemm_experts.comp) and the
// table of tiles moe_sort writes for them, against references written here: a choice in which
// some experts have no pairs and one has more than a tile's 64, every weight format, each slot
// over its row's input and over its own, the second half of a fused gate-and-up stack, inputs at
// a 16-byte aligned offset and at one that is not, outputs poisoned around what must be
// written. The scalar tiles run on every device; the KHR cooperative-matrix tiles and the skinny
// GEMM's grouped form (F16 products, a looser bar) where the device runs them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "moe_reference.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using test::randn;

using test::ExpertTileCase;

class ExpertTiles : public ::testing::TestWithParam<ExpertTileCase> {};

TEST_P(ExpertTiles, SlotsMatchTheReference) {
    VK_TEST_DEVICE();
    const auto [t, rows, cols, n_expert, k, n_rows, fused] = GetParam();
    ASSERT_TRUE(Kernels::experts_supported(t, cols));
    const uint32_t expert_rows = fused ? 2 * rows : rows, first_row = fused ? rows : 0;
    const uint32_t all_rows = expert_rows * n_expert, n_pairs = n_rows * k;
    const auto [wq, deq] =
        test::quantize_rows(t, randn((size_t)all_rows * cols, 41 + rows), all_rows, cols);
    Buffer w = test::to_device(dev, wq);
    // Every row chooses expert 0 (n_rows > 64 pairs: two tiles of it) and k - 1 others from the
    // first half; row 0 the last expert too. The rest have no pairs.
    std::mt19937 rng(11 + n_expert);
    const uint32_t route_off = 3;
    std::vector<uint32_t> route(route_off + n_rows * 2 * k, 0);
    std::vector<std::vector<uint32_t>> ids(n_rows);
    for (uint32_t r = 0; r < n_rows; ++r) {
        std::vector<uint32_t> pool(n_expert / 2 - 1);
        std::iota(pool.begin(), pool.end(), 1u);
        std::shuffle(pool.begin(), pool.end(), rng);
        ids[r] = {0};
        ids[r].insert(ids[r].end(), pool.begin(), pool.begin() + (k - 1));
        if (r == 0 && k > 1) ids[r].back() = n_expert - 1;
        std::sort(ids[r].begin(), ids[r].end());
        for (uint32_t j = 0; j < k; ++j) route[route_off + r * 2 * k + j] = ids[r][j];
    }
    const uint32_t perm_off = (uint32_t)route.size() + 2;
    const uint32_t tiles_off = perm_off + n_pairs + 1;
    const uint32_t table = Kernels::expert_tiles_words(n_pairs, n_expert);
    route.resize(tiles_off + table + 4, test::kPoison);

    // The scalar tiles, the KHR tiles, and the skinny GEMM's grouped form (where it runs: over
    // experts of whole tiles of rows, x at a multiple of 4 floats; elsewhere the KHR tiles).
    // (The skinny form also with Q4_K decoded to halves by bit operations,
    // Tuning::gemm_skinny_half.)
    std::vector<std::tuple<Variant, bool, bool>> forms = {{Variant::scalar, false, false}};
    if (variant_built(Variant::khr_coopmat) &&
        GemmKernels::gemm_uses_khr(dev.features(), Variant::khr_coopmat))
        forms.push_back({Variant::khr_coopmat, false, false});
    if (GemmKernels::gemm_uses_skinny(dev.features(), Variant::khr_coopmat)) {
        forms.push_back({Variant::khr_coopmat, true, false});
        forms.push_back({Variant::khr_coopmat, true, true});
    }
    for (const auto& [v, skinny, half] : forms)
        for (bool own : {false, true})
            for (uint32_t x_off : {8u, 5u}) {
                test::Scoped skinny_scope(K.tuning.expert_skinny, skinny);
                test::Scoped half_scope(K.tuning.gemm_skinny_half, half);
                const uint32_t n_x = own ? n_pairs : n_rows;
                std::vector<float> x = randn(x_off + (size_t)n_x * cols, 7 + cols + x_off);
                Buffer xb = test::to_device(dev, x);
                const uint32_t y_off = 6;
                const size_t n_out = (size_t)n_pairs * rows;
                Buffer y = test::poisoned(dev, y_off + n_out + 4);
                Buffer routes = test::to_device(dev, route);
                const Kernels::ExpertGemv g{.type = t,
                                            .w = view(w),
                                            .rows = rows,
                                            .cols = cols,
                                            .n_expert = n_expert,
                                            .k = k,
                                            .expert_rows = expert_rows,
                                            .first_row = first_row,
                                            .perm_off = perm_off,
                                            .route = view(routes),
                                            .route_off = route_off,
                                            .x = view(xb),
                                            .x_off = x_off,
                                            .x_per_slot = own,
                                            .y = view(y),
                                            .y_off = y_off,
                                            .n_rows = n_rows};
                const bool whole_tiles = (t == QType::Q4_K || t == QType::Q6_K) &&
                                         expert_rows % 32 == 0 && first_row % 32 == 0;
                EXPECT_EQ(K.expert_skinny(v, g), skinny && whole_tiles && x_off % 4 == 0);
                test::run(dev, [&](CommandList& cl) {
                    K.moe_sort(cl, view(routes), route_off, k, n_expert, n_rows, perm_off,
                               tiles_off);
                    cl.barrier();
                    K.gemm_experts(cl, v, g, tiles_off);
                });
                // The table: each expert's run of pairs cut into tiles of at most 64, in order.
                auto got = test::from_device<uint32_t>(dev, routes, route.size());
                std::vector<uint32_t> count(n_expert, 0);
                for (uint32_t r = 0; r < n_rows; ++r)
                    for (uint32_t e : ids[r]) ++count[e];
                std::vector<uint32_t> want = {0};
                for (uint32_t e = 0, s = 0; e < n_expert; s += count[e++])
                    for (uint32_t a = 0; a < count[e]; a += Kernels::kExpertTileRows) {
                        want.insert(
                            want.end(),
                            {e, s + a, s + std::min(a + Kernels::kExpertTileRows, count[e])});
                        ++want[0];
                    }
                ASSERT_LE(want.size(), table);
                for (size_t i = 0; i < want.size(); ++i)
                    ASSERT_EQ(got[tiles_off + i], want[i]) << "table word " << i;
                for (uint32_t i = 0; i < 4; ++i)
                    ASSERT_EQ(got[tiles_off + table + i], test::kPoison) << "wrote past the table";

                const bool f16 = v == Variant::khr_coopmat;
                const double tol = f16 ? 2e-3 : 1e-5;
                auto out = test::from_device<float>(dev, y, y_off + n_out + 4);
                for (uint32_t i = 0; i < y_off; ++i) ASSERT_EQ(test::bits(out[i]), test::kPoison);
                for (uint32_t i = 0; i < 4; ++i)
                    ASSERT_EQ(test::bits(out[y_off + n_out + i]), test::kPoison);
                for (uint32_t r = 0; r < n_rows; ++r)
                    for (uint32_t j = 0; j < k; ++j) {
                        const float* in = x.data() + x_off + (size_t)(own ? r * k + j : r) * cols;
                        for (uint32_t row = 0; row < rows; ++row) {
                            const float* wr =
                                deq.data() +
                                ((size_t)ids[r][j] * expert_rows + first_row + row) * cols;
                            double s = 0, mag = 0;
                            for (uint32_t c = 0; c < cols; ++c) {
                                s += (double)wr[c] * in[c];
                                mag += std::fabs((double)wr[c] * in[c]);
                            }
                            const size_t o = ((size_t)r * k + j) * rows + row;
                            ASSERT_NEAR(out[y_off + o], s, tol * mag + 1e-5)
                                << qtype_name(t) << " " << variant_name(v)
                                << (skinny ? " skinny" : "") << (half ? " half" : "") << " row "
                                << r << " slot " << j << " (expert " << ids[r][j] << ") out " << row
                                << " own " << own << " x_off " << x_off;
                        }
                    }
            }
}

INSTANTIATE_TEST_SUITE_P(Formats, ExpertTiles,
                         ::testing::Values(ExpertTileCase{QType::F32, 40, 64, 6, 2, 66, false},
                                           ExpertTileCase{QType::F16, 33, 96, 8, 3, 5, false},
                                           ExpertTileCase{QType::Q8_0, 130, 96, 8, 2, 70, false},
                                           ExpertTileCase{QType::Q4_0, 20, 64, 6, 1, 3, false},
                                           ExpertTileCase{QType::Q4_K, 200, 256, 16, 4, 70, false},
                                           ExpertTileCase{QType::Q4_K, 64, 256, 8, 3, 9, true},
                                           ExpertTileCase{QType::Q5_K, 7, 256, 6, 2, 4, false},
                                           ExpertTileCase{QType::Q6_K, 33, 512, 10, 4, 20, false},
                                           // Experts of whole tiles of rows (the skinny GEMM's
                                           // grouped form): pairs a few, a few dozen and past a
                                           // table tile's 64 for an expert.
                                           ExpertTileCase{QType::Q6_K, 64, 512, 10, 4, 20, false},
                                           ExpertTileCase{QType::Q4_K, 32, 256, 8, 2, 100, false},
                                           ExpertTileCase{QType::Q4_K, 96, 512, 8, 4, 70, false}),
                         [](const auto& info) { return test::expert_tile_case_name(info.param); });

}  // namespace
}  // namespace dl::vk
