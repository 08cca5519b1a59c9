// Launchers of the decode GEMVs over gemv.comp (see kernels_gemv.h): the launch shape and the
// recording of each form; push-constant layouts mirror the shader's Push block. The tiled GEMV:
// kernels_gemv_tile.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/error.h"
#include "vulkan/kernels.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {

namespace {

// xr_off: gemv.comp ROUND_OUT's destination (unread without it).
struct GemvPush {
    uint32_t ncols, nrows, row_bytes, x_off, y_off, mode, xr_off;
};
struct GemvGatedPush {
    uint32_t ncols, nrows, row_bytes, x_off, y_off, mode, xr_off, gin_off;
};
struct GemvPairPush {
    uint32_t ncols, nrows, row_bytes, x_off, y_off, mode, g_off, u_off, xr_off;
};
struct GemvFusedPush {
    uint32_t ncols, nrows, row_bytes, x_off, y_off, mode, xn_off, counter_idx;
    float eps;
};

const char* gemv_module(QType t) {
    switch (t) {
        case QType::F32:
            return "gemv_f32";
        case QType::F16:
            return "gemv_f16";
        case QType::Q4_0:
            return "gemv_q4_0";
        case QType::Q8_0:
            return "gemv_q8_0";
        case QType::Q4_K:
            return "gemv_q4_k";
        case QType::Q5_K:
            return "gemv_q5_k";
        case QType::Q6_K:
            return "gemv_q6_k";
        default:
            return nullptr;
    }
}

}  // namespace

bool GemvKernels::gemv_supports(QType t) {
    return gemv_module(t) != nullptr;
}

// Slices of 32 weights per row that gemv.comp hands out to its threads (see its header).
static uint32_t gemv_slices(QType t, uint32_t cols) {
    switch (t) {
        case QType::Q4_K:
        case QType::Q5_K:
        case QType::Q6_K:
            return cols / 256 * 8;
        case QType::Q4_0:
        case QType::Q8_0:
            return cols / 32;
        default:  // F32, F16: 32-element units, the last one may be short
            return (cols + 31) / 32;
    }
}

// Shared memory of the GEMV for rows of `cols` read through path x: the row partials and, for
// bytes, 48 bytes a run of 32 values of x (the values, and each 16-value block's scale and sum),
// with the margin. The launcher sizes many shapes with it; spirv_shared_test.cpp holds it to the
// modules' declarations.
uint32_t GemvKernels::gemv_shared_bytes(GemvX x, uint32_t cols, uint32_t wg, uint32_t rows) {
    return (x == GemvX::bytes ? cols / 32 * 48 : 0) + wg * rows * 4 + kSharedMargin;
}

bool GemvKernels::block_format(QType t) {
    switch (t) {
        case QType::Q4_0:
        case QType::Q8_0:
        case QType::Q4_K:
        case QType::Q5_K:
        case QType::Q6_K:
            return true;
        default:
            return false;
    }
}

static const char* gemv_x_suffix(GemvKernels::GemvX x) {
    return x == GemvKernels::GemvX::bytes ? "_i8" : "";
}

// Rows a row group of the launcher's shape (see gemv_record): the byte path rounds x once a
// workgroup, so its workgroups take 8 rows a group over matrices of many rows (the FFN pair, the
// head); over 4096 rows or fewer, or rows of 8192+ values (out and down projections: 128
// workgroups of 8 rows a group for 132 multiprocessors), 4, which doubles their workgroups.
// H200 tg128, two rounds: rows of 8192+, 9B 233.3 -> 237.7 t/s, Qwen3-8B 227.9 -> 230.9; then
// 4096 rows or fewer, 9B 231.1 -> 242.9, Qwen3-8B 221.2 -> 230.9.
static uint32_t gemv_rows(GemvKernels::GemvX x, uint32_t rows, uint32_t cols) {
    if (x != GemvKernels::GemvX::bytes) return 4;
    return rows <= 4096 || cols >= 8192 ? 4 : 8;
}

GemvKernels::GemvX GemvKernels::gemv_x_for(QType t, uint32_t cols) const {
    const Features& f = dev_.features();
    if (!block_format(t)) return GemvX::global;
    GemvX x = tuning.gemv_x;
    if (x == GemvX::automatic) {
        // Measured on an H200 (decode tg128, docs/perf/history.md 2026-11-30 and 2026-12-01): bytes
        // for every block format over rows of 4096+ (9B 216.5 -> 224.2 t/s against bytes for the
        // nibble formats only, Qwen3-8B 212.3 -> 214.6), and over rows of 1024+ once the short
        // rows' small row groups fill a workgroup (gemv_record; 0.8B 586.0 / 585.9 -> 671.6 /
        // 674.3 against F32 x there). Shorter rows keep F32 x: 512+ measured 648.
        x = GemvX::global;
        if (f.integer_dot_fast && cols >= 1024) x = GemvX::bytes;
    }
    if (x == GemvX::bytes && !f.integer_dot) return GemvX::global;
    // One more row of partials: NORM_IN's sums of squares (gemv_record).
    if (gemv_shared_bytes(x, cols, 128, gemv_rows(x, UINT32_MAX, cols) + 1) > f.max_shared_memory)
        return GemvX::global;
    if (x != GemvX::global && find_module(std::string(gemv_module(t)) + gemv_x_suffix(x)).empty())
        return GemvX::global;
    return x;
}

void GemvKernels::gemv(CommandList& cl, const Gemv& g) {
    gemv_record(cl, g.type, g.w, g.rows, g.cols, g.x, g.x_off, g.y, g.y_off, g.accumulate, nullptr,
                nullptr, nullptr, g.share, g.rounding);
}

void GemvKernels::gemv_fused(CommandList& cl, const Gemv& g, const GemvFusion& fuse) {
    gemv_record(cl, g.type, g.w, g.rows, g.cols, g.x, g.x_off, g.y, g.y_off, g.accumulate, &fuse,
                nullptr, nullptr, {}, g.rounding);
}

void GemvKernels::gemv_normed(CommandList& cl, const Gemv& g, const GemvNormIn& norm) {
    gemv_record(cl, g.type, g.w, g.rows, g.cols, g.x, g.x_off, g.y, g.y_off, g.accumulate, nullptr,
                nullptr, &norm, g.share, g.rounding);
}

void GemvKernels::gemv_swiglu(CommandList& cl, const Gemv& g, uint64_t g_off, uint64_t u_off,
                              const GemvNormIn* norm) {
    const QType t = g.type;
    const View w = g.w;
    const uint32_t rows = g.rows, cols = g.cols;
    // Matrices held in tiles are found by row handles (tiled_rows.glsl), to which the offsets
    // are added: multiples of 32 there.
    const uint64_t bytes = device_bytes(t, cols, rows), align = tiled(t) ? 32 : 4;
    if (g_off % align || u_off % align || std::max(g_off, u_off) + bytes > w.range ||
        std::max(g_off, u_off) > UINT32_MAX)
        fail("the SwiGLU GEMV pair at bytes {} and {} does not lie in its weight view", g_off,
             u_off);
    const uint32_t pair[2] = {(uint32_t)g_off, (uint32_t)u_off};
    gemv_record(cl, t, w, rows, cols, g.x, g.x_off, g.y, g.y_off, false, nullptr, pair, norm, {},
                g.rounding);
}

void GemvKernels::gemv_gated(CommandList& cl, const Gemv& g, const GemvGatedIn& gated) {
    if (gated.ss_off == kNone && !(g.rounding && g.rounding->x_rounded))
        fail("a GEMV in the gated form with no factor ({} x {} {}) reads x rounded already", g.rows,
             g.cols, qtype_name(g.type));
    gemv_record(cl, g.type, g.w, g.rows, g.cols, g.x, g.x_off, g.y, g.y_off, g.accumulate, nullptr,
                nullptr, nullptr, {}, g.rounding, &gated);
}

bool GemvKernels::gemv_gates(QType t, uint32_t cols) const {
    return gemv_module(t) && gemv_x_for(t, cols) == GemvX::bytes &&
           !find_module(std::string(gemv_module(t)) + "_gin_i8").empty();
}

uint32_t GemvKernels::balanced_rows(uint32_t rows, uint32_t k_rows, uint32_t groups,
                                    uint32_t slots) {
    auto cost = [&](uint32_t kr) {
        const uint64_t blocks = ((uint64_t)rows + kr * groups - 1) / (kr * groups);
        return (double)((blocks + slots - 1) / slots) * kr;
    };
    while (k_rows > 1 && cost(k_rows / 2) < 0.9 * cost(k_rows)) k_rows /= 2;
    return k_rows;
}

GemvKernels::SharedShape GemvKernels::shared_shape(uint32_t rows, uint32_t k_rows, uint32_t groups,
                                                   uint32_t slots, float share) {
    const uint32_t part = std::max<uint32_t>(1, (uint32_t)std::lround(slots * (double)share));
    const uint32_t blocks = (rows + k_rows * groups - 1) / (k_rows * groups);
    if (blocks >= part) return {k_rows, 0};
    return {balanced_rows(rows, k_rows, groups, part), part};
}

GemvKernels::GemvLaunch GemvKernels::gemv_launch(QType t, uint32_t rows, uint32_t cols, bool fuse,
                                                 bool pair, bool norm, GemvPart share,
                                                 bool round_out) const {
    const Features& f = dev_.features();
    // gemv_rows() rows share each x slice and put as many independent weight loads in flight per
    // thread; a row group is as wide as the row has slices (one pass over short rows), at most
    // 128 threads so long rows still spread over enough workgroups to fill the device. The byte
    // path stacks gemv_groups row groups in a workgroup over its one rounded x.
    GemvX xp = gemv_x_for(t, cols);
    // A pair takes half the rows of each matrix, so a workgroup accumulates as many rows as an
    // unpaired one and the pair's grid has as many workgroups as the two GEMVs together.
    uint32_t kRows = pair ? gemv_rows(xp, rows, cols) / 2 : gemv_rows(xp, rows, cols);
    // Slices of 64 weights (gemv.comp WIDE) where the byte path reads Q4_K, or Q6_K rows of 8192+
    // values: half the slices and half the rows a thread for the same weight bytes, in groups of
    // at most 64 threads (a 12288-value down projection row then takes three slices a thread and
    // its 4096 rows one row block a workgroup). Measured on an H200 (docs/perf/history.md
    // 2026-11-30, late night), tg128 in two rounds: 9B 271.3 / 274.0 -> 297.3 / 296.0 t/s, Qwen3-8B
    // 269.3 / 272.1 -> 295.4 / 299.6. Wide Q6_K slices over 4096-value rows measured slower
    // (GemvSpeed.Rows, 8192 rows: 13.3 -> 16.2 us), over the down projections faster (21.0 -> 18.5
    // us). Under `automatic`, rows too short to give each invocation of a subgroup a wide slice
    // keep narrow ones (the 0.8B's 1024-value Q4_K rows: 16 wide slices for a group of 32 threads).
    // H200 tg128, three rounds: 0.8B 795.2 / 838.1 / 828.4 -> 862.0 / 898.8 / 804.3 t/s.
    const bool wide_type =
        tuning.gemv_wide == GemvWide::all
            ? t == QType::Q4_K || t == QType::Q6_K
            : (t == QType::Q4_K || (t == QType::Q6_K && cols >= 8192)) &&
                  gemv_slices(t, cols) / 2 >= std::max<uint32_t>(f.max_subgroup_size, 1);
    const uint32_t wide =
        xp == GemvX::bytes && tuning.gemv_wide != GemvWide::off && wide_type ? 1 : 0;
    uint32_t slices = gemv_slices(t, cols) >> wide, want = 32;
    while (want < slices && want < (wide ? 64u : 128u)) want *= 2;
    uint32_t wg = wg_size(want);
    if (wide && kRows > 1) kRows /= 2;
    if (tuning.gemv_shape.threads) {
        wg = wg_size(tuning.gemv_shape.threads);
        kRows = tuning.gemv_shape.rows;
    }
    // Row groups (gemv.comp GROUPS) for the byte path: the rounded x then serves more rows.
    // The Q6_K GEMV with the norm epilogue takes twice as many: an H200's compiler gave it 91
    // registers at 512 invocations (one workgroup a multiprocessor, against two for every other
    // byte GEMV at 58-64); at 1024 it must fit in 64. tg128, two rounds: 9B 255.6 -> 261.5 t/s,
    // Qwen3-8B 243.1 -> 250.3 (docs/perf/history.md 2026-11-30, night). So does the Q6_K GEMV over
    // a norm's input: 117 registers at 512, 64 at 1024 (9B qkv, 8192 rows: tg128 +2.5 %), but not
    // over the head's 248320 rows, which ran faster at 512 (297 against 317 us a token;
    // docs/perf/history.md 2026-12-01).
    // Groups of fewer than 128 threads (wide slices, short rows) keep a workgroup's invocations
    // with more groups: the 0.8B's 1024-value rows, 32 threads a group, take 16 groups.
    const uint32_t group_cap = tuning.gemv_groups *
                               (t == QType::Q6_K && (fuse || (norm && rows <= 65536)) ? 2 : 1) *
                               std::max<uint32_t>(128 / wg, 1);
    uint32_t groups = 1;
    if (xp == GemvX::bytes)
        while (groups < group_cap && wg * groups * 2 <= f.max_workgroup_invocations &&
               wg % std::max<uint32_t>(f.max_subgroup_size, 1) == 0)
            groups *= 2;
    // NORM_IN's partial sums of squares take one more row of partials, and so do ROUND_OUT's
    // gathered rows (gemv.comp ro_v: at most ROWS floats a group).
    const uint32_t nr = (pair ? 2 * kRows : kRows) + (norm ? 1 : 0) + (round_out ? 1 : 0);
    while (groups > 1 && gemv_shared_bytes(xp, cols, wg * groups, nr) > f.max_shared_memory)
        groups /= 2;
    if (gemv_shared_bytes(xp, cols, wg, nr) > f.max_shared_memory) xp = GemvX::global;
    // A GEMV alone in its stage evens out its row blocks over the device's workgroup slots:
    // gemv_waves workgroups of 512 invocations a multiprocessor (one of 1024). On an H200, tg128
    // in two rounds: 0.8B 780.5 / 753.2 -> 871.3 / 827.2 t/s (its out and down projections over
    // 32-64 workgroups spread to 64-256), 9B 331.2 / 328.8 -> 329.9 / 337.7 (its merged input
    // projections, 386 row blocks on 264 slots, take two rounds of half the rows in three),
    // Qwen3-8B unchanged. Balancing the GEMVs that share a stage too took Qwen3-8B's v beside its
    // q and k from 32 workgroups to 128, for as many multiprocessors: 341.2 / 347.2 -> 328.3 /
    // 330.2 (docs/perf/history.md 2026-12-01, noon).
    // A GEMV that shares its stage takes its own shape (shared_shape) only where it would leave
    // its part of the device idle: the 0.8B's DeltaNet qkv (6144 rows of 1024 values) took 24
    // workgroups of 1024 invocations for 132 multiprocessors, 96 with it. On an H200 (decode
    // profile, us a token): 0.8B input projections 238.6 -> 199.5, the token 1031.7 -> 995.2; the
    // 9B's and Qwen3-8B's shapes stay (docs/perf/history.md 2026-12-02, late morning). Giving every
    // GEMV of a stage its share of the slots cost Qwen3-8B 4 % (its q, 256 blocks, then took two
    // rounds). A GEMV that rounds its rows for the next keeps row blocks of whole 16-value blocks.
    uint32_t grid_cap = 0;
    if (xp == GemvX::bytes && tuning.gemv_balance && !tuning.gemv_shape.threads) {
        const uint32_t slots =
            tuning.gemv_slots ? tuning.gemv_slots
            : tuning.gemv_waves
                ? f.sm_count * std::max<uint32_t>(1, tuning.gemv_waves * 512 / (wg * groups))
                : 0;
        uint32_t balanced = kRows;
        if (slots && share.of_stage < 1.f) {
            const SharedShape sh = shared_shape(rows, kRows, groups, slots, share.of_stage);
            balanced = sh.k_rows;
            grid_cap = sh.grid;
        } else if (slots) {
            balanced = balanced_rows(rows, kRows, groups, slots);
        }
        if (!round_out || balanced * groups % 16 == 0)
            kRows = balanced;
        else
            grid_cap = 0;
    }
    return {xp, wg, kRows, groups, wide, grid_cap};
}

// Where a GEMV reads a rounding of n values (GemvRounding's layout; normed: with the blocks'
// sums of squares) at float off of view v: its words 16-byte aligned, its scale pairs 8-byte
// aligned, all of it inside the view.
bool GemvKernels::rounding_readable(View v, uint32_t off, uint32_t n, bool normed) {
    const uint32_t floats =
        normed ? GemvKernels::normed_rounding_floats(n) : GemvKernels::rounding_floats(n);
    return v.offset % 16 == 0 && off % 4 == 0 && (off + n / 4) % 2 == 0 &&
           (uint64_t)(off + floats) * 4 <= v.range;
}

// Where a GEMV writes the rounding of its n rows: whole 16-value blocks, its words 16-byte
// aligned from the view's start, all of it inside the view.
bool GemvKernels::rounding_writable(View v, uint32_t off, uint32_t n, bool normed) {
    const uint32_t floats =
        normed ? GemvKernels::normed_rounding_floats(n) : GemvKernels::rounding_floats(n);
    return n % 16 == 0 && off % 4 == 0 && (uint64_t)(off + floats) * 4 <= v.range;
}

// A gated norm over rows of cols values: heads of whole 16-value blocks that divide the rows.
bool GemvKernels::gated_fits(const GemvGatedIn& g, uint32_t cols) {
    return g.head % 16 == 0 && g.groups > 0 && cols % g.head == 0;
}

bool GemvKernels::gemv_rounds(QType t, uint32_t rows, uint32_t cols, bool pair, bool norm,
                              GemvPart share) const {
    if (!gemv_module(t)) return false;
    if (gemv_tiled_for(t, cols)) return rows % 16 == 0;  // record_on_tiled_gemv
    const GemvLaunch l = gemv_launch(t, rows, cols, false, pair, norm, share, true);
    return l.x == GemvX::bytes && rows % 16 == 0 && l.k_rows * l.groups % 16 == 0;
}

void GemvKernels::gemv_record(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols,
                              View x, uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                              const GemvFusion* fuse, const uint32_t* pair, const GemvNormIn* norm,
                              GemvPart share, const GemvRounding* rounding,
                              const GemvGatedIn* gated) {
    const char* mod = gemv_module(t);
    if (!mod) fail("no GEMV kernel for weights of type {}", qtype_name(t));
    DL_ASSERT(!(norm && fuse));
    DL_ASSERT(!(rounding && fuse && rounding->out_off != kNone));
    const Features& f = dev_.features();
    const bool round_out = rounding && rounding->out_off != kNone;
    if (!fuse && record_on_tiled_gemv(cl, t, w, rows, cols, x, x_off, y, y_off, accumulate, pair,
                                      norm, rounding, gated))
        return;
    if (round_out && rounding->out_norm.buffer != VK_NULL_HANDLE)
        fail("a GEMV ({} x {} {}) rounds its rows times a norm's weights only on the tiled GEMV",
             rows, cols, qtype_name(t));
    const GemvLaunch l = gemv_launch(t, rows, cols, fuse, pair, norm, share, round_out);
    const GemvX xp = l.x;
    const uint32_t wg = l.wg, kRows = l.k_rows, groups = l.groups, wide = l.wide;
    if (rounding && rounding->x_rounded &&
        (xp != GemvX::bytes || norm || !rounding_readable(x, x_off, cols, false)))
        fail("a GEMV over rounded x ({} x {} {}) at float {} cannot read it here", rows, cols,
             qtype_name(t), x_off);
    if (round_out && (xp != GemvX::bytes || kRows * groups % 16 ||
                      !rounding_writable(y, rounding->out_off, rows, false)))
        fail("a GEMV ({} x {} {}) cannot round its rows to float {} here", rows, cols,
             qtype_name(t), rounding->out_off);
    if (gated &&
        (xp != GemvX::bytes || fuse || pair || norm || rounding || !gated_fits(*gated, cols)))
        fail("a GEMV over a DeltaNet output before its gated norm ({} x {} {}) cannot run here",
             rows, cols, qtype_name(t));
    if (norm && xp != GemvX::bytes)
        fail(
            "a GEMV over a norm's input ({} x {} {}) needs x as int8, which it does not take "
            "here",
            rows, cols, qtype_name(t));
    if (norm && (norm->norm_w.offset % 16 || norm->norm_w.range < (uint64_t)cols * 4))
        fail(
            "the norm weights of a GEMV over a norm's input are not a 16-byte aligned view of "
            "{} floats",
            cols);
    // 16-byte vector loads need 16-byte aligned starts; the views' offsets decide (the fields of
    // blocks held in tiles, weight_layout.h, are 16-byte aligned from the matrix's start).
    const uint32_t row_bytes = (uint32_t)row_size(t, cols), mode = accumulate ? 1u : 0u;
    uint32_t w16 = w.offset % 16 == 0 && (!pair || (pair[0] % 16 == 0 && pair[1] % 16 == 0));
    uint32_t x16 = x.offset % 16 == 0 && x_off % 4 == 0 ? 1 : 0;
    std::string name = mod;
    if (fuse) name += "_norm";
    if (pair) name += "_swiglu";
    if (norm) name += "_nin";
    if (gated) name += "_gin";
    name += gemv_x_suffix(xp);
    // The byte path's subgroup modules round x with shuffles (gemv.comp quantize_x_lanes).
    if (f.subgroup_arithmetic && (xp != GemvX::bytes || f.subgroup_shuffle)) name += "_sg";
    // Measured on an H200 (decode tg128, docs/perf/history.md 2026-11-30): 2 workgroups of 512 a
    // multiprocessor, 9B 222.6 -> 228.4 t/s, Qwen3-8B 215.7 -> 221.2 (1: 203, 4: 226.5); the
    // F32 path's small workgroups need the whole grid (0.8B: 557 -> 289 at 2).
    uint32_t blocks = (rows + kRows * groups - 1) / (kRows * groups);
    if (xp == GemvX::bytes && tuning.gemv_waves && f.sm_count)
        blocks = std::min(blocks, tuning.gemv_waves * f.sm_count);
    if (tuning.gemv_grid) blocks = std::min(blocks, tuning.gemv_grid);
    if (l.grid) blocks = std::min(blocks, l.grid);
    auto [gx, gy] = grid(f, blocks);
    // The shared copy of x is sized by the row (a pipeline per row length); over x another GEMV
    // rounded there is none.
    const uint32_t x_pre = rounding && rounding->x_rounded ? 1 : 0;
    const uint32_t xblocks = xp == GemvX::global || x_pre ? 1 : cols / 32;
    const uint32_t eps = std::bit_cast<uint32_t>(norm ? norm->eps : gated ? gated->eps : 0.f);
    std::vector<uint32_t> spec = {
        wg * groups, kRows, w16, x16,   xblocks,  tuning.gemv_omitted_work,
        groups,      wide,  eps, x_pre, round_out};
    if (gated) spec.insert(spec.end(), {gated->head, gated->groups});
    // Weights, x, y, and NORM_IN's norm weights.
    auto plain = [&](const auto& push) {
        const Kernel& k = pipes_.get(name, norm ? 4 : 3, sizeof(push), spec);
        if (norm)
            cl.dispatch(k, {w, x, y, norm->norm_w}, push, gx, gy);
        else
            cl.dispatch(k, {w, x, y}, push, gx, gy);
    };
    const uint32_t xr_off = round_out ? rounding->out_off : 0;
    if (pair)
        return plain(
            GemvPairPush{cols, rows, row_bytes, x_off, y_off, 0, pair[0], pair[1], xr_off});
    if (gated)
        return plain(
            GemvGatedPush{cols, rows, row_bytes, x_off, y_off, mode, xr_off, gated->ss_off});
    if (!fuse) return plain(GemvPush{cols, rows, row_bytes, x_off, y_off, mode, xr_off});
    const Kernel& k = pipes_.get(name, 5, sizeof(GemvFusedPush), spec);
    GemvFusedPush p{cols, rows,         row_bytes,         x_off,    y_off,
                    mode, fuse->xn_off, fuse->counter_idx, fuse->eps};
    DL_ASSERT(fuse->norm_w.buffer != VK_NULL_HANDLE && fuse->counter.buffer != VK_NULL_HANDLE);
    DL_ASSERT(fuse->norm_w.range >= (uint64_t)rows * 4);
    cl.dispatch(k, {w, x, y, fuse->norm_w, fuse->counter}, p, gx, gy);
}

}  // namespace dl::vk
