// Launchers of the tiled GEMV (shaders/gemv_tile.comp, see kernels_gemv.h): Q4_K and Q6_K rows
// held in tiles, the forms of gemv.comp it takes over, and the speed report's direct calls.
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "core/error.h"
#include "vulkan/kernels.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {

namespace {

struct GemvTilePush {
    uint32_t ncols, nrows, x_off, y_off, mode, g_off, u_off, xr_off, gin_off;
};

}  // namespace

std::vector<uint8_t> GemvKernels::tile_rows(QType t, const uint8_t* w, uint32_t rows, uint32_t cols,
                                            uint32_t tile) {
    if ((t != QType::Q4_K && t != QType::Q6_K) || cols % 256 || !tile)
        fail("no tiled form of {} rows of {} {}", rows, cols, qtype_name(t));
    std::vector<uint8_t> out((uint64_t)(rows + tile - 1) / tile * tile * row_size(t, cols));
    to_tiles(t, cols, rows, tile, w, out.data());
    return out;
}

bool GemvKernels::gemv_tile_supported(QType t) const {
    const Features& f = dev_.features();
    // The module is absent from a build whose glslc lacks integer dot products.
    return f.integer_dot && f.subgroup_arithmetic && f.subgroup_shuffle &&
           f.min_subgroup_size >= 4 && (t == QType::Q4_K || t == QType::Q6_K) &&
           !find_module(std::string("gemv_tile_") + type_suffix(t)).empty();
}

uint64_t GemvKernels::split_bytes(uint32_t rows) {
    const uint64_t tiles = (rows + kTileRows - 1) / kTileRows;
    return (tiles + tiles * 4 * kTileRows) * 4;
}

// The copy of x (16 bytes and a scale pair a 16-value block), the slots' sums, the rows to round
// and the split's flag.
uint64_t GemvKernels::gemv_tile_shared_bytes(uint32_t cols, uint32_t threads) {
    return (uint64_t)cols / 16 * 24 + 4ull * threads + 4ull * kTileRows + 4;
}

bool GemvKernels::gemv_tiled_for(QType t, uint32_t cols) const {
    // On an H200 every shape measured faster on it than on gemv.comp reading the tiles, the
    // 9B's 12288-value down projection rows too (docs/perf/history.md 2026-12-02, evening). Its
    // workgroups hold x whole (record_on_tiled_gemv: at most kTileMaxThreads invocations).
    const Features& f = dev_.features();
    return tuning.gemv_tiled != GemvTiled::off && tiled(t) && gemv_tile_supported(t) &&
           cols % 256 == 0 && gemv_x_for(t, cols) == GemvX::bytes &&
           kTileMaxThreads <= f.max_workgroup_invocations &&
           gemv_tile_shared_bytes(cols, kTileMaxThreads) <= f.max_shared_memory;
}

bool GemvKernels::record_on_tiled_gemv(CommandList& cl, QType t, View w, uint32_t rows,
                                       uint32_t cols, View x, uint32_t x_off, View y,
                                       uint32_t y_off, bool accumulate, const uint32_t* pair,
                                       const GemvNormIn* norm, const GemvRounding* rounding,
                                       const GemvGatedIn* gated) {
    if (!gemv_tiled_for(t, cols) || w.offset % 16) return false;
    TileForm form;
    form.pair = pair;
    // What this kernel cannot take is left to gemv_record, which refuses it.
    if (rounding && rounding->out_off != kNone) {
        form.xr_off = rounding->out_off;
        form.round_norm = rounding->out_norm;
        const bool round_norm = form.round_norm.buffer != VK_NULL_HANDLE;
        if (!rounding_writable(y, form.xr_off, rows, round_norm) ||
            (round_norm && (norm || form.round_norm.range < (uint64_t)rows * 4)))
            return false;
    }
    if (gated && !gated_fits(*gated, cols)) return false;
    if (rounding && rounding->x_rounded) {
        if (!rounding_readable(x, x_off, cols, norm != nullptr)) return false;
        // Over a norm's input: rounded times the norm weights by the GEMV that wrote it.
        if (norm) {
            form.xmode = 4;
            form.eps = norm->eps;
        }
        // Over a DeltaNet output rounded by the step, before its gated norm.
        if (gated) {
            form.xmode = 5;
            form.eps = gated->eps;
            form.gated = gated;
        }
    } else {
        if (x.offset % 16 || x_off % 4) return false;
        form.xmode = norm ? 1 : gated ? 3 : 2;
        if (norm) {
            form.eps = norm->eps;
            form.norm_w = norm->norm_w;
            if (form.norm_w.offset % 16 || form.norm_w.range < (uint64_t)cols * 4) return false;
        }
        if (gated) {
            form.eps = gated->eps;
            form.gated = gated;
        }
    }
    // A GEMV that adds to y over fewer tiles than the device has multiprocessors splits its
    // rows' runs over up to four workgroups a tile (gemv_split), where its rows hold 12+ runs
    // and each part 3+. On an H200 (docs/perf/history.md 2026-12-02, evening) the down projections
    // gained (9B 572 -> 519 us a token, 0.8B 200 -> 182) and the 0.8B's output projections,
    // 8 runs in parts of 2, lost (169 -> 245).
    const Features& f = dev_.features();
    const uint32_t runs = cols / 256 * (t == QType::Q6_K ? 2 : 1);
    const uint32_t tiles = (rows + kTileRows - 1) / kTileRows;
    uint32_t parts = 1;
    if (accumulate && gemv_split.buffer != VK_NULL_HANDLE && !pair && !tuning.gemv_grid &&
        gemv_split.range >= split_bytes(rows)) {
        if (tuning.gemv_split_parts)
            parts = std::min(tuning.gemv_split_parts, runs);
        else if (f.sm_count && runs >= 12)
            parts = std::min({4u, (f.sm_count + tiles - 1) / tiles, runs / 3});
    }
    form.split = gemv_split;
    // A slot a run of its part, up to eight slots of 32 (four a matrix for a pair, half the
    // slots on each): 256 invocations measured fastest over 4096-value rows (docs/perf/history.md
    // 2026-12-02, afternoon).
    uint32_t slots = 1;
    while (slots * parts < runs && slots < (pair ? 4u : 8u)) slots *= 2;
    // Two parts of eight slots as one workgroup of sixteen: on an H200 the 4096-value output
    // projections took 9B 339 -> 305 us a token, Qwen3-8B 389 -> 329, and the 12288-value down
    // projections 9B 531 -> 520 (docs/perf/history.md 2026-12-03).
    if (tuning.gemv_wide_tiles && parts == 2 && slots == 8 &&
        kTileWideThreads <= f.max_workgroup_invocations &&
        gemv_tile_shared_bytes(cols, kTileWideThreads) <= f.max_shared_memory) {
        parts = 1;
        slots = 16;
    }
    // (tile_record refuses what the speed report's settings make unfit.)
    if (tuning.gemv_tile_slots) slots = tuning.gemv_tile_slots;
    uint32_t tile = tuning.gemv_work_tile ? tuning.gemv_work_tile : kTileRows;
    form.layout_tile = kTileRows;
    const uint32_t threads = tile * slots * (pair ? 2 : 1);
    // So gemv_tiled_for (or the test above, for a wide tile) found it fits.
    DL_ASSERT(tuning.gemv_tile_slots || tuning.gemv_work_tile ||
              threads <= (slots == 16 ? kTileWideThreads : kTileMaxThreads));
    tile_record(cl, t, w, rows, cols, x, x_off, y, y_off, accumulate, threads, tile, 0,
                tuning.gemv_grid, parts, form);
    return true;
}

void GemvKernels::gemv_tile(CommandList& cl, const TiledGemv& g) {
    const bool norm = g.norm_w.buffer != VK_NULL_HANDLE;
    TileForm form;
    form.split = g.split;
    if (norm) {
        form.xmode = 1;
        form.eps = 1e-6f;
        form.norm_w = g.norm_w;
    }
    tile_record(cl, g.type, g.w, g.rows, g.cols, g.xr, g.x_off, g.y, g.y_off, g.accumulate,
                g.threads, g.tile, g.omitted_work, g.grid, g.ksplit, form);
}

void GemvKernels::tile_record(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols,
                              View x, uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                              uint32_t threads, uint32_t tile, uint32_t omitted_work,
                              uint32_t grid_cap, uint32_t ksplit, const TileForm& form) {
    const Features& f = dev_.features();
    const bool norm = form.xmode == 1, pair = form.pair != nullptr,
               round_out = form.xr_off != kNone;
    const bool round_norm = form.round_norm.buffer != VK_NULL_HANDLE;
    const uint32_t g_off = pair ? form.pair[0] : 0, u_off = pair ? form.pair[1] : 0;
    const uint32_t ltile = form.layout_tile ? form.layout_tile : tile;
    const uint32_t nb = cols / 256, tiles = (rows + tile - 1) / tile;
    const uint64_t bytes = (uint64_t)((rows + ltile - 1) / ltile) * ltile * row_size(t, cols);
    if (cols % 256 || !tile || ltile % tile || threads % tile ||
        threads > f.max_workgroup_invocations || x_off % 4 || !gemv_tile_supported(t) ||
        w.offset % 16 || g_off % 32 || u_off % 32 || std::max(g_off, u_off) + bytes > w.range ||
        (form.xmode >= 1 && form.xmode <= 3 &&
         (x.offset % 16 || (uint64_t)(x_off + cols) * 4 > x.range)) ||
        ((form.xmode == 0 || form.xmode >= 4) &&
         !rounding_readable(x, x_off, cols, form.xmode == 4)) ||
        (norm && (form.norm_w.offset % 16 || form.norm_w.range < (uint64_t)cols * 4)) ||
        (pair && ((threads / tile) % 2 || accumulate)) || !ksplit ||
        (round_out && (tile % 16 || !rounding_writable(y, form.xr_off, rows, round_norm))) ||
        (round_norm && (!round_out || norm || form.round_norm.range < (uint64_t)rows * 4)) ||
        (form.gated && !gated_fits(*form.gated, cols)) ||
        (ksplit > 1 &&
         (grid_cap || pair || form.split.range < (uint64_t)(tiles + tiles * ksplit * tile) * 4)))
        fail("no tiled GEMV over {} x {} {} in workgroups of {} by {}", rows, cols, qtype_name(t),
             threads, tile);
    std::vector<uint32_t> spec = {threads,
                                  tile,
                                  omitted_work,
                                  nb,
                                  form.xmode,
                                  ksplit,
                                  std::bit_cast<uint32_t>(form.eps),
                                  pair,
                                  round_out ? 1u : 0u};
    spec.insert(spec.end(), {form.gated ? form.gated->head : 128,
                             form.gated ? form.gated->groups : 1, round_norm ? 1u : 0u, ltile});
    const Kernel& k =
        pipes_.get(std::string("gemv_tile_") + type_suffix(t), 5, sizeof(GemvTilePush), spec);
    GemvTilePush p{cols,
                   rows,
                   x_off,
                   y_off,
                   accumulate ? 1u : 0u,
                   g_off,
                   u_off,
                   round_out ? form.xr_off : 0,
                   form.gated ? form.gated->ss_off : 0};
    auto [gx, gy] = grid(f, ksplit > 1 ? tiles * ksplit
                            : grid_cap ? std::min(grid_cap, tiles)
                                       : tiles);
    cl.dispatch(k,
                {w, x, y,
                 norm         ? form.norm_w
                 : round_norm ? form.round_norm
                              : x,
                 ksplit > 1 ? form.split : y},
                p, gx, gy);
}

}  // namespace dl::vk
