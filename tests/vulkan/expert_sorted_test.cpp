// The expert GEMMs of a window in the experts' order (the NV tiles' form): moe_sort's positions
// of the pairs, moe_gather's F16 rows, the weighted sums that find each slot's output through its
// position (moe_sum, shared_expert_add), all on every device; and gemm_experts_sorted's NV
// cooperative matrix 2 tiles where the device has them, against references written here.
// Outputs are poisoned around what must be written.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/half.h"
#include "moe_reference.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using test::randn;

// A buffer of n halves, each a NaN (0x7e01) that no conversion writes.
constexpr uint16_t kHalfPoison = 0x7e01;
Buffer poisoned_halves(Device& dev, size_t n) {
    const uint64_t bytes = (n * 2 + 3) / 4 * 4;
    Buffer b = dev.create_buffer(bytes, MemoryKind::device);
    dev.fill(b, 0, bytes, 0x7e017e01u);
    return b;
}

// A window's choice: every row picks expert 0 (so it holds more pairs than a tile's 64 when
// rows are many) and k - 1 others at random; the other experts get what is left, some none.
struct Choice {
    uint32_t n_expert, k, n_rows;
    std::vector<std::vector<uint32_t>> ids;  // each row's experts, ascending
    std::vector<uint32_t> route;             // moe_route's words from route_off, then poison
    static constexpr uint32_t route_off = 3;
    uint32_t perm_off = 0, inv_off = 0, tiles_off = 0;

    Choice(uint32_t n_expert_, uint32_t k_, uint32_t n_rows_)
        : n_expert(n_expert_), k(k_), n_rows(n_rows_), ids(n_rows_) {
        std::mt19937 rng(5 + n_expert + n_rows);
        route.assign(route_off + n_rows * 2 * k, 0);
        for (uint32_t r = 0; r < n_rows; ++r) {
            std::vector<uint32_t> pool(n_expert - 1);
            std::iota(pool.begin(), pool.end(), 1u);
            std::shuffle(pool.begin(), pool.end(), rng);
            ids[r] = {0};
            ids[r].insert(ids[r].end(), pool.begin(), pool.begin() + (k - 1));
            std::sort(ids[r].begin(), ids[r].end());
            for (uint32_t j = 0; j < k; ++j) route[route_off + r * 2 * k + j] = ids[r][j];
        }
        const uint32_t n_pairs = n_rows * k;
        perm_off = (uint32_t)route.size() + 2;
        inv_off = perm_off + n_pairs + 3;
        tiles_off = inv_off + n_pairs + 3;
        route.resize(tiles_off + Kernels::expert_tiles_words(n_pairs, n_expert) + 4, test::kPoison);
    }
    uint32_t pairs() const { return n_rows * k; }
};

// moe_sort's positions are the inverse of its order; moe_gather writes each position's row of
// its pair as halves (exactly the rounding of each value), nothing outside; moe_sum and the
// shared expert's add with the experts' sum read each slot's output at its position.
TEST(ExpertSorted, PositionsGatherAndSums) {
    VK_TEST_DEVICE();
    for (auto [n_expert, k, n_rows, cols] :
         {std::tuple{8u, 2u, 70u, 64u}, {256u, 8u, 40u, 256u}, {6u, 3u, 1u, 16u}}) {
        Choice c(n_expert, k, n_rows);
        const uint32_t n_pairs = c.pairs();
        // The window's rows, then (sums) each pair's output in the experts' order.
        const uint32_t x_off = 4;
        std::vector<float> act = randn(x_off + (size_t)n_rows * cols + 4, 3 + cols);
        Buffer ab = test::to_device(dev, act), rb = test::to_device(dev, c.route);
        const uint32_t h_off = 16;  // halves
        const size_t h_halves = h_off + (size_t)n_pairs * cols + 16;
        Buffer hb = poisoned_halves(dev, h_halves);
        test::run(dev, [&](CommandList& cl) {
            K.moe_sort(cl, view(rb), c.route_off, k, n_expert, n_rows, c.perm_off, c.tiles_off,
                       c.inv_off, Kernels::kSortedTilePairs);
            cl.barrier();
            K.moe_gather(cl, view(ab), x_off, cols, k, view(rb), c.perm_off, n_pairs, view(hb),
                         h_off);
        });
        auto got = test::from_device<uint32_t>(dev, rb, c.route.size());
        std::vector<uint32_t> perm(got.begin() + c.perm_off, got.begin() + c.perm_off + n_pairs);
        for (uint32_t pos = 0; pos < n_pairs; ++pos) {
            ASSERT_LT(perm[pos], n_pairs);
            ASSERT_EQ(got[c.inv_off + perm[pos]], pos) << "position of pair " << perm[pos];
        }
        for (uint32_t i = 0; i < 3; ++i) {
            ASSERT_EQ(got[c.perm_off + n_pairs + i], test::kPoison);
            ASSERT_EQ(got[c.inv_off + n_pairs + i], test::kPoison);
        }
        auto halves = test::from_device<uint16_t>(dev, hb, h_halves);
        for (uint32_t i = 0; i < h_off; ++i) ASSERT_EQ(halves[i], kHalfPoison);
        for (size_t i = h_off + (size_t)n_pairs * cols; i < h_halves; ++i)
            ASSERT_EQ(halves[i], kHalfPoison) << "wrote past the rows";
        for (uint32_t pos = 0; pos < n_pairs; ++pos)
            for (uint32_t v = 0; v < cols; ++v)
                ASSERT_EQ(halves[h_off + (size_t)pos * cols + v],
                          f32_to_f16(act[x_off + (size_t)(perm[pos] / k) * cols + v]))
                    << "position " << pos << " value " << v;

        // The sums: n values a slot, each slot's output at its position's row.
        const uint32_t n = 300, out_off = 8, h = out_off + n_pairs * n, xn = h + n_rows * n;
        const uint32_t sh = xn + n_rows * n, w_off = 2;
        std::vector<float> sums = randn(sh + n_rows * n + 4, 17);
        std::vector<float> gate_w = randn(w_off + n, 19, 0.1f);
        std::vector<uint32_t> route = got;  // with the weights of each row's slots
        std::vector<float> wt(n_pairs);
        for (uint32_t r = 0; r < n_rows; ++r)
            for (uint32_t j = 0; j < k; ++j) {
                wt[r * k + j] = 0.1f + 0.05f * (float)((r + 3 * j) % 7);
                std::memcpy(&route[c.route_off + r * 2 * k + k + j], &wt[r * k + j], 4);
            }
        for (bool shared : {false, true}) {
            // The shared expert's add reads the route and positions as floats of the activations.
            std::vector<float> a = sums;
            const uint32_t r_at = (uint32_t)a.size();
            a.resize(r_at + route.size());
            std::memcpy(a.data() + r_at, route.data(), route.size() * 4);
            Buffer sb = test::to_device(dev, a), rb2 = test::to_device(dev, route);
            Buffer wb = test::to_device(dev, gate_w);
            test::run(dev, [&](CommandList& cl) {
                if (shared)
                    K.shared_expert_add(
                        cl, view(wb), w_off, view(sb), xn, sh, h, n, n_rows, Kernels::kNone, 0.f,
                        Kernels::ExpertsSum{k, out_off, r_at + c.route_off, r_at + c.inv_off});
                else
                    K.moe_sum(cl, view(sb), out_off, h, view(rb2), c.route_off, k, n, n_rows,
                              c.inv_off);
            });
            auto out = test::from_device<float>(dev, sb, a.size());
            for (uint32_t i = 0; i < h; ++i)
                ASSERT_EQ(test::bits(out[i]), test::bits(a[i])) << "changed its inputs";
            for (uint32_t i = h + n_rows * n; i < a.size(); ++i)
                ASSERT_EQ(test::bits(out[i]), test::bits(a[i]));
            for (uint32_t r = 0; r < n_rows; ++r) {
                double g = 0;
                for (uint32_t i = 0; i < n; ++i) g += (double)gate_w[w_off + i] * a[xn + r * n + i];
                g = 1 / (1 + std::exp(-g));
                for (uint32_t i = 0; i < n; ++i) {
                    double s = a[h + r * n + i];
                    for (uint32_t j = 0; j < k; ++j) {
                        const uint32_t pos = got[c.inv_off + r * k + j];
                        s += (double)wt[r * k + j] * a[out_off + (size_t)pos * n + i];
                    }
                    if (shared) s += g * a[sh + r * n + i];
                    ASSERT_NEAR(out[h + r * n + i], s, 1e-5 * (1 + std::fabs(s)))
                        << (shared ? "shared add" : "moe_sum") << " row " << r << " value " << i;
                }
            }
        }
    }
}

using test::ExpertTileCase;

class ExpertSortedTiles : public ::testing::TestWithParam<ExpertTileCase> {};

// gemm_experts_sorted over moe_gather's rows: each pair's output at its position, every pair
// against the product of its expert's dequantized rows and its row's halves.
TEST_P(ExpertSortedTiles, PositionsMatchTheReference) {
    VK_TEST_DEVICE();
    const auto [t, rows, cols, n_expert, k, n_rows, fused] = GetParam();
    const uint32_t expert_rows = fused ? 2 * rows : rows, first_row = fused ? rows : 0;
    Choice c(n_expert, k, n_rows);
    const uint32_t n_pairs = c.pairs();
    // The selection: only on the NV tiles, and only past the average of pairs an expert.
    const bool cm2 = variant_built(Variant::nv_coopmat2) &&
                     GemmKernels::gemm_uses_cm2(dev.features(), Variant::nv_coopmat2);
    {
        test::Scoped pairs_scope(K.tuning.expert_cm2_pairs, n_pairs / n_expert);
        EXPECT_EQ(K.experts_sorted_cm2(Variant::nv_coopmat2, t, cols, rows, expert_rows, first_row,
                                       n_pairs, n_expert),
                  cm2);
        EXPECT_FALSE(K.experts_sorted_cm2(Variant::khr_coopmat, t, cols, rows, expert_rows,
                                          first_row, n_pairs, n_expert));
        K.tuning.expert_cm2_pairs = n_pairs / n_expert + 1;
        EXPECT_FALSE(K.experts_sorted_cm2(Variant::nv_coopmat2, t, cols, rows, expert_rows,
                                          first_row, n_pairs, n_expert));
    }
    if (!cm2) GTEST_SKIP() << "no NV cooperative matrix 2 tiles on this device";

    const uint32_t all_rows = expert_rows * n_expert;
    const auto [wq, deq] =
        test::quantize_rows(t, randn((size_t)all_rows * cols, 43 + rows), all_rows, cols);
    Buffer w = test::to_device(dev, wq);
    const uint32_t x_off = 8;
    std::vector<float> act = randn(x_off + (size_t)n_rows * cols, 9 + cols);
    Buffer ab = test::to_device(dev, act), rb = test::to_device(dev, c.route);
    const uint32_t x_rows = n_pairs + Kernels::kSortedTilePairs;
    Buffer hb = poisoned_halves(dev, (size_t)x_rows * cols);
    const uint32_t y_off = 4;
    const size_t n_out = (size_t)n_pairs * rows;
    Buffer y = test::poisoned(dev, y_off + n_out + 4);
    Kernels::ExpertGemv g{.type = t,
                          .w = view(w),
                          .rows = rows,
                          .cols = cols,
                          .n_expert = n_expert,
                          .k = k,
                          .expert_rows = expert_rows,
                          .first_row = first_row,
                          .perm_off = c.perm_off,
                          .route = view(rb),
                          .route_off = c.route_off,
                          .x = view(hb),
                          .x_off = 0,
                          .y = view(y),
                          .y_off = y_off,
                          .n_rows = n_rows};
    // Over the stack's blocks, and over its F16 expansion (as a window reads it).
    Buffer w16 = dev.create_buffer((uint64_t)all_rows * cols * 2, MemoryKind::device);
    for (bool expanded : {false, true}) {
        SCOPED_TRACE(expanded ? "over the F16 expansion" : "over the blocks");
        dev.fill(y, 0, (y_off + n_out + 4) * 4, test::kPoison);
        g.type = expanded ? QType::F16 : t;
        g.w = view(expanded ? w16 : w);
        test::run(dev, [&](CommandList& cl) {
            K.moe_sort(cl, view(rb), c.route_off, k, n_expert, n_rows, c.perm_off, c.tiles_off,
                       c.inv_off, Kernels::kSortedTilePairs);
            cl.barrier();
            K.moe_gather(cl, view(ab), x_off, cols, k, view(rb), c.perm_off, n_pairs, view(hb), 0);
            if (expanded) K.dequant_f16(cl, t, view(w), all_rows, cols, view(w16));
            cl.barrier();
            K.gemm_experts_sorted(cl, g, x_rows, c.tiles_off);
        });
        auto got = test::from_device<uint32_t>(dev, rb, c.route.size());
        auto out = test::from_device<float>(dev, y, y_off + n_out + 4);
        for (uint32_t i = 0; i < y_off; ++i) ASSERT_EQ(test::bits(out[i]), test::kPoison);
        for (uint32_t i = 0; i < 4; ++i)
            ASSERT_EQ(test::bits(out[y_off + n_out + i]), test::kPoison);
        for (uint32_t r = 0; r < n_rows; ++r)
            for (uint32_t j = 0; j < k; ++j) {
                const uint32_t pos = got[c.inv_off + r * k + j];
                ASSERT_LT(pos, n_pairs);
                for (uint32_t row = 0; row < rows; ++row) {
                    const float* wr =
                        deq.data() + ((size_t)c.ids[r][j] * expert_rows + first_row + row) * cols;
                    double s = 0, mag = 0;
                    for (uint32_t v = 0; v < cols; ++v) {
                        const double p = (double)wr[v] *
                                         f16_to_f32(f32_to_f16(act[x_off + (size_t)r * cols + v]));
                        s += p;
                        mag += std::fabs(p);
                    }
                    ASSERT_NEAR(out[y_off + (size_t)pos * rows + row], s, 2e-3 * mag + 1e-5)
                        << qtype_name(t) << " row " << r << " slot " << j << " (expert "
                        << c.ids[r][j] << ", position " << pos << ") out " << row;
                }
            }
    }
}

INSTANTIATE_TEST_SUITE_P(Formats, ExpertSortedTiles,
                         ::testing::Values(
                             // Expert 0 past one tile of 64 pairs, the others a few each.
                             ExpertTileCase{QType::Q4_K, 128, 256, 8, 2, 100, false},
                             ExpertTileCase{QType::Q6_K, 256, 512, 10, 4, 70, false},
                             // The second half of a fused gate-and-up stack.
                             ExpertTileCase{QType::Q4_K, 128, 256, 6, 3, 40, true},
                             // Rows of three blocks; every expert past a tile.
                             ExpertTileCase{QType::Q6_K, 128, 768, 4, 4, 130, false}),
                         [](const auto& info) { return test::expert_tile_case_name(info.param); });

}  // namespace
}  // namespace dl::vk
