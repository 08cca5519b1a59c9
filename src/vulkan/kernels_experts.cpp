// Launchers of the mixture-of-experts kernels (see kernels_experts.h). Push-constant layouts
// mirror the shaders.
#include "vulkan/kernels_experts.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "vulkan/kernels_gemm.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {

namespace {

struct RoutePush {
    uint32_t n_expert, k, x_off, route_off;
};
struct RouterPush {
    uint32_t n_expert, k, n_embd, xn_off, logit_off, route_off, counter_idx, gate_off;
};
struct ExpertGemvPush {
    uint32_t ncols, nrows, row_bytes, x_off, y_off, mode, nvec, span;
    uint32_t k, route_off, x_per_slot, sum, expert_rows, first_row, perm_off, up_off;
    uint32_t shared_off, gate_off;
};
struct SortPush {
    uint32_t n_pairs, k, n_expert, route_off, perm_off, tile_rows, tiles_off, inv_off;
};
struct GatherPush {
    uint32_t cols, k, x_off, perm_off, h_off;
};
// gemm_experts_cm2.comp's.
struct SortedGemmPush {
    uint32_t k_cols, n, row_bytes, x_off, x_rows, y_off, expert_rows, first_row, tiles_off;
};
// gemm_experts.comp's and the skinny GEMM's grouped form's (gemm_skinny.comp, EXPERTS).
struct ExpertGemmPush {
    uint32_t k_cols, n, row_bytes, x_off, y_off, k, x_per_slot, expert_rows, first_row, perm_off,
        tiles_off;
};
// The most tiles a table of tiles of up to `rows` pairs may have: one for each `rows` pairs and
// one more for each expert that may start one.
uint32_t max_expert_tiles(uint32_t n_pairs, uint32_t n_expert,
                          uint32_t rows = ExpertKernels::kExpertTileRows) {
    return (n_pairs + rows - 1) / rows + std::min(n_pairs, n_expert);
}
struct SumPush {
    uint32_t n, k, out_off, h_off, route_off, inv_off;
};
struct SharedAddPush {
    uint32_t n, w_off, xn_off, shared_off, h_off, norm_off;
    float eps;
    uint32_t k, down_off, route_off, inv_off;
};

}  // namespace

// The top-k's pipeline name ("moe_route" or "moe_router") for n_expert over wg threads: with
// subgroup arithmetic each thread holds up to 4 experts' logits (moe_topk.glsl).
std::string ExpertKernels::route_kernel(const char* name, uint32_t n_expert, uint32_t k,
                                        uint32_t wg) const {
    if (k == 0 || k > kMaxUsed || k > n_expert)
        fail("a router choosing {} of {} experts (the device takes 1 to {})", k, n_expert,
             kMaxUsed);
    return std::string(name) + (route_subgroups(n_expert, wg) ? "_sg" : "");
}

bool ExpertKernels::route_subgroups(uint32_t n_expert, uint32_t wg) const {
    return tuning.moe_route_subgroups && dev_.features().subgroup_arithmetic && n_expert <= 4 * wg;
}

// The top-k's form (moe_topk.glsl FORM) for n_expert over wg threads: the tuning's, where the
// kernel takes it.
uint32_t ExpertKernels::route_form(uint32_t n_expert, uint32_t k, uint32_t wg) const {
    using F = Tuning::RouteForm;
    F form = tuning.moe_route_form;
    if (form == F::rank && (n_expert > kRankExperts || k > kRankUsed)) form = F::merge;
    if (form == F::merge && !route_subgroups(n_expert, wg)) form = F::rounds;
    return (uint32_t)form;
}

void ExpertKernels::moe_route(CommandList& cl, View x, uint32_t x_off, uint32_t n_expert,
                              uint32_t k, View route, uint32_t route_off, uint32_t n_rows) {
    const uint32_t wg = wg_size(256);
    const Kernel& kern = pipes_.get(route_kernel("moe_route", n_expert, k, wg), 2,
                                    sizeof(RoutePush), {wg, 0u, route_form(n_expert, k, wg)});
    auto [gx, gy] = grid(dev_.features(), n_rows);
    cl.dispatch(kern, {x, route}, RoutePush{n_expert, k, x_off, route_off}, gx, gy);
}

void ExpertKernels::moe_router(CommandList& cl, const Router& r) {
    // 4 rows a workgroup (moe_router.comp's RPW), a power of two of threads over them.
    const uint32_t wg = wg_size(256);
    const uint32_t v4 =
        r.n_embd % 4 == 0 && r.xn_off % 4 == 0 && r.w.offset % 16 == 0 && r.act.offset % 16 == 0;
    const Kernel& kern = pipes_.get(route_kernel("moe_router", r.n_expert, r.k, wg), 5,
                                    sizeof(RouterPush), {wg, v4, route_form(r.n_expert, r.k, wg)});
    const uint32_t rows = r.n_expert + (r.gate_off != kNone ? 1 : 0);
    cl.dispatch(kern, {r.w, r.act, r.route, r.counter, r.gate_off != kNone ? r.gate_w : r.w},
                RouterPush{r.n_expert, r.k, r.n_embd, r.xn_off, r.logit_off, r.route_off,
                           r.counter_idx, r.gate_off},
                (rows + 3) / 4, 1);
}

bool ExpertKernels::experts_supported(QType t, uint32_t cols) {
    return type_suffix(t) != nullptr && cols % 32 == 0;
}

bool ExpertKernels::experts_read_bytes(QType t, uint32_t cols) const {
    const char* suffix = type_suffix(t);
    return suffix && t != QType::F32 && t != QType::F16 &&
           batch_gemv_reads_bytes(std::string("gemv_experts_") + suffix + "_i8", cols, 0);
}

void ExpertKernels::gemv_experts(CommandList& cl, const ExpertGemv& g) {
    const Features& f = dev_.features();
    if (!experts_supported(g.type, g.cols))
        fail("no expert GEMV over {} rows of {} values", qtype_name(g.type), g.cols);
    if (g.k == 0 || g.k > kMaxUsed)
        fail("{} experts a row: the device takes 1 to {}", g.k, kMaxUsed);
    if (g.n_rows == 0 || g.rows == 0) return;
    if (g.sum && g.perm_off != kNone) fail("a weighted sum of experts over pairs in another order");
    const uint32_t nvec = g.n_rows * g.k;
    // A weighted sum takes a row's k slots in one group. Slots in the window's order (grouped
    // by expert) go in groups of up to 8, which mostly read the same rows; slots in the rows'
    // order (a token's) each read their own expert's rows, and one a group spreads them over
    // workgroups (batch_gemv_span) instead of one workgroup reading all k experts' rows.
    const uint32_t nb = g.sum ? g.k : g.perm_off == kNone ? 1 : 0;
    const BatchGemvShape sh =
        batch_gemv_shape(g.type, g.cols, nvec, g.w, g.x, g.x_off,
                         {.fixed_nb = nb, .experts = true, .sum = g.sum, .bytes = g.x_bytes});
    if (g.shared_off != kNone && (!g.sum || g.n_rows != 1))
        fail("the shared expert joins the weighted sum of one row's experts only");
    if (g.up_off != kNone && (g.x_bytes || g.up_off % 4 != g.x_off % 4))
        fail("an expert GEMV over a SwiGLU's gates and ups reads F32 rows laid out alike");
    if (g.x_bytes && !experts_read_bytes(g.type, g.cols))
        fail("no expert GEMV over bytes for {} rows of {} values", qtype_name(g.type), g.cols);
    std::string name =
        std::string("gemv_experts_") + type_suffix(g.type) + (g.x_bytes ? "_i8" : "");
    if (f.subgroup_arithmetic) name += "_sg";
    const Kernel& k = pipes_.get(name, 4, sizeof(ExpertGemvPush), sh.spec);
    const uint32_t row_blocks = (g.rows + sh.k_rows - 1) / sh.k_rows;
    const BatchGemvSpan sp = batch_gemv_span(f, row_blocks, nvec, sh.nb);
    ExpertGemvPush p{g.cols,
                     g.rows,
                     (uint32_t)row_size(g.type, g.cols),
                     g.x_off,
                     g.y_off,
                     g.accumulate ? 1u : 0u,
                     nvec,
                     sp.span,
                     g.k,
                     g.route_off,
                     g.x_per_slot || g.sum ? 1u : 0u,
                     g.sum ? 1u : 0u,
                     g.expert_rows ? g.expert_rows : g.rows,
                     g.first_row,
                     g.perm_off,
                     g.up_off,
                     g.shared_off,
                     g.gate_off};
    auto [gx, gy] = grid(f, row_blocks);
    cl.dispatch(k, {g.w, g.x, g.y, g.route}, p, gx, gy, sp.z);
}

void ExpertKernels::shared_expert_add(CommandList& cl, View w, uint32_t w_off, View act,
                                      uint32_t xn_off, uint32_t shared_off, uint32_t h_off,
                                      uint32_t n, uint32_t n_rows, uint32_t norm_off, float eps,
                                      const ExpertsSum& sum) {
    const uint32_t wg = wg_size(256);
    const Kernel& k = pipes_.get("shared_expert_add", 2, sizeof(SharedAddPush), {wg});
    auto [gx, gy] = grid(dev_.features(), n_rows);
    cl.dispatch(k, {w, act},
                SharedAddPush{n, w_off, xn_off, shared_off, h_off, norm_off, eps, sum.k,
                              sum.down_off, sum.route_off, sum.inv_off},
                gx, gy);
}

void ExpertKernels::moe_sort(CommandList& cl, View route, uint32_t route_off, uint32_t k,
                             uint32_t n_expert, uint32_t n_rows, uint32_t perm_off,
                             uint32_t tiles_off, uint32_t inv_off, uint32_t tile_pairs) {
    if (n_expert > kMaxSortExperts)
        fail("{} experts: the device's grouping takes up to {}", n_expert, kMaxSortExperts);
    const Kernel& kern = pipes_.get("moe_sort", 1, sizeof(SortPush));
    if (tiles_off != kNone && (tile_pairs < kExpertTileRows || tile_pairs > kSortedTilePairs))
        fail("a table of expert tiles of {} pairs", tile_pairs);
    const uint32_t tile_rows = tiles_off == kNone ? 0 : tile_pairs;
    cl.dispatch(
        kern, {route},
        SortPush{n_rows * k, k, n_expert, route_off, perm_off, tile_rows, tiles_off, inv_off}, 1,
        1);
}

void ExpertKernels::moe_gather(CommandList& cl, View act, uint32_t x_off, uint32_t cols, uint32_t k,
                               View route, uint32_t perm_off, uint32_t n_pairs, View h,
                               uint32_t h_off) {
    if (cols % 8 != 0 || h_off % 8 != 0)
        fail("a gather of rows of {} values to half {}: both multiples of 8", cols, h_off);
    if (n_pairs == 0) return;
    if (n_pairs > dev_.features().max_workgroup_count[1])
        fail("{} pairs to gather: the device's grid takes {}", n_pairs,
             dev_.features().max_workgroup_count[1]);
    const Kernel& kern = pipes_.get("moe_gather", 3, sizeof(GatherPush));
    cl.dispatch(kern, {act, route, h}, GatherPush{cols, k, x_off, perm_off, h_off / 8},
                (cols / 8 + 63) / 64, n_pairs);
}

bool ExpertKernels::experts_sorted_cm2(Variant v, QType t, uint32_t cols, uint32_t rows,
                                       uint32_t expert_rows, uint32_t first_row, uint32_t n_pairs,
                                       uint32_t n_expert) const {
    const uint32_t pairs = tuning.expert_cm2_pairs;
    return pairs > 0 && GemmKernels::gemm_uses_cm2(dev_.features(), v) &&
           (t == QType::Q4_K || t == QType::Q6_K) && cols % 256 == 0 &&
           rows % kSortedTileWeightRows == 0 && expert_rows % kTileRows == 0 &&
           first_row % kTileRows == 0 && (uint64_t)n_pairs >= (uint64_t)pairs * n_expert;
}

void ExpertKernels::gemm_experts_sorted(CommandList& cl, const ExpertGemv& g, uint32_t x_rows,
                                        uint32_t tiles_off) {
    const Features& f = dev_.features();
    const uint32_t expert_rows = g.expert_rows ? g.expert_rows : g.rows;
    if (g.n_rows == 0 || g.rows == 0) return;
    if ((g.type != QType::Q4_K && g.type != QType::Q6_K && g.type != QType::F16) ||
        g.cols % 256 != 0 || g.rows % kSortedTileWeightRows != 0 || expert_rows % kTileRows != 0 ||
        g.first_row % kTileRows != 0 || g.x_off % 8 != 0 || g.y_off % 4 != 0)
        fail(
            "no sorted expert tiles over {} rows of {} values ({} computed, {} an expert, from "
            "{}; x at half {}, y at float {})",
            qtype_name(g.type), g.cols, g.rows, expert_rows, g.first_row, g.x_off, g.y_off);
    const uint32_t n_pairs = g.n_rows * g.k;
    if (x_rows < n_pairs + kSortedTilePairs)
        fail("sorted expert tiles over {} pairs read {} rows of X: {} are held", n_pairs,
             n_pairs + kSortedTilePairs, x_rows);
    const uint32_t tiles = max_expert_tiles(n_pairs, g.n_expert, kSortedTilePairs);
    if (tiles > f.max_workgroup_count[1])
        fail("{} expert GEMM tiles: the device's grid takes {}", tiles, f.max_workgroup_count[1]);
    constexpr uint32_t wg = 256;
    if (wg > f.cm2_max_workgroup || wg > f.max_workgroup_invocations)
        fail("the sorted expert tiles need {} threads a workgroup; the device allows {}", wg,
             std::min(f.cm2_max_workgroup, f.max_workgroup_invocations));
    const Kernel& k =
        pipes_.get(fmt::format("gemm_experts_cm2_{}@nv_coopmat2", type_suffix(g.type)), 4,
                   sizeof(SortedGemmPush), {wg, kSortedTileWeightRows, kSortedTilePairs, 32u});
    cl.dispatch(k, {g.w, g.x, g.y, g.route},
                SortedGemmPush{g.cols, g.rows, (uint32_t)row_size(g.type, g.cols), g.x_off, x_rows,
                               g.y_off, expert_rows, g.first_row, tiles_off},
                g.rows / kSortedTileWeightRows, tiles);
}

uint32_t ExpertKernels::expert_tiles_words(uint32_t n_pairs, uint32_t n_expert) {
    return 1 + 3 * max_expert_tiles(n_pairs, n_expert);
}

bool ExpertKernels::experts_use_tiles(QType t, uint32_t cols, uint32_t n_pairs,
                                      uint32_t n_expert) const {
    return tuning.expert_tile_pairs != 0 && experts_supported(t, cols) &&
           (uint64_t)n_pairs >= (uint64_t)tuning.expert_tile_pairs * n_expert;
}

bool ExpertKernels::expert_skinny(Variant v, const ExpertGemv& g) const {
    const uint32_t expert_rows = g.expert_rows ? g.expert_rows : g.rows;
    return tuning.expert_skinny && GemmKernels::gemm_uses_skinny(dev_.features(), v) &&
           (g.type == QType::Q4_K || g.type == QType::Q6_K) && g.cols % 256 == 0 &&
           expert_rows % kTileRows == 0 && g.first_row % kTileRows == 0 && g.x_off % 4 == 0 &&
           g.x.offset % 16 == 0 && g.w.offset % 16 == 0;
}

void ExpertKernels::gemm_experts(CommandList& cl, Variant v, const ExpertGemv& g,
                                 uint32_t tiles_off) {
    const Features& f = dev_.features();
    if (!experts_supported(g.type, g.cols))
        fail("no expert GEMM over {} rows of {} values", qtype_name(g.type), g.cols);
    if (g.sum || g.x_bytes || g.perm_off == kNone || g.accumulate)
        fail("the expert GEMM tiles write each pair's slot from F32 rows in the sorted order");
    if (g.n_rows == 0 || g.rows == 0) return;
    const uint32_t tiles = max_expert_tiles(g.n_rows * g.k, g.n_expert);
    if (tiles > f.max_workgroup_count[1])
        fail("{} expert GEMM tiles: the device's grid takes {}", tiles, f.max_workgroup_count[1]);
    const ExpertGemmPush p{g.cols,
                           g.rows,
                           (uint32_t)row_size(g.type, g.cols),
                           g.x_off,
                           g.y_off,
                           g.k,
                           g.x_per_slot ? 1u : 0u,
                           g.expert_rows ? g.expert_rows : g.rows,
                           g.first_row,
                           g.perm_off,
                           tiles_off};
    if (expert_skinny(v, g)) {
        // Rows of X a workgroup by the pairs an expert holds on average (a table tile holds up
        // to 64: workgroups over the rest in z); four tiles of weight rows over one of X, else
        // two, where they fit the shared memory (the skinny GEMM's rule).
        const uint32_t avg = g.n_rows * g.k / std::max(1u, g.n_expert);
        const uint32_t mt = avg <= 16 ? 1 : avg <= 32 ? 2 : 4;
        const uint32_t rt =
            mt == 1 && GemmKernels::skinny_shared(4, mt, true) <= f.max_shared_memory ? 4 : 2;
        const Kernel& k =
            pipes_.get(fmt::format("gemm_skinny_{}_experts@khr_coopmat", type_suffix(g.type)), 4,
                       sizeof(ExpertGemmPush), {rt, mt, 1u, 2u, tuning.gemm_skinny_half ? 1u : 0u});
        cl.dispatch(k, {g.w, g.x, g.y, g.route}, p, (g.rows + 32 * rt - 1) / (32 * rt), tiles,
                    kExpertTileRows / (16 * mt));
        return;
    }
    // KHR: 8 subgroups in a 2×4 grid; scalar: 256 threads of 4 pairs × 8 weight rows.
    const std::string khr_name = fmt::format("gemm_experts_{}@khr_coopmat", type_suffix(g.type));
    const auto khr_shared = module_shared_bytes(khr_name.c_str(), {8 * f.subgroup_size});
    const bool khr =
        GemmKernels::gemm_uses_khr(f, v) && khr_shared && *khr_shared <= f.max_shared_memory;
    const std::string name =
        khr ? khr_name : fmt::format("gemm_experts_{}@scalar", type_suffix(g.type));
    const uint32_t wg = khr ? 8 * f.subgroup_size : 256;
    if (wg > f.max_workgroup_invocations)
        fail("the expert GEMM tiles need {} threads a workgroup; the device allows {}", wg,
             f.max_workgroup_invocations);
    const Kernel& k = pipes_.get(name, 4, sizeof(ExpertGemmPush), {wg});
    constexpr uint32_t kWeightRows = 128;  // a tile's weight rows (the shader's BN)
    cl.dispatch(k, {g.w, g.x, g.y, g.route}, p, (g.rows + kWeightRows - 1) / kWeightRows, tiles);
}

void ExpertKernels::moe_sum(CommandList& cl, View act, uint32_t out_off, uint32_t h_off, View route,
                            uint32_t route_off, uint32_t k, uint32_t n, uint32_t n_rows,
                            uint32_t inv_off) {
    const Kernel& kern = pipes_.get("moe_sum", 2, sizeof(SumPush));
    auto [gx, gy] = grid(dev_.features(), n_rows);
    cl.dispatch(kern, {act, route}, SumPush{n, k, out_off, h_off, route_off, inv_off}, gx, gy);
}

}  // namespace dl::vk
