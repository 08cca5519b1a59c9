// Launchers of the prefill GEMM tiles (see kernels.h): Y = X·Wᵀ over a window of rows with the
// weights dequantized from their native blocks inside the tile, and the F16 copy of X that the
// cooperative-matrix tiles read. Push-constant layouts mirror the shaders.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/align.h"
#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct GemmPush {
    uint32_t m, n, k, row_bytes, x_off, y_off, mode, splits, k_split;
    uint32_t x_rows;  // the NV tiles: rows of the F16 copy of X its loads may read (>= m)
};
struct F16CopyPush {
    uint32_t n, x_off;
};
struct MatmulPush {
    uint32_t m, n, k;
};
struct DequantPush {
    uint32_t rows, cols, row_bytes;
};
struct SkinnyPush {
    uint32_t m, n, k, y_off, mode, splits, k_part;
};
struct GemvBatchPush {
    uint32_t ncols, nrows, row_bytes, x_off, y_off, mode, nvec, span;
};
struct RoundRowsPush {
    uint32_t x_off, ncols, nvec, out_off, up_off;
};
// Tiles of Y per workgroup (window rows × weight rows) and the shared memory they stage in;
// the columns a step of the scalar tiles.
constexpr uint32_t kGemmRows = 64;
constexpr uint32_t kGemmCols = 64, kGemmColsCoopmat = 128;
constexpr uint32_t kGemmStep = 64;
constexpr uint32_t kGemmShared = 32 * 1024, kGemmSharedCoopmat = 38 * 1024;

bool gemm_type(QType t) {
    return t == QType::F32 || t == QType::F16 || Kernels::block_format(t);
}

std::string type_name(QType t) {
    std::string name(qtype_name(t));
    for (char& c : name) c = (char)std::tolower((unsigned char)c);
    return name;
}

// The GEMM tile module of weights t on variant v; split: its split over K (NV tiles only).
std::string gemm_module(QType t, Variant v, bool split = false) {
    return fmt::format("gemm_{}{}@{}", type_name(t), split ? "_split" : "", variant_name(v));
}

// The NV cooperative matrix 2 tiles: 256 invocations (128 in the large F16 tiles),
// workgroup-scope matrices, decode loads; every tile size is a multiple of 32, so the device's
// flexible-shape granularity must divide 32 (an H200 reports 32x32x16).
constexpr uint32_t kCm2Invocations = 256;
bool cm2_usable(const Features& f, Variant v) {
    return v == Variant::nv_coopmat2 && variant_built(v) && f.nv_coopmat2_blocks &&
           f.cm2_max_workgroup >= kCm2Invocations && f.cm2_granularity_m > 0 &&
           32 % f.cm2_granularity_m == 0 && 32 % f.cm2_granularity_n == 0 &&
           32 % f.cm2_granularity_k == 0;
}
// The KHR tiles split over exactly 8 subgroups, so their size must be fixed and known.
bool khr_usable(const Features& f, Variant v) {
    return v != Variant::scalar && f.supports(Variant::khr_coopmat) &&
           f.min_subgroup_size == f.max_subgroup_size && f.subgroup_size >= 16 &&
           8 * f.subgroup_size <= f.max_workgroup_invocations &&
           f.max_shared_memory >= kGemmSharedCoopmat;
}

}  // namespace

std::optional<Decline> GemmKernels::gemm_supported(const Features& f, QType t) {
    if (!gemm_type(t))
        return Decline{fmt::format("no GEMM tile kernel for weights of type {}", qtype_name(t))};
    if (f.max_shared_memory < kGemmShared)
        return Decline{fmt::format("the GEMM tiles need {} KiB of shared memory; the device has {}",
                                   kGemmShared / 1024, f.max_shared_memory / 1024)};
    if (f.max_workgroup_invocations < 128)
        return Decline{"the GEMM tiles need 128 threads a workgroup"};
    return std::nullopt;
}

bool GemmKernels::gemm_uses_coopmat(const Features& f, Variant v) {
    return cm2_usable(f, v) || khr_usable(f, v);
}

bool GemmKernels::gemm_uses_cm2(const Features& f, Variant v) {
    return cm2_usable(f, v);
}

bool GemmKernels::gemm_uses_khr(const Features& f, Variant v) {
    return khr_usable(f, v);
}

// Subgroups of exactly 32 (the kernel's four of a workgroup of 128) and room for its smaller
// workgroup (two tiles of weight rows, four of X's rows).
bool GemmKernels::gemm_uses_skinny(const Features& f, Variant v) {
    return v != Variant::scalar && variant_built(Variant::khr_coopmat) &&
           f.supports(Variant::khr_coopmat) && f.min_subgroup_size == 32 &&
           f.max_subgroup_size == 32 && f.max_shared_memory >= skinny_shared(2, 4) &&
           f.max_workgroup_invocations >= 128;
}

uint32_t GemmKernels::skinny_shared(uint32_t rt, uint32_t mt, bool experts) {
    const uint32_t staged = (32 * rt + 16 * mt) * 17 * 16;
    return staged + (experts ? 2 * 16 * mt * 4 : 16);
}

bool GemmKernels::gemm_skinny(Variant v, QType t, uint32_t cols, uint32_t n_rows) const {
    return tuning.gemm_skinny && (t == QType::Q4_K || t == QType::Q6_K) && cols % 256 == 0 &&
           n_rows > 0 && n_rows <= tuning.gemm_skinny_rows && !gemm_by_gemv(t, cols, n_rows) &&
           gemm_uses_skinny(dev_.features(), v);
}

GemmKernels::SkinnyShape GemmKernels::skinny_shape(uint32_t rows, uint32_t cols,
                                                   uint32_t n_rows) const {
    const Features& f = dev_.features();
    SkinnyShape s;
    s.mt =
        std::min<uint32_t>(tuning.gemm_skinny_mt ? tuning.gemm_skinny_mt : 4, (n_rows + 15) / 16);
    s.y_tiles = (n_rows + 16 * s.mt - 1) / (16 * s.mt);
    // Four tiles of weight rows over one of X, else two: with the loads requested ahead, four
    // ran faster over 8 rows and two over 32 on an H100 (9B Q4_K_M: B8 pp16 + tg32 927.7 / 970.4
    // t/s with two / four; pp32 2,756 / 2,380); before them, two were faster everywhere (B8 870 /
    // 795, B32 2,339 / 1,963, B64 1,109 / 1,100).
    s.rt = tuning.gemm_skinny_rt ? tuning.gemm_skinny_rt : s.mt == 1 ? 4 : 2;
    if (skinny_shared(s.rt, s.mt) > f.max_shared_memory) s.rt = 2;
    const uint32_t tiles = (rows + 32 * s.rt - 1) / (32 * s.rt) * s.y_tiles;
    const uint32_t nb = cols / 256;
    // Parts enough for a few workgroups a multiprocessor (each holds only a few blocks of its
    // rows in flight; unsplit, B8 870 -> 492 t/s on the H100): four for 16 rows of X, fewer as
    // more rows make each block's products longer, and at least four blocks a part. H100,
    // SkinnyGemmSpeed (docs/perf/history.md 2026-12-06 (11:00)): the best parts of a 4096 x
    // 12288 Q4_K matrix were 8 / 4 / 4 at 16 / 32 / 64 rows, of a 12288 x 4096 one 2 / 2 / 1,
    // of a 4096 x 4096 Q6_K one 4 at every count.
    // A matrix of few weight rows and short rows (the 0.8B's output projections, 1,024 x 2,048:
    // 8 tiles of 128 rows at 8 rows of X, 2 parts of four blocks) left most multiprocessors
    // idle at four blocks a part: over one tile of X, where that grid is under half the
    // device's multiprocessors, parts of one block or more (Tuning::gemm_skinny_fill). On an
    // H100 the 0.8B's B8 generation 2,573 -> 3,073 t/s; at B64 (four tiles of X, longer products
    // a block) the same rule lost 9,705 -> 8,812, so more rows keep four blocks a part.
    uint32_t parts = tuning.gemm_skinny_parts;
    if (parts == 0) {
        const uint32_t sms = f.sm_count ? f.sm_count : 16;
        const uint32_t a_multiprocessor = s.mt == 1 ? 4 : s.mt == 2 ? 3 : 2;
        parts = std::max<uint32_t>(1, a_multiprocessor * sms / tiles);
        const uint32_t four_blocks = std::max<uint32_t>(1, nb / 4);
        const bool starved = tuning.gemm_skinny_fill && s.mt == 1 && tiles * four_blocks < sms / 2;
        parts = std::min(parts, starved ? nb : four_blocks);
    }
    parts = std::max<uint32_t>(1, std::min({parts, nb, kGemmSplitParts}));
    const uint32_t k_part = (nb + parts - 1) / parts;  // blocks
    s.split.parts = (nb + k_part - 1) / k_part;
    s.split.k_split = k_part * 256;
    if (s.split.parts > 1)
        s.split.need = {(uint64_t)tiles * 4,
                        (uint64_t)tiles * s.split.parts * 16 * s.mt * 32 * s.rt * 4};
    else
        s.split = {};
    return s;
}

bool GemmKernels::gemm_reads_f16(Variant v, uint32_t cols) const {
    return gemm_uses_coopmat(dev_.features(), v) && cols % 8 == 0;
}

void GemmKernels::f16_copy(CommandList& cl, View x, uint32_t x_off, View h, uint32_t n) {
    if (n % 8) fail("f16_copy of {} values: not a multiple of 8", n);
    const Kernel& k = pipes_.get("f16_copy", 2, sizeof(F16CopyPush));
    F16CopyPush p{n, x_off};
    auto [gx, gy] = grid(dev_.features(), (n / 8 + 63) / 64);
    cl.dispatch(k, {x, h}, p, gx, gy);
}

GemmKernels::GemmTile GemmKernels::gemm_cm2_tile(QType t, uint32_t rows, uint32_t n_rows,
                                                 uint32_t stage_rows) const {
    if (tuning.gemm_tile.bm) return tuning.gemm_tile;
    // GEMMs recorded in one stage run together: their grids fill the device together.
    rows = std::max(rows, stage_rows);
    // Measured on an H200 (GemmSpeed.Report, pp A/B with DELTALLM_VK_GEMM_TILE): F16 weights (or
    // weights expanded to F16) run best in 128x128x64 tiles over 128 invocations (Q4_K 12288x4096
    // expanded, over 2048 rows: 296 TFLOP/s against 230 in 128x128x32; pp512 / pp2048 9B 8500 /
    // 12630 -> 10030 / 14790 t/s, Qwen3-8B 9400 / 13100 -> 12100 / 15870), except where their
    // grid is small (0.8B's 1024-row GEMMs over 512 rows, 32 tiles: 64x128x64 over 256, pp512
    // 37000 -> 41000-44000; the 9B's 4096-row GEMMs, 128 tiles, keep the large ones: 9000 ->
    // 10000). Weights decoded inside the tensor loads (windows under gemm_expand_rows) run in
    // 64x128x32. The grid counted is that of every GEMM of the stage (stage_rows: their weight
    // rows together).
    if (t == QType::F16 && n_rows >= 128 &&
        (uint64_t)((rows + 127) / 128) * ((n_rows + 127) / 128) >= 64)
        return GemmTile{128, 128, 64, 128};
    GemmTile g = t != QType::F16 ? GemmTile{64, 128, 32} : GemmTile{64, 128, 64};
    if (n_rows <= 32)
        g.bn = 32;
    else if (n_rows <= 64)
        g.bn = 64;
    return g;
}

namespace {
// The workgroups a split GEMM's stage aims at: twice the multiprocessors (16 where the device
// does not say how many it has).
uint32_t split_target(const Features& f) {
    return f.sm_count ? 2 * f.sm_count : 16;
}
}  // namespace

GemmKernels::SplitNeed GemmKernels::gemm_split_scratch(const Features& f, uint32_t gemms) {
    const uint64_t target = split_target(f);
    return {gemms * align_up(target * 4, 256), gemms * align_up(target * 128 * 128 * 4, 256)};
}

GemmKernels::GemmSplit GemmKernels::split_for(bool nv, uint32_t tile_w, uint32_t tile_x,
                                              uint32_t step, uint32_t rows, uint32_t cols,
                                              uint32_t n_rows, uint32_t stage_rows) const {
    const int mode = tuning.gemm_split;
    if (mode == 0 || (mode == -1 && nv) || n_rows > kGemmSplitRows || n_rows == 0) return {};
    const uint32_t x_tiles = (n_rows + tile_x - 1) / tile_x;
    const uint32_t tiles = (rows + tile_w - 1) / tile_w * x_tiles;
    const uint32_t stage_tiles = (std::max(rows, stage_rows) + tile_w - 1) / tile_w * x_tiles;
    const uint32_t steps = (cols + step - 1) / step;
    uint32_t parts = mode >= 2 ? (uint32_t)mode : split_target(dev_.features()) / stage_tiles;
    parts = std::min({parts, steps, kGemmSplitParts});
    if (parts < 2) return {};
    GemmSplit g;
    g.k_split = (steps + parts - 1) / parts * step;
    g.parts = (cols + g.k_split - 1) / g.k_split;
    if (g.parts < 2) return {};
    g.need = {(uint64_t)tiles * 4, (uint64_t)tiles * g.parts * tile_w * tile_x * 4};
    return g;
}

GemmKernels::GemmSplit GemmKernels::cm2_split(QType mt, uint32_t rows, uint32_t cols,
                                              uint32_t n_rows, uint32_t stage_rows) const {
    if (tuning.gemm_acc16 && mt == QType::F16) return {};
    const GemmTile g = gemm_cm2_tile(mt, rows, n_rows, stage_rows);
    // gemm_cm2.comp's loop: a whole block a step for the k-quants, else 8 steps of bk.
    const bool k_quant = mt == QType::Q4_K || mt == QType::Q5_K || mt == QType::Q6_K;
    return split_for(true, g.bm, g.bn, k_quant ? 256 : 8 * g.bk, rows, cols, n_rows, stage_rows);
}

GemmKernels::SplitNeed GemmKernels::gemm_split_need(Variant v, QType t, uint32_t rows,
                                                    uint32_t cols, uint32_t n_rows,
                                                    uint32_t stage_rows) const {
    if (!gemm_type(t) || gemm_by_gemv(t, cols, n_rows)) return {};
    if (gemm_skinny(v, t, cols, n_rows)) return skinny_shape(rows, cols, n_rows).split.need;
    SplitNeed need =
        split_for(false, kGemmCols, kGemmRows, kGemmStep, rows, cols, n_rows, stage_rows).need;
    if (cm2_usable(dev_.features(), v))
        for (QType mt : {t, QType::F16}) {
            const SplitNeed n = cm2_split(mt, rows, cols, n_rows, stage_rows).need;
            need.counters = std::max(need.counters, n.counters);
            need.parts = std::max(need.parts, n.parts);
        }
    return need;
}

bool GemmKernels::gemm_expands(Variant v, QType t, uint32_t rows, uint32_t cols, uint32_t n_rows,
                               View w16) const {
    if (gemm_by_gemv(t, cols, n_rows) || gemm_skinny(v, t, cols, n_rows) ||
        !cm2_usable(dev_.features(), v) || !gemm_reads_f16(v, cols) || t == QType::F16 ||
        w16.buffer == VK_NULL_HANDLE || w16.range < (uint64_t)rows * cols * 2)
        return false;
    if (tuning.gemm_expand >= 0) return tuning.gemm_expand == 1;
    // Expanding costs one pass over the matrix whatever the rows; the F16 tiles save about a
    // microsecond a row on a 12288x4096 matrix: worth it from a few dozen rows.
    return n_rows >= tuning.gemm_expand_rows;
}

void GemmKernels::gemm(CommandList& cl, Variant v, QType t, View w, uint32_t rows, uint32_t cols,
                       View x, uint32_t x_off, View x16, View y, uint32_t y_off, uint32_t n_rows,
                       bool accumulate, View w16, bool expanded, uint32_t stage_rows,
                       SplitScratch split) {
    const Features& f = dev_.features();
    if (auto d = gemm_supported(f, t)) fail("{}", d->reason);
    if (gemm_by_gemv(t, cols, n_rows)) {
        if (expanded) fail("a GEMM of {} rows given as expanded runs as a GEMV", n_rows);
        if (gemv_batch_reads_bytes(t, cols, n_rows)) {
            if (x16.buffer == VK_NULL_HANDLE)
                fail("the batched GEMV over bytes needs the rounded rows");
            gemv_batch(cl, t, w, rows, cols, x16, 0, y, y_off, n_rows, accumulate, true);
        } else {
            gemv_batch(cl, t, w, rows, cols, x, x_off, y, y_off, n_rows, accumulate);
        }
        return;
    }
    const bool f16 = gemm_reads_f16(v, cols);
    if (f16 && x16.buffer == VK_NULL_HANDLE) fail("the cooperative-matrix GEMM needs the F16 rows");
    GemmPush p{n_rows, rows, cols,  (uint32_t)row_size(t, cols), x_off, y_off, accumulate ? 1u : 0u,
               1,      0,    n_rows};
    // The F16 copy's view may hold rows past n_rows (a window's buffer holds the plan's rows):
    // the NV tiles read them unclamped, as whole tiles, and store only rows below n_rows.
    if (f16 && cols > 0)
        p.x_rows = (uint32_t)std::max<uint64_t>(n_rows, x16.range / ((uint64_t)cols * 2));
    // A split that fits its scratch (else none); unsplit, the scratch's bindings are y's.
    auto split_by = [&](GemmSplit g) {
        if (g.parts < 2 || split.counters.buffer == VK_NULL_HANDLE ||
            split.parts.buffer == VK_NULL_HANDLE || split.counters.range < g.need.counters ||
            split.parts.range < g.need.parts)
            g = {};
        p.splits = g.parts;
        p.k_split = g.k_split;
        return g.parts;
    };
    if (gemm_skinny(v, t, cols, n_rows)) {
        if (expanded) fail("a skinny GEMM of {} rows given as expanded", n_rows);
        const SkinnyShape s = skinny_shape(rows, cols, n_rows);
        const bool split_k = split_by(s.split) > 1;
        const Kernel& k = pipes_.get(
            fmt::format("gemm_skinny_{}@khr_coopmat", type_name(t)), 5, sizeof(SkinnyPush),
            {s.rt, s.mt, tuning.gemm_skinny_prefetch ? 1u : 0u,
             std::clamp(tuning.gemm_skinny_ahead, 1u, 2u), tuning.gemm_skinny_half ? 1u : 0u});
        SkinnyPush sp{n_rows,
                      rows,
                      cols,
                      y_off,
                      accumulate ? 1u : 0u,
                      p.splits,
                      split_k ? p.k_split / 256 : cols / 256};
        cl.dispatch(k, {w, x16, y, split_k ? split.counters : y, split_k ? split.parts : y}, sp,
                    (rows + 32 * s.rt - 1) / (32 * s.rt), s.y_tiles, p.splits);
        return;
    }
    // The tensor stores of the NV tiles need Y's base 16-byte aligned; the KHR tiles take any.
    if (f16 && cm2_usable(f, v) && y_off % 4 == 0) {
        QType mt = t;
        View mw = w;
        const bool expands = gemm_expands(v, t, rows, cols, n_rows, w16);
        if (expanded && !expands)
            fail("a GEMM of {} rows over {} x {} {} given as expanded", n_rows, rows, cols,
                 qtype_name(t));
        if (expands) {
            if (!expanded) {
                // The scratch may still be read by the previous GEMM of this stage.
                cl.barrier();
                dequant_f16(cl, t, w, rows, cols, w16);
                cl.barrier();
            }
            mt = QType::F16;
            mw = w16;
            p.row_bytes = cols * 2;
        }
        const GemmTile g = gemm_cm2_tile(mt, rows, n_rows, stage_rows);
        if (g.wg > f.cm2_max_workgroup || g.wg > f.max_workgroup_invocations)
            fail("a GEMM tile of {} invocations: the device allows {}", g.wg,
                 std::min(f.cm2_max_workgroup, f.max_workgroup_invocations));
        const std::vector<uint32_t> spec = {g.wg, g.bm, g.bn, g.bk};
        const uint32_t gx = (rows + g.bm - 1) / g.bm, gy = (n_rows + g.bn - 1) / g.bn;
        // A split runs its own module (gemm_cm2.comp SPLIT_K); the tile that does not split
        // binds no scratch.
        if (split_by(cm2_split(mt, rows, cols, n_rows, stage_rows)) > 1) {
            const Kernel& k =
                pipes_.get(gemm_module(mt, Variant::nv_coopmat2, true), 5, sizeof(GemmPush), spec);
            cl.dispatch(k, {mw, x16, y, split.counters, split.parts}, p, gx, gy, p.splits);
            return;
        }
        const std::string module = tuning.gemm_acc16 && mt == QType::F16
                                       ? "gemm_f16_acc16@nv_coopmat2"
                                       : gemm_module(mt, Variant::nv_coopmat2);
        const Kernel& k = pipes_.get(module, 3, sizeof(GemmPush), spec);
        cl.dispatch(k, {mw, x16, y}, p, gx, gy);
        return;
    }
    const bool khr = f16 && khr_usable(f, v);
    std::vector<uint32_t> spec;
    if (khr) spec = {8 * f.subgroup_size, tuning.gemm_omitted_work};
    if (khr) {  // (not split)
        const Kernel& k =
            pipes_.get(gemm_module(t, Variant::khr_coopmat), 3, sizeof(GemmPush), spec);
        cl.dispatch(k, {w, x16, y}, p, (rows + kGemmColsCoopmat - 1) / kGemmColsCoopmat,
                    (n_rows + kGemmRows - 1) / kGemmRows);
        return;
    }
    const Kernel& k = pipes_.get(gemm_module(t, Variant::scalar), 5, sizeof(GemmPush), spec);
    const bool s = split_by(split_for(false, kGemmCols, kGemmRows, kGemmStep, rows, cols, n_rows,
                                      stage_rows)) > 1;
    cl.dispatch(k, {w, x, y, s ? split.counters : y, s ? split.parts : y}, p,
                (rows + kGemmCols - 1) / kGemmCols, (n_rows + kGemmRows - 1) / kGemmRows, p.splits);
}

void GemmKernels::dequant_f16(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols,
                              View h) {
    if (!gemm_type(t) || cols % 8) fail("no F16 expansion of {} rows of {}", qtype_name(t), cols);
    DequantPush dp{rows, cols, (uint32_t)row_size(t, cols)};
    if ((t == QType::Q4_K || t == QType::Q6_K) && tuning.dequant_k_wide) {  // 64 values a thread
        const Kernel& dq = pipes_.get(t == QType::Q4_K ? "dequant_f16_q4k" : "dequant_f16_q6k", 2,
                                      sizeof(DequantPush));
        const uint64_t threads = (uint64_t)(rows + 31) / 32 * (cols / 256) * 128;
        auto [gx, gy] = grid(dev_.features(), (threads + 63) / 64);
        cl.dispatch(dq, {w, h}, dp, gx, gy);
        return;
    }
    const Kernel& dq = pipes_.get("dequant_f16_" + type_name(t), 2, sizeof(DequantPush));
    auto [gx, gy] = grid(dev_.features(), ((uint64_t)rows * cols / 8 + 63) / 64);
    cl.dispatch(dq, {w, h}, dp, gx, gy);
}

bool GemmKernels::matmul_f16(CommandList& cl, Variant v, View a, View w, View c, uint32_t m,
                             uint32_t n, uint32_t k) {
    const Features& f = dev_.features();
    if (!f.supports(v) || !f.storage_16bit || !f.float16) return false;
    std::string mod = fmt::format("matmul_f16@{}", variant_name(v));
    std::vector<uint32_t> spec;
    if (v != Variant::scalar) {
        // One subgroup per workgroup; the tile kernels need whole 16-element tiles except coopmat2.
        if (v != Variant::nv_coopmat2 && (m % 16 || n % 16 || k % 16)) return false;
        spec.push_back(f.subgroup_size);
    }
    const Kernel& kk = pipes_.get(mod, 3, sizeof(MatmulPush), spec);
    MatmulPush p{m, n, k};
    cl.dispatch(kk, {a, w, c}, p, (n + 15) / 16, (m + 15) / 16);
    return true;
}

bool GemmKernels::gemm_by_gemv(QType t, uint32_t cols, uint32_t n_rows) const {
    // Rows of whole 32-value units (every block format's; F32 and F16 rows of other lengths
    // take the tiles), so the batched GEMV has no tail to guard.
    const bool by_rows = n_rows <= tuning.gemm_gemv_rows || ((t == QType::F32 || t == QType::F16) &&
                                                             n_rows <= tuning.gemm_gemv_rows_float);
    return by_rows && gemm_type(t) && cols % 32 == 0;
}

// Rows of 1024+ values, as the decode GEMV's rule (gemv_x_for), so a batched row computes as
// its sequence's solo decode does.
bool GemmKernels::gemv_batch_reads_bytes(uint32_t cols, uint32_t n_rows) const {
    return n_rows <= tuning.gemm_gemv_rows && batch_gemv_reads_bytes("round_rows", cols, 1024);
}

bool GemmKernels::gemv_batch_reads_bytes(QType t, uint32_t cols, uint32_t n_rows) const {
    return Kernels::block_format(t) && n_rows <= tuning.gemm_gemv_rows &&
           batch_gemv_reads_bytes("gemv_batch_" + type_name(t) + "_i8", cols, 1024);
}

void GemmKernels::round_rows(CommandList& cl, View x, uint32_t x_off, View out, uint32_t out_off,
                             uint32_t cols, uint32_t n, uint32_t up_off) {
    if (cols % 32) fail("round_rows of rows of {} values: not a multiple of 32", cols);
    const Kernel& k =
        pipes_.get(up_off == kNone ? "round_rows" : "round_rows_swiglu", 2, sizeof(RoundRowsPush));
    RoundRowsPush p{x_off, cols, n, out_off, up_off == kNone ? 0 : up_off};
    auto [gx, gy] = grid(dev_.features(), ((uint64_t)n * cols / 16 + 63) / 64);
    cl.dispatch(k, {x, out}, p, gx, gy);
}

void GemmKernels::gemv_batch(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                             uint32_t x_off, View y, uint32_t y_off, uint32_t n_rows,
                             bool accumulate, bool bytes) {
    const Features& f = dev_.features();
    if (n_rows == 0 || rows == 0) return;
    if (bytes && !Kernels::block_format(t))
        fail("no batched GEMV over bytes for {}", qtype_name(t));
    // Vectors a group as even as the groups of at most 8 allow (13 rows: two groups of 7, the
    // last vector of the second computed twice and stored once).
    const BatchGemvShape sh = batch_gemv_shape(t, cols, n_rows, w, x, x_off, {.bytes = bytes});
    std::string name = "gemv_batch_" + type_name(t) + (bytes ? "_i8" : "");
    if (f.subgroup_arithmetic) name += "_sg";
    const Kernel& k = pipes_.get(name, 3, sizeof(GemvBatchPush), sh.spec);
    const uint32_t row_blocks = (rows + sh.k_rows - 1) / sh.k_rows;
    const BatchGemvSpan sp = batch_gemv_span(f, row_blocks, n_rows, sh.nb);
    GemvBatchPush p{cols,   rows,   (uint32_t)row_size(t, cols), x_off, y_off, accumulate ? 1u : 0u,
                    n_rows, sp.span};
    auto [gx, gy] = grid(f, row_blocks);
    cl.dispatch(k, {w, x, y}, p, gx, gy, sp.z);
}

}  // namespace dl::vk
