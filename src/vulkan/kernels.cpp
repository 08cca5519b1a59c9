// Kernel launchers (see kernels.h): push-constant layouts mirror the shaders' Push blocks.
#include "vulkan/kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/error.h"
#include "vulkan/spirv_shared.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {

namespace {

// What a compiler may add to a module's shared memory beyond its declarations (an H200 reported
// 43136 bytes for the 43008 the 9B's Q6_K GEMV over a norm's input declares), so a shape chosen
// to fit does.
constexpr uint32_t kSharedMargin = 512;

// The shared memory module `name` declares with specialization constants spec
// (spirv_shared.h), with the margin; empty where the build lacks the module.
std::optional<uint64_t> module_shared_bytes(const char* name, std::vector<uint32_t> spec) {
    auto b = workgroup_bytes(find_module(name), spec);
    if (!b) return std::nullopt;
    return *b + kSharedMargin;
}

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
struct NormPush {
    uint32_t n, nrows, x_off, x_stride, y_off, y_stride;
    float eps;
};
struct SwigluPush {
    uint32_t n, g_off, u_off, y_off;
};
struct ArgmaxPush {
    uint32_t n, l_off, out_off;
};
struct SamplePush {
    uint32_t n, l_off, out_idx, par;
};
struct StreamReadPush {
    uint32_t n, groups, out_off;
};
struct GemvTilePush {
    uint32_t ncols, nrows, x_off, y_off, mode, g_off, u_off, xr_off, gin_off;
};
struct StageChainPush {
    uint32_t n, round0, rounds, spin_limit, flag, skew;
};
struct MatmulPush {
    uint32_t m, n, k;
};

struct GetRowsPush {
    uint32_t ncols, nrows, row_bytes, id_off, out_off, n;
};
struct DeltaNetPush {
    uint32_t n_k_heads, n_v_heads, qkv_off, z_off, b_off, a_off, y_off, conv_off, dt_off, ssma_off,
        norm_off;
    float eps;
    uint32_t ss_off;
};

struct AttnDecodePush {
    uint32_t n_head, n_kv, head_dim, q_off, n_split;
    float scale;
    uint32_t gate_off, gate_stride, o_off;
    uint32_t q_stride, k_off, v_off, qn_off, kn_off, freq_off, n_rot;
    float eps;
    uint32_t interleaved, one_split;
    uint32_t ro_off;
};

const char* type_suffix(QType t) {
    switch (t) {
        case QType::F32:
            return "f32";
        case QType::F16:
            return "f16";
        case QType::Q4_0:
            return "q4_0";
        case QType::Q8_0:
            return "q8_0";
        case QType::Q4_K:
            return "q4_k";
        case QType::Q5_K:
            return "q5_k";
        case QType::Q6_K:
            return "q6_k";
        default:
            return nullptr;
    }
}

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

void Kernels::get_rows(CommandList& cl, QType t, View table, uint32_t rows, uint32_t cols, View ids,
                       uint32_t id_off, View out, uint32_t out_off, uint32_t n) {
    const char* suf = type_suffix(t);
    if (!suf) fail("no row-fetch kernel for a table of type {}", qtype_name(t));
    const Kernel& k = pipes_.get(fmt::format("get_rows_{}", suf), 3, sizeof(GetRowsPush));
    GetRowsPush p{cols, rows, (uint32_t)row_size(t, cols), id_off, out_off, n};
    auto [gx, gy] = grid(dev_.features(), n);
    cl.dispatch(k, {table, ids, out}, p, gx, gy);
}

// The parts a column's d_k rows are cut into (deltanet_step.comp KS) for column groups of cw, so
// a thread holds at most 32 state values in registers.
static uint32_t deltanet_step_parts(const Features& f, uint32_t d_k, uint32_t cw) {
    uint32_t ks = 1;
    while (d_k / ks > 32 && d_k % (ks * 2) == 0 && cw * ks * 2 <= f.max_workgroup_invocations)
        ks *= 2;
    return ks;
}

std::optional<Decline> Kernels::deltanet_step_supported(const Features& f, uint32_t d_k,
                                                        uint32_t d_v, uint32_t conv_kernel) {
    if (d_v == 0 || (d_v & (d_v - 1)) != 0)
        return Decline{fmt::format("DeltaNet value head size {} is not a power of two", d_v)};
    if (d_v > f.max_workgroup_invocations)
        return Decline{
            fmt::format("DeltaNet value head size {} exceeds the device's {} threads per workgroup",
                        d_v, f.max_workgroup_invocations)};
    if (conv_kernel < 1 || conv_kernel > 16)
        return Decline{fmt::format("DeltaNet conv kernel {} unsupported", conv_kernel)};
    // deltanet_step.comp's shared memory at its widest workgroup (a whole head).
    const uint32_t ks = deltanet_step_parts(f, d_k, d_v);
    const auto bytes =
        module_shared_bytes("deltanet_step", {d_v * ks, d_k, conv_kernel, d_v, d_v, ks});
    if (!bytes) return Decline{"this build cannot size the DeltaNet step's shared memory"};
    if (*bytes > f.max_shared_memory)
        return Decline{
            fmt::format("DeltaNet head sizes {}/{} exceed the device's shared memory", d_k, d_v)};
    return std::nullopt;
}

uint32_t Kernels::deltanet_groups(uint32_t d_v, bool split) const {
    if (split && deltanet_columns > 0 && deltanet_columns < d_v &&
        (deltanet_columns & (deltanet_columns - 1)) == 0)
        return d_v / deltanet_columns;
    return 1;
}

void Kernels::deltanet_step(CommandList& cl, const DeltaNetStep& a, View act, View params,
                            View ring, View state, View tok, View counter) {
    const Features& f = dev_.features();
    if (auto d = deltanet_step_supported(f, a.d_k, a.d_v, a.conv_kernel)) fail("{}", d->reason);
    // Column groups of cw (see deltanet_step.comp), each column's d_k rows in ks parts so a
    // thread holds at most 32 state values in registers.
    const bool norm_out = a.ss_off != kNone;
    const uint32_t cw =
        a.d_v / deltanet_groups(a.d_v, norm_out || counter.buffer != VK_NULL_HANDLE);
    if (a.round_y && (!norm_out || cw % 16))
        fail(
            "the DeltaNet step rounds y only leaving its norm to the reader, in groups of 16+ "
            "columns (not {})",
            cw);
    const uint32_t ks = deltanet_step_parts(f, a.d_k, cw);
    if (cw == a.d_v || norm_out) counter = tok;  // bound, never read
    // The q and k norms' sums in one subgroup reduction and one barrier, where the tree took
    // 2 · (log2(WG) + 2) barriers: 9B decode profile on an H200, deltanet 273.8 -> 256.9 us a
    // token (docs/PERF.md 2026-12-01, evening).
    const bool sg = deltanet_subgroups && f.subgroup_arithmetic;
    const Kernel& k = pipes_.get(sg ? "deltanet_step_sg" : "deltanet_step", 6, sizeof(DeltaNetPush),
                                 {cw * ks, a.d_k, a.conv_kernel, a.d_v, cw, ks,
                                  a.round_y  ? 2u
                                  : norm_out ? 1u
                                             : 0u});
    DeltaNetPush p{a.n_k_heads,
                   a.n_v_heads,
                   a.qkv_off,
                   a.z_off,
                   a.b_off,
                   a.a_off,
                   a.y_off,
                   a.conv_off,
                   a.dt_off,
                   a.ssm_a_off,
                   a.norm_off,
                   a.eps,
                   norm_out ? a.ss_off : 0u};
    cl.dispatch(k, {act, params, ring, state, tok, counter}, p, a.n_v_heads, a.d_v / cw);
}

std::optional<Decline> Kernels::attention_supported(const Features& f, uint32_t head_dim,
                                                    uint32_t n_head, uint32_t n_kv) {
    if (head_dim == 0 || head_dim > 256 || head_dim % 2)
        return Decline{fmt::format(
            "attention head size {} has no device kernel (even sizes up to 256)", head_dim)};
    if (n_kv == 0 || n_head % n_kv)
        return Decline{fmt::format("{} query heads do not group evenly over {} key/value heads",
                                   n_head, n_kv)};
    if (f.max_workgroup_invocations < 128)
        return Decline{"the device allows fewer than 128 threads a workgroup"};
    return std::nullopt;
}

uint32_t Kernels::attention_splits(uint32_t n_ctx, uint32_t max_splits) {
    const uint32_t chunks = std::max<uint32_t>((n_ctx + kAttnSplit - 1) / kAttnSplit, 1);
    return std::clamp<uint32_t>(chunks, 1, std::clamp<uint32_t>(max_splits, 1, kAttnMaxSplits));
}

uint64_t Kernels::attention_partials(const Attention& a) {
    return (uint64_t)a.n_head * attention_splits(a.n_ctx, a.max_splits) * (a.head_dim + 2);
}

std::pair<uint32_t, uint32_t> Kernels::attention_shape(const Attention& a) const {
    // Query heads a workgroup: up to four of one key/value head (each cache row read once for
    // them), at most 512 query values (g · head_dim), as many as the shared memory holds. On an
    // H200 the 9B's attention, which runs every fourth layer, took twice as long in the token as
    // right after a run of itself; four heads of 256 a workgroup (128 registers, 17 KB of shared
    // memory) paid more of that than two (64, 9 KB): tg128 305.5 -> 310.5 t/s at two, equal at
    // 16384 positions (docs/PERF.md 2026-12-01).
    const Features& f = dev_.features();
    const uint32_t ratio = a.n_head / a.n_kv;
    uint32_t g = ratio % 4 == 0 ? 4 : ratio % 2 == 0 ? 2 : 1;
    while (g > 1 && g * a.head_dim > 512) g /= 2;
    if (a.heads_a_group) {
        if (ratio % a.heads_a_group)
            fail(
                "the decode attention cannot take {} query heads a workgroup: {} share a key/value "
                "head",
                a.heads_a_group, ratio);
        g = a.heads_a_group;
    }
    uint32_t wg = f.max_workgroup_invocations >= 256 ? 256 : 128;
    // attn_decode.comp's shared memory for g heads a workgroup of wg threads.
    const uint32_t round_o = a.round_off != kNone;
    auto shared = [&](uint32_t gg, uint32_t w) {
        auto b = module_shared_bytes("attn_decode", {w, a.head_dim, gg, 1, 0, round_o});
        if (!b) fail("this build cannot size the shared memory of its decode attention");
        return *b;
    };
    while (shared(g, wg) > f.max_shared_memory && (g > 1 || wg > 128)) {
        if (g > 1)
            g /= 2;
        else
            wg = 128;
    }
    return {g, wg};
}

uint32_t Kernels::attention_group(const Attention& a) const {
    return attention_shape(a).first;
}

const Kernel& Kernels::attention_kernel(const Attention& a) {
    const auto [g, wg] = attention_shape(a);
    // A thread's value rows of a chunk, all loads in flight at once (at most 32), and loaded
    // before the scores where one step holds them all (H200, us a layer at 16384 / 32768
    // positions: Qwen3.5-9B 49.0 / 75.5 -> 42.7 / 64.5, Qwen3-8B 46.3 / 76.6 -> 39.3 / 63.3; on
    // 512 threads, fewer rows a thread, both were slower).
    const uint32_t rows_a_thread = kAttnSplit * (a.head_dim / 2) / wg;
    const uint32_t vstep = std::clamp<uint32_t>(rows_a_thread, 1, 32);
    const uint32_t vpre = wg % (a.head_dim / 2) == 0 && rows_a_thread >= 1 && rows_a_thread <= 32 &&
                          rows_a_thread * wg == kAttnSplit * (a.head_dim / 2);
    return pipes_.get("attn_decode", 7, sizeof(AttnDecodePush),
                      {wg, a.head_dim, g, vstep, vpre, (uint32_t)(a.round_off != kNone)});
}

void Kernels::prepare_attention(const Attention& a) {
    attention_kernel(a);
}

void Kernels::attention(CommandList& cl, const Attention& a, View act, View params, View k_cache,
                        View v_cache, View partials, View tok, View counter) {
    if (auto d = attention_supported(dev_.features(), a.head_dim, a.n_head, a.n_kv))
        fail("{}", d->reason);
    DL_ASSERT(counter.buffer != VK_NULL_HANDLE && counter.range >= (uint64_t)a.n_head * 4);
    const uint32_t round_o = a.round_off != kNone;
    if (round_o && a.head_dim % 16)
        fail("the decode attention rounds heads of a multiple of 16 values, not {}", a.head_dim);
    const Features& f = dev_.features();
    const auto [g, wg] = attention_shape(a);
    // Splits: about two workgroups a multiprocessor once the context is long (H200,
    // DecodeAttentionSpeed.Report at 16384 / 32768 positions, us a layer: Qwen3.5-9B, 4 head
    // groups, 64 splits 50 / 79, 128: 59 / 90, 32: 62 / 107; Qwen3-8B, 8 groups, 32 splits
    // 46 / 77, 64: 51 / 83); more splits lengthen the one-workgroup merge.
    const uint32_t groups = a.n_head / g;
    const uint32_t target =
        f.sm_count ? std::max<uint32_t>(2 * f.sm_count / groups, 8) : kAttnMaxSplits;
    const uint32_t n_split = attention_splits(a.n_ctx, std::min(a.max_splits, target));
    const uint64_t cache_bytes = attention_cache_bytes(a.n_ctx, a.n_kv, a.head_dim);
    if (k_cache.range < cache_bytes || v_cache.range < cache_bytes)
        fail(
            "the decode attention's caches hold {} and {} bytes, not the {} a context of {} rows "
            "takes",
            k_cache.range, v_cache.range, cache_bytes, a.n_ctx);
    const Kernel& dec = attention_kernel(a);
    AttnDecodePush dp{a.n_head,       a.n_kv,        a.head_dim,
                      a.q_off,        n_split,       1.0f / std::sqrt((float)a.head_dim),
                      a.gate_off,     a.gate_stride, a.o_off,
                      a.q_stride,     a.k_off,       a.v_off,
                      a.q_norm_off,   a.k_norm_off,  a.freq_off,
                      a.n_rot,        a.eps,         a.interleaved ? 1u : 0u,
                      attn_one_split, a.round_off};
    DL_ASSERT(partials.range >= attention_partials(a) * 4);
    cl.dispatch(dec, {act, k_cache, v_cache, partials, tok, counter, params}, dp, a.n_head / g,
                n_split);
}

bool Kernels::gemv_supports(QType t) {
    return gemv_module(t) != nullptr;
}

// The largest power of two <= want that the device allows in one workgroup.
uint32_t Kernels::wg_size(uint32_t want) const {
    uint32_t limit = std::max<uint32_t>(dev_.features().max_workgroup_invocations, 64);
    uint32_t s = 1;
    while (s * 2 <= std::min(want, limit)) s *= 2;
    return s;
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
uint32_t Kernels::gemv_shared_bytes(GemvX x, uint32_t cols, uint32_t wg, uint32_t rows) {
    return (x == GemvX::bytes ? cols / 32 * 48 : 0) + wg * rows * 4 + kSharedMargin;
}

bool Kernels::block_format(QType t) {
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

static const char* gemv_x_suffix(Kernels::GemvX x) {
    return x == Kernels::GemvX::bytes ? "_i8" : "";
}

// Rows a row group of the launcher's shape (see gemv_record): the byte path rounds x once a
// workgroup, so its workgroups take 8 rows a group over matrices of many rows (the FFN pair, the
// head); over 4096 rows or fewer, or rows of 8192+ values (out and down projections: 128
// workgroups of 8 rows a group for 132 multiprocessors), 4, which doubles their workgroups.
// H200 tg128, two rounds: rows of 8192+, 9B 233.3 -> 237.7 t/s, Qwen3-8B 227.9 -> 230.9; then
// 4096 rows or fewer, 9B 231.1 -> 242.9, Qwen3-8B 221.2 -> 230.9.
static uint32_t gemv_rows(Kernels::GemvX x, uint32_t rows, uint32_t cols) {
    if (x != Kernels::GemvX::bytes) return 4;
    return rows <= 4096 || cols >= 8192 ? 4 : 8;
}

Kernels::GemvX Kernels::gemv_x_for(QType t, uint32_t cols) const {
    const Features& f = dev_.features();
    if (!block_format(t)) return GemvX::global;
    GemvX x = gemv_x;
    if (x == GemvX::automatic) {
        // Measured on an H200 (decode tg128, docs/PERF.md 2026-11-30 and 2026-12-01): bytes for
        // every block format over rows of 4096+ (9B 216.5 -> 224.2 t/s against bytes for the
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

void Kernels::gemv(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                   uint32_t x_off, View y, uint32_t y_off, bool accumulate, GemvPart share,
                   const GemvRounding* rounding) {
    gemv_record(cl, t, w, rows, cols, x, x_off, y, y_off, accumulate, nullptr, nullptr, nullptr,
                share, rounding);
}

void Kernels::gemv_fused(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                         uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                         const GemvFusion& fuse, const GemvRounding* rounding) {
    gemv_record(cl, t, w, rows, cols, x, x_off, y, y_off, accumulate, &fuse, nullptr, nullptr, {},
                rounding);
}

void Kernels::gemv_normed(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                          uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                          const GemvNormIn& norm, GemvPart share, const GemvRounding* rounding) {
    gemv_record(cl, t, w, rows, cols, x, x_off, y, y_off, accumulate, nullptr, nullptr, &norm,
                share, rounding);
}

void Kernels::gemv_swiglu(CommandList& cl, QType t, View w, uint64_t g_off, uint64_t u_off,
                          uint32_t rows, uint32_t cols, View x, uint32_t x_off, View y,
                          uint32_t y_off, const GemvNormIn* norm, const GemvRounding* rounding) {
    // Matrices held in tiles are found by row handles (tiled_rows.glsl), to which the offsets
    // are added: multiples of 32 there.
    const uint64_t bytes = device_bytes(t, cols, rows), align = tiled(t) ? 32 : 4;
    if (g_off % align || u_off % align || std::max(g_off, u_off) + bytes > w.range ||
        std::max(g_off, u_off) > UINT32_MAX)
        fail("the SwiGLU GEMV pair at bytes {} and {} does not lie in its weight view", g_off,
             u_off);
    const uint32_t pair[2] = {(uint32_t)g_off, (uint32_t)u_off};
    gemv_record(cl, t, w, rows, cols, x, x_off, y, y_off, false, nullptr, pair, norm, {}, rounding);
}

void Kernels::gemv_gated(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                         uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                         const GemvGatedIn& g, const GemvRounding* rounding) {
    if (g.ss_off == kNone && !(rounding && rounding->x_rounded))
        fail("a GEMV in the gated form with no factor ({} x {} {}) reads x rounded already", rows,
             cols, qtype_name(t));
    gemv_record(cl, t, w, rows, cols, x, x_off, y, y_off, accumulate, nullptr, nullptr, nullptr, {},
                rounding, &g);
}

bool Kernels::gemv_gates(QType t, uint32_t cols) const {
    return gemv_module(t) && gemv_x_for(t, cols) == GemvX::bytes &&
           !find_module(std::string(gemv_module(t)) + "_gin_i8").empty();
}

uint32_t Kernels::balanced_rows(uint32_t rows, uint32_t k_rows, uint32_t groups, uint32_t slots) {
    auto cost = [&](uint32_t kr) {
        const uint64_t blocks = ((uint64_t)rows + kr * groups - 1) / (kr * groups);
        return (double)((blocks + slots - 1) / slots) * kr;
    };
    while (k_rows > 1 && cost(k_rows / 2) < 0.9 * cost(k_rows)) k_rows /= 2;
    return k_rows;
}

Kernels::SharedShape Kernels::shared_shape(uint32_t rows, uint32_t k_rows, uint32_t groups,
                                           uint32_t slots, float share) {
    const uint32_t part = std::max<uint32_t>(1, (uint32_t)std::lround(slots * (double)share));
    const uint32_t blocks = (rows + k_rows * groups - 1) / (k_rows * groups);
    if (blocks >= part) return {k_rows, 0};
    return {balanced_rows(rows, k_rows, groups, part), part};
}

Kernels::GemvLaunch Kernels::gemv_launch(QType t, uint32_t rows, uint32_t cols, bool fuse,
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
    // its 4096 rows one row block a workgroup). Measured on an H200 (docs/PERF.md 2026-11-30, late
    // night), tg128 in two rounds: 9B 271.3 / 274.0 -> 297.3 / 296.0 t/s, Qwen3-8B 269.3 / 272.1 ->
    // 295.4 / 299.6. Wide Q6_K slices over 4096-value rows measured slower (GemvSpeed.Rows, 8192
    // rows: 13.3 -> 16.2 us), over the down projections faster (21.0 -> 18.5 us).
    // Under `automatic`, rows too short to give each invocation of a subgroup a wide slice keep
    // narrow ones (the 0.8B's 1024-value Q4_K rows: 16 wide slices for a group of 32 threads).
    // H200 tg128, three rounds: 0.8B 795.2 / 838.1 / 828.4 -> 862.0 / 898.8 / 804.3 t/s.
    const bool wide_type =
        gemv_wide == GemvWide::all
            ? t == QType::Q4_K || t == QType::Q6_K
            : (t == QType::Q4_K || (t == QType::Q6_K && cols >= 8192)) &&
                  gemv_slices(t, cols) / 2 >= std::max<uint32_t>(f.max_subgroup_size, 1);
    const uint32_t wide = xp == GemvX::bytes && gemv_wide != GemvWide::off && wide_type ? 1 : 0;
    uint32_t slices = gemv_slices(t, cols) >> wide, want = 32;
    while (want < slices && want < (wide ? 64u : 128u)) want *= 2;
    uint32_t wg = wg_size(want);
    if (wide && kRows > 1) kRows /= 2;
    if (gemv_shape.threads) {
        wg = wg_size(gemv_shape.threads);
        kRows = gemv_shape.rows;
    }
    // Row groups (gemv.comp GROUPS) for the byte path: the rounded x then serves more rows.
    // The Q6_K GEMV with the norm epilogue takes twice as many: an H200's compiler gave it 91
    // registers at 512 invocations (one workgroup a multiprocessor, against two for every other
    // byte GEMV at 58-64); at 1024 it must fit in 64. tg128, two rounds: 9B 255.6 -> 261.5 t/s,
    // Qwen3-8B 243.1 -> 250.3 (docs/PERF.md 2026-11-30, night). So does the Q6_K GEMV over a
    // norm's input: 117 registers at 512, 64 at 1024 (9B qkv, 8192 rows: tg128 +2.5 %), but not
    // over the head's 248320 rows, which ran faster at 512 (297 against 317 us a token;
    // docs/PERF.md 2026-12-01).
    // Groups of fewer than 128 threads (wide slices, short rows) keep a workgroup's invocations
    // with more groups: the 0.8B's 1024-value rows, 32 threads a group, take 16 groups.
    const uint32_t group_cap = gemv_groups *
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
    // 330.2 (docs/PERF.md 2026-12-01, noon).
    // A GEMV that shares its stage takes its own shape (shared_shape) only where it would leave
    // its part of the device idle: the 0.8B's DeltaNet qkv (6144 rows of 1024 values) took 24
    // workgroups of 1024 invocations for 132 multiprocessors, 96 with it. On an H200 (decode
    // profile, us a token): 0.8B input projections 238.6 -> 199.5, the token 1031.7 -> 995.2; the
    // 9B's and Qwen3-8B's shapes stay (docs/PERF.md 2026-12-02, late morning). Giving every GEMV of
    // a stage its share of the slots cost Qwen3-8B 4 % (its q, 256 blocks, then took two rounds).
    // A GEMV that rounds its rows for the next keeps row blocks of whole 16-value blocks.
    uint32_t grid_cap = 0;
    if (xp == GemvX::bytes && gemv_balance && !gemv_shape.threads) {
        const uint32_t slots =
            gemv_slots   ? gemv_slots
            : gemv_waves ? f.sm_count * std::max<uint32_t>(1, gemv_waves * 512 / (wg * groups))
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
static bool rounding_readable(View v, uint32_t off, uint32_t n, bool normed) {
    const uint32_t floats =
        normed ? Kernels::normed_rounding_floats(n) : Kernels::rounding_floats(n);
    return v.offset % 16 == 0 && off % 4 == 0 && (off + n / 4) % 2 == 0 &&
           (uint64_t)(off + floats) * 4 <= v.range;
}

// Where a GEMV writes the rounding of its n rows: whole 16-value blocks, its words 16-byte
// aligned from the view's start, all of it inside the view.
static bool rounding_writable(View v, uint32_t off, uint32_t n, bool normed) {
    const uint32_t floats =
        normed ? Kernels::normed_rounding_floats(n) : Kernels::rounding_floats(n);
    return n % 16 == 0 && off % 4 == 0 && (uint64_t)(off + floats) * 4 <= v.range;
}

// A gated norm over rows of cols values: heads of whole 16-value blocks that divide the rows.
static bool gated_fits(const Kernels::GemvGatedIn& g, uint32_t cols) {
    return g.head % 16 == 0 && g.groups > 0 && cols % g.head == 0;
}

bool Kernels::gemv_rounds(QType t, uint32_t rows, uint32_t cols, bool pair, bool norm,
                          GemvPart share) const {
    if (!gemv_module(t)) return false;
    if (gemv_tiled_for(t, cols)) return rows % 16 == 0;  // tile_route
    const GemvLaunch l = gemv_launch(t, rows, cols, false, pair, norm, share, true);
    return l.x == GemvX::bytes && rows % 16 == 0 && l.k_rows * l.groups % 16 == 0;
}
void Kernels::gemv_record(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                          uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                          const GemvFusion* fuse, const uint32_t* pair, const GemvNormIn* norm,
                          GemvPart share, const GemvRounding* rounding, const GemvGatedIn* gated) {
    const char* mod = gemv_module(t);
    if (!mod) fail("no GEMV kernel for weights of type {}", qtype_name(t));
    DL_ASSERT(!(norm && fuse));
    DL_ASSERT(!(rounding && fuse && rounding->out_off != kNone));
    const Features& f = dev_.features();
    const bool round_out = rounding && rounding->out_off != kNone;
    if (!fuse && tile_route(cl, t, w, rows, cols, x, x_off, y, y_off, accumulate, pair, norm,
                            rounding, gated))
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
            "a GEMV over a norm's input ({} x {} {}) needs x in bytes, which it does not take "
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
    // Measured on an H200 (decode tg128, docs/PERF.md 2026-11-30): 2 workgroups of 512 a
    // multiprocessor, 9B 222.6 -> 228.4 t/s, Qwen3-8B 215.7 -> 221.2 (1: 203, 4: 226.5); the
    // F32 path's small workgroups need the whole grid (0.8B: 557 -> 289 at 2).
    uint32_t blocks = (rows + kRows * groups - 1) / (kRows * groups);
    if (xp == GemvX::bytes && gemv_waves && f.sm_count)
        blocks = std::min(blocks, gemv_waves * f.sm_count);
    if (gemv_grid) blocks = std::min(blocks, gemv_grid);
    if (l.grid) blocks = std::min(blocks, l.grid);
    auto [gx, gy] = grid(f, blocks);
    // The shared copy of x is sized by the row (a pipeline per row length); over x another GEMV
    // rounded there is none.
    const uint32_t x_pre = rounding && rounding->x_rounded ? 1 : 0;
    const uint32_t xblocks = xp == GemvX::global || x_pre ? 1 : cols / 32;
    const uint32_t eps = std::bit_cast<uint32_t>(norm ? norm->eps : gated ? gated->eps : 0.f);
    std::vector<uint32_t> spec = {wg * groups, kRows, w16, x16,   xblocks,  gemv_ablate,
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

void Kernels::rms_norm(CommandList& cl, View w, View x, uint32_t x_off, uint32_t x_stride, View y,
                       uint32_t y_off, uint32_t y_stride, uint32_t n, uint32_t nrows, float eps) {
    uint32_t wg = wg_size(256);
    const Kernel& k = pipes_.get("rms_norm", 3, sizeof(NormPush), {wg});
    NormPush p{n, nrows, x_off, x_stride, y_off, y_stride, eps};
    auto [gx, gy] = grid(dev_.features(), nrows);
    cl.dispatch(k, {w, x, y}, p, gx, gy);
}

void Kernels::swiglu(CommandList& cl, View g, uint32_t g_off, View u, uint32_t u_off, View y,
                     uint32_t y_off, uint32_t n) {
    const Kernel& k = pipes_.get("swiglu", 3, sizeof(SwigluPush));
    SwigluPush p{n, g_off, u_off, y_off};
    auto [gx, gy] = grid(dev_.features(), (n + 255) / 256);
    cl.dispatch(k, {g, u, y}, p, gx, gy);
}

void Kernels::argmax(CommandList& cl, View logits, uint32_t l_off, uint32_t n, View out,
                     uint32_t out_off) {
    uint32_t wg = wg_size(1024);
    const Kernel& k = pipes_.get("argmax", 2, sizeof(ArgmaxPush), {wg});
    ArgmaxPush p{n, l_off, out_off};
    cl.dispatch(k, {logits, out}, p, 1);
}

// stream_read.comp's shape: 256 threads, 8 loads of 16 bytes each, unless the speed report
// forces another (stream_shape).
Kernels::StreamShape Kernels::stream_shape_now() const {
    return {wg_size(stream_shape.threads ? stream_shape.threads : 256),
            stream_shape.loads ? stream_shape.loads : 8, stream_shape.grid};
}

uint32_t Kernels::stream_read_groups(uint64_t bytes) const {
    const StreamShape sh = stream_shape_now();
    const uint64_t per_group = uint64_t(sh.threads) * sh.loads * 16;
    return (uint32_t)((bytes + per_group - 1) / per_group);
}

void Kernels::stream_read(CommandList& cl, View src, uint64_t bytes, View out, uint32_t out_off) {
    if (bytes % 16 || bytes / 16 > UINT32_MAX)
        fail("the read probe takes a multiple of 16 bytes under 64 GiB, not {}", bytes);
    const StreamShape sh = stream_shape_now();
    const uint32_t loop = sh.grid ? 1 : 0;
    const Kernel& k =
        pipes_.get("stream_read", 2, sizeof(StreamReadPush), {sh.threads, sh.loads, loop});
    const uint32_t groups = stream_read_groups(bytes);
    StreamReadPush p{(uint32_t)(bytes / 16), groups, out_off};
    auto [gx, gy] = grid(dev_.features(), sh.grid ? std::min(sh.grid, groups) : groups);
    cl.dispatch(k, {src, out}, p, gx, gy);
}

std::vector<uint8_t> Kernels::tile_rows(QType t, const uint8_t* w, uint32_t rows, uint32_t cols,
                                        uint32_t tile) {
    if ((t != QType::Q4_K && t != QType::Q6_K) || cols % 256 || !tile)
        fail("no tiled form of {} rows of {} {}", rows, cols, qtype_name(t));
    std::vector<uint8_t> out((uint64_t)(rows + tile - 1) / tile * tile * row_size(t, cols));
    to_tiles(t, cols, rows, tile, w, out.data());
    return out;
}

bool Kernels::gemv_tile_supported(QType t) const {
    const Features& f = dev_.features();
    // The module is absent from a build whose glslc lacks integer dot products.
    return f.integer_dot && f.subgroup_arithmetic && f.subgroup_shuffle &&
           f.min_subgroup_size >= 4 && (t == QType::Q4_K || t == QType::Q6_K) &&
           !find_module(std::string("gemv_tile_") + type_suffix(t)).empty();
}

uint64_t Kernels::split_bytes(uint32_t rows) {
    const uint64_t tiles = (rows + kTileRows - 1) / kTileRows;
    return (tiles + tiles * 4 * kTileRows) * 4;
}

// The copy of x (16 bytes and a scale pair a 16-value block), the slots' sums, the rows to round
// and the split's flag.
uint64_t Kernels::gemv_tile_shared_bytes(uint32_t cols, uint32_t threads) {
    return (uint64_t)cols / 16 * 24 + 4ull * threads + 4ull * kTileRows + 4;
}

bool Kernels::gemv_tiled_for(QType t, uint32_t cols) const {
    // On an H200 every shape measured faster on it than on gemv.comp reading the tiles, the
    // 9B's 12288-value down projection rows too (docs/PERF.md 2026-12-02, evening). Its
    // workgroups hold x whole (tile_route: at most kTileMaxThreads invocations).
    const Features& f = dev_.features();
    return gemv_tiled != GemvTiled::off && tiled(t) && gemv_tile_supported(t) && cols % 256 == 0 &&
           gemv_x_for(t, cols) == GemvX::bytes && kTileMaxThreads <= f.max_workgroup_invocations &&
           gemv_tile_shared_bytes(cols, kTileMaxThreads) <= f.max_shared_memory;
}

bool Kernels::tile_route(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                         uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                         const uint32_t* pair, const GemvNormIn* norm, const GemvRounding* rounding,
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
    // and each part 3+. On an H200 (docs/PERF.md 2026-12-02, evening) the down projections
    // gained (9B 572 -> 519 us a token, 0.8B 200 -> 182) and the 0.8B's output projections,
    // 8 runs in parts of 2, lost (169 -> 245).
    const Features& f = dev_.features();
    const uint32_t runs = cols / 256 * (t == QType::Q6_K ? 2 : 1);
    const uint32_t tiles = (rows + kTileRows - 1) / kTileRows;
    uint32_t parts = 1;
    if (accumulate && gemv_split.buffer != VK_NULL_HANDLE && !pair && !gemv_grid &&
        gemv_split.range >= split_bytes(rows)) {
        if (gemv_split_parts)
            parts = std::min(gemv_split_parts, runs);
        else if (f.sm_count && runs >= 12)
            parts = std::min({4u, (f.sm_count + tiles - 1) / tiles, runs / 3});
    }
    form.split = gemv_split;
    // A slot a run of its part, up to eight slots of 32 (four a matrix for a pair, half the
    // slots on each): 256 invocations measured fastest over 4096-value rows (docs/PERF.md
    // 2026-12-02, afternoon).
    uint32_t slots = 1;
    while (slots * parts < runs && slots < (pair ? 4u : 8u)) slots *= 2;
    // Two parts of eight slots as one workgroup of sixteen: on an H200 the 4096-value output
    // projections took 9B 339 -> 305 us a token, Qwen3-8B 389 -> 329, and the 12288-value down
    // projections 9B 531 -> 520 (docs/PERF.md 2026-12-03).
    if (gemv_wide_tiles && parts == 2 && slots == 8 &&
        kTileWideThreads <= f.max_workgroup_invocations &&
        gemv_tile_shared_bytes(cols, kTileWideThreads) <= f.max_shared_memory) {
        parts = 1;
        slots = 16;
    }
    // (tile_record refuses what the speed report's settings make unfit.)
    if (gemv_tile_slots) slots = gemv_tile_slots;
    uint32_t tile = gemv_work_tile ? gemv_work_tile : kTileRows;
    form.layout_tile = kTileRows;
    const uint32_t threads = tile * slots * (pair ? 2 : 1);
    // So gemv_tiled_for (or the test above, for a wide tile) found it fits.
    DL_ASSERT(gemv_tile_slots || gemv_work_tile ||
              threads <= (slots == 16 ? kTileWideThreads : kTileMaxThreads));
    tile_record(cl, t, w, rows, cols, x, x_off, y, y_off, accumulate, threads, tile, 0, gemv_grid,
                parts, form);
    return true;
}

void Kernels::gemv_tile(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View xr,
                        uint32_t x_off, View y, uint32_t y_off, bool accumulate, uint32_t threads,
                        uint32_t tile, uint32_t ablate, View norm_w, uint32_t grid_cap,
                        uint32_t ksplit, View split) {
    const bool norm = norm_w.buffer != VK_NULL_HANDLE;
    TileForm form;
    form.split = split;
    if (norm) {
        form.xmode = 1;
        form.eps = 1e-6f;
        form.norm_w = norm_w;
    }
    tile_record(cl, t, w, rows, cols, xr, x_off, y, y_off, accumulate, threads, tile, ablate,
                grid_cap, ksplit, form);
}

void Kernels::tile_record(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                          uint32_t x_off, View y, uint32_t y_off, bool accumulate, uint32_t threads,
                          uint32_t tile, uint32_t ablate, uint32_t grid_cap, uint32_t ksplit,
                          const TileForm& form) {
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
                                  ablate,
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

void Kernels::stage_chain(CommandList& cl, View x, View sync, uint32_t n, uint32_t round0,
                          uint32_t rounds, uint32_t groups, uint32_t spin_limit, uint32_t flag,
                          uint32_t skew) {
    if (n == 0 || rounds == 0 || groups == 0)
        fail("the stage chain takes values, rounds and workgroups, not {}, {}, {}", n, rounds,
             groups);
    const Kernel& k = pipes_.get("stage_chain", 2, sizeof(StageChainPush), {wg_size(256)});
    StageChainPush p{n, round0, rounds, spin_limit, flag, skew};
    cl.dispatch(k, {x, sync}, p, groups);
}

uint64_t Kernels::sample_scratch_bytes(uint32_t n) {
    // Chunks of at least 256 logits, each keeping up to kSampleTopK (logit, index) pairs.
    return std::max<uint64_t>((uint64_t)(n + 255) / 256 * 256 * 8, 16);
}

void Kernels::sample(CommandList& cl, View logits, uint32_t l_off, uint32_t n, View tok,
                     uint32_t out_idx, uint32_t par, View scratch) {
    uint32_t wg = wg_size(1024);
    const uint32_t chunk = sample_chunk;
    if (chunk % 256 || chunk == 0)
        fail("a sampling chunk of {} logits: not a multiple of 256", chunk);
    const uint32_t chunks = (n + chunk - 1) / chunk;
    if (chunks <= 1 || scratch.buffer == VK_NULL_HANDLE) {
        const Kernel& k = pipes_.get("sample", 2, sizeof(SamplePush), {wg});
        SamplePush p{n, l_off, out_idx, par};
        cl.dispatch(k, {logits, tok}, p, 1);
        return;
    }
    // Each chunk keeps min(top_k, chunk) pairs: at most kSampleTopK for chunks past 256.
    const uint64_t slots = (uint64_t)chunks * std::min(chunk, kSampleTopK);
    if (scratch.range < slots * 8 || slots * 8 > sample_scratch_bytes(n))
        fail("the sampling scratch holds {} bytes; {} chunks need {}", scratch.range, chunks,
             slots * 8);
    struct ChunkPush {
        uint32_t n, l_off, par;
    };
    const Kernel& k1 = pipes_.get("sample_chunks", 3, sizeof(ChunkPush), {wg_size(256), chunk});
    cl.dispatch(k1, {logits, tok, scratch}, ChunkPush{n, l_off, par}, chunks);
    cl.barrier();
    // The choice over chunks · min(top_k, chunk) entries (top_k is read from tok there).
    const Kernel& k2 = pipes_.get("sample_cand", 2, sizeof(SamplePush), {wg});
    cl.dispatch(k2, {scratch, tok}, SamplePush{chunks, chunk, out_idx, par}, 1);
}

bool Kernels::matmul_f16(CommandList& cl, Variant v, View a, View w, View c, uint32_t m, uint32_t n,
                         uint32_t k) {
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

}  // namespace dl::vk
