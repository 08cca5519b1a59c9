// Launchers of the prefill window kernels (see kernels.h): attention over n rows (the GEMM
// tiles: kernels_gemm.cpp; Gated DeltaNet: kernels_deltanet.cpp). Push-constant layouts mirror
// the shaders.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct AttnPrepRowsPush {
    uint32_t n_head, n_kv, head_dim, q_off, q_stride, q_row, k_off, v_off, kv_row, qo_off, qn_off,
        kn_off, freq_off, n_rot;
    float eps;
    uint32_t interleaved;
};
struct AttnWindowPush {
    uint32_t n_head, n_kv, n_rows, group, q_off, o_off, o_row, gate_off, gate_stride, gate_row;
    float scale;
    uint32_t splits;  // parts of the keys (the tiles and the KHR kernel)
};

// Shared memory of the KHR cooperative-matrix attention tile, as attn_window_cm.comp declares
// it: rows of 16-byte units, each padded by one, of the queries and the key/value tile (F16),
// the scores (F32) and weights (F16), the α block (F32, n columns), or the output staging of
// out_cols columns (F32) where that is larger; then the softmax's partial maxima and sums, and
// the word of a split's last part (gemm_split.glsl).
uint32_t khr_shared_bytes(uint32_t threads, uint32_t head_dim, uint32_t query_vectors,
                          uint32_t keys, uint32_t n, uint32_t out_cols) {
    const uint32_t row = head_dim / 8 + 1;
    const uint32_t tiles = query_vectors * row + keys * row + query_vectors * (keys / 4 + 1) +
                           query_vectors * (keys / 8 + 1) + query_vectors * (n / 4);
    const uint32_t stage = query_vectors * (out_cols / 4 + 1);
    return 16 * std::max(tiles, stage) + 8 * threads + 4;  // (and the split's flag)
}

// Query heads of one key/value head a tile of query_vectors takes: the most that divide both
// the group and the tile, so that the tile's rows are whole rows of the window.
uint32_t tile_heads(uint32_t group, uint32_t query_vectors) {
    return std::gcd(group, query_vectors);
}

}  // namespace

bool AttentionKernels::attention_cm2_aligned(const Attention& a, uint64_t act_offset) {
    auto aligned = [&](uint32_t off) { return act_offset % 16 == 0 && off % 4 == 0; };
    return aligned(a.qo_off) && aligned(a.o_off) && (a.gate_off == kNone || aligned(a.gate_off));
}

std::optional<AttentionKernels::AttentionCm2> AttentionKernels::attention_cm2(
    const Features& f, Variant v, uint32_t head_dim, uint32_t n_head, uint32_t n_kv) {
    // The tensor-core tiles need every matrix side a multiple of the device's granularity (at
    // most 32 here, as for the GEMM tiles) and the module built for this variant.
    if (!GemmKernels::gemm_uses_cm2(f, v) || !f.nv_coopmat2_softmax || head_dim % 32 != 0 ||
        head_dim > 256 || n_kv == 0 || n_head % n_kv != 0)
        return std::nullopt;
    AttentionCm2 t;
    // Measured on an H200 (WindowAttentionSpeed; docs/perf/history.md): Qwen3-8B's heads of 128
    // over 512 rows at 0 / 3584 / 7680, 64 keys a tile: 0.37 / 1.57 / 2.94 ms with 128 query
    // vectors, 0.36 / 2.65 / 5.48 with 64; heads of 256 are faster with 64 query vectors and 32
    // keys.
    t.query_vectors = head_dim > 128 ? 64 : 128;
    t.keys = head_dim > 128 ? 32 : 64;
    const uint32_t group = n_head / n_kv;
    t.heads = tile_heads(group, t.query_vectors);
    t.rows = t.query_vectors / t.heads;
    return t;
}

Variant AttentionKernels::attention_variant(const Features& f, Variant v, uint32_t head_dim) {
    // H200, WindowAttentionSpeed, the 9B's heads of 256 over 512 rows at 0 / 3584 / 7680:
    // 0.33 / 2.21 / 4.35 ms on the KHR kernel against 0.54 / 2.85 / 5.42 on NV cooperative
    // matrix 2; at 128 the NV2 tile with 128 query vectors is ahead (0.37 / 1.57 / 2.94 against
    // 0.31 / 2.39 / 4.77).
    if (v == Variant::nv_coopmat2 && head_dim > 128 && f.supports(Variant::khr_coopmat))
        return Variant::khr_coopmat;
    return v;
}

AttentionKernels::WindowAttentionKernel AttentionKernels::attention_kernel(
    const Features& f, Variant v, const Attention& a, uint64_t act_offset, bool caches_aligned) {
    // The tensor-core kernel where attention_cm2() allows it and its tensor loads and stores
    // find 16-byte aligned bases; the KHR cooperative-matrix kernel where attention_khr() allows
    // it and the caches start at 16-byte units (it reads them so); the tiles otherwise.
    if (!caches_aligned) return WindowAttentionKernel::tiles;
    if (attention_cm2_aligned(a, act_offset) &&
        attention_cm2(f, v, a.head_dim, a.n_head, a.n_kv).has_value())
        return WindowAttentionKernel::cm2;
    if (attention_khr(f, v, a.head_dim, a.n_head, a.n_kv).has_value())
        return WindowAttentionKernel::khr;
    return WindowAttentionKernel::tiles;
}

std::optional<AttentionKernels::AttentionKhr> AttentionKernels::attention_khr(
    const Features& f, Variant v, uint32_t head_dim, uint32_t n_head, uint32_t n_kv) {
    // Staged rows are whole 16-byte units of halves; past 256 the output blocks outgrow the
    // registers (see the limit below).
    if (v != Variant::khr_coopmat || !f.supports(v) || n_kv == 0 || n_head % n_kv != 0 ||
        head_dim % 8 != 0 || head_dim > 256)
        return std::nullopt;
    // Up to 256 threads in whole subgroups of the largest size the device may run, so that the
    // fewest subgroups the workgroup can have is known (the shader deals out its blocks by the
    // subgroups it finds).
    const uint32_t max_sg = std::max(f.max_subgroup_size, 1u);
    const uint32_t min_sg = std::max(f.min_subgroup_size, 1u);
    const uint32_t threads = std::min(256u, f.max_workgroup_invocations) / max_sg * max_sg;
    if (threads == 0) return std::nullopt;
    const uint32_t fewest = threads / max_sg;
    // The shape the GEMM tiles use first, then the others in the device's order.
    std::vector<CoopmatShape> shapes;
    for (const CoopmatShape& s : f.khr_f16_shapes)
        if (s.m == 16 && s.n == 16 && s.k == 16) shapes.push_back(s);
    for (const CoopmatShape& s : f.khr_f16_shapes)
        if (!(s.m == 16 && s.n == 16 && s.k == 16)) shapes.push_back(s);
    const uint32_t group = n_head / n_kv;
    for (const CoopmatShape& s : shapes) {
        // Blocks start at whole 16-byte units of the staged rows.
        if (s.m == 0 || s.n % 8 != 0 || s.k % 8 != 0 || head_dim % s.n != 0 || head_dim % s.k != 0)
            continue;
        // More query vectors first (each cache byte read serves them all), then longer key
        // tiles (fewer barriers a key); not measured on a KHR device yet.
        static constexpr std::pair<uint32_t, uint32_t> kTiles[] = {{64, 64}, {64, 32}, {32, 64},
                                                                   {32, 32}, {64, 16}, {32, 16},
                                                                   {16, 64}, {16, 32}, {16, 16}};
        for (auto [qv, keys] : kTiles) {
            if (qv % s.m != 0 || threads % qv != 0 || keys % s.n != 0 || keys % s.k != 0) continue;
            const uint32_t blocks = ((qv / s.m) * (head_dim / s.n) + fewest - 1) / fewest;
            // The output's accumulators a lane, where subgroups are smallest: at most 128
            // floats, so that they stay in registers.
            if ((uint64_t)blocks * s.m * s.n > 128ull * min_sg) continue;
            // The widest output pass whose staging fits in the space of the tiles.
            const uint32_t least = khr_shared_bytes(threads, head_dim, qv, keys, s.n, s.n);
            uint32_t out_cols = head_dim;
            while (out_cols % 2 == 0 && (out_cols / 2) % s.n == 0 &&
                   khr_shared_bytes(threads, head_dim, qv, keys, s.n, out_cols) > least)
                out_cols /= 2;
            const uint32_t bytes = khr_shared_bytes(threads, head_dim, qv, keys, s.n, out_cols);
            if (bytes > f.max_shared_memory) continue;
            AttentionKhr t;
            t.shape = s;
            t.threads = threads;
            t.query_vectors = qv;
            t.keys = keys;
            t.blocks = blocks;
            t.out_cols = out_cols;
            t.shared_bytes = bytes;
            t.heads = tile_heads(group, qv);
            t.rows = qv / t.heads;
            return t;
        }
    }
    return std::nullopt;
}

AttentionKernels::WindowTile AttentionKernels::window_tile(const Features& f, const Tuning& tuning,
                                                           const Attention& a, Variant v,
                                                           uint64_t act_offset,
                                                           bool caches_aligned) {
    WindowTile w{attention_kernel(f, v, a, act_offset, caches_aligned), "", {}, 0, 0, 0, 0};
    auto tile = [&](const auto& t) {  // (each kernel's tile names its shape alike)
        w.heads = t.heads;
        w.rows = t.rows;
        w.keys = t.keys;
        w.query_vectors = t.query_vectors;
    };
    if (w.kernel == WindowAttentionKernel::cm2) {
        AttentionCm2 t = *attention_cm2(f, v, a.head_dim, a.n_head, a.n_kv);
        if (tuning.attention_cm2_tile.query_vectors) {
            t.keys = tuning.attention_cm2_tile.keys;
            t.query_vectors = tuning.attention_cm2_tile.query_vectors;
            t.rows = t.query_vectors / t.heads;
        }
        w.module = "attn_window_cm2@nv_coopmat2";
        w.spec = {256, a.head_dim, t.query_vectors, t.keys,
                  tuning.attention_cm2_unclamped ? 1u : 0u};
        tile(t);
    } else if (w.kernel == WindowAttentionKernel::khr) {
        const AttentionKhr t = *attention_khr(f, v, a.head_dim, a.n_head, a.n_kv);
        w.module = "attn_window_cm@khr_coopmat";
        w.spec = {t.threads, a.head_dim, t.query_vectors, t.keys,    t.shape.m,
                  t.shape.n, t.shape.k,  t.blocks,        t.out_cols};
        tile(t);
    } else {
        const AttentionTiles t =
            attention_tiles(f, a.head_dim, a.n_head, a.n_kv, tuning.attention_shuffles);
        w.module = t.shuffle_lanes ? "attn_window_sh" : "attn_window";
        w.spec = {t.threads, a.head_dim,        t.query_vectors,
                  t.keys,    t.keys_per_thread, std::max(t.shuffle_lanes, 1u)};
        tile(t);
    }
    // A tile of keys must lie inside one block of the paged cache (kv_pages.glsl).
    if (w.keys == 0 || kKvBlock % w.keys != 0)
        fail("window attention tiles of {} keys do not divide the KV cache's blocks of {} rows",
             w.keys, kKvBlock);
    return w;
}

AttentionKernels::AttentionSplit AttentionKernels::attention_rows_split(const Features& f,
                                                                        const Tuning& tuning,
                                                                        const Attention& a,
                                                                        uint32_t n, Variant v,
                                                                        uint64_t act_offset) {
    const int mode = tuning.attention_rows_parts;
    if (mode == 0 || mode == 1 || n == 0 || attention_supported(f, a.head_dim, a.n_head, a.n_kv))
        return {};
    const WindowTile w = window_tile(f, tuning, a, v, act_offset, true);
    if (w.kernel == WindowAttentionKernel::cm2) return {};  // (its kernel walks unsplit)
    const uint32_t blocks = a.n_head / w.heads * ((n + w.rows - 1) / w.rows);
    uint32_t parts = (uint32_t)mode;
    if (mode < 0) {
        // Enough workgroups for two a multiprocessor (the KHR tile of the 9B's heads takes half
        // of an H100's shared memory), each part at least four tiles of a full history.
        const uint32_t target = f.sm_count ? 2 * f.sm_count : 16;
        parts = std::min(target / blocks, a.n_ctx / w.keys / 4);
    }
    parts = std::min(parts, kWindowParts);
    if (parts < 2) return {};
    AttentionSplit s;
    s.parts = parts;
    // A counter a block; each part's unnormalized output, running maxima and sums.
    s.need = {(uint64_t)blocks * 4,
              (uint64_t)blocks * parts * w.query_vectors * (a.head_dim + 2) * 4};
    return s;
}

void AttentionKernels::attention_rows(CommandList& cl, const AttentionRows& r, View act,
                                      View params, View k_cache, View v_cache, View tok, uint32_t n,
                                      Variant v, SplitScratch split) {
    const Attention& a = r.a;
    if (auto d = attention_supported(dev_.features(), a.head_dim, a.n_head, a.n_kv))
        fail("{}", d->reason);
    const Kernel& prep = pipes_.get("attn_prep_rows", 5, sizeof(AttnPrepRowsPush), {64});
    AttnPrepRowsPush pp{a.n_head,   a.n_kv,   a.head_dim,   a.q_off,
                        a.q_stride, r.q_row,  a.k_off,      a.v_off,
                        r.kv_row,   a.qo_off, a.q_norm_off, a.k_norm_off,
                        a.freq_off, a.n_rot,  a.eps,        a.interleaved ? 1u : 0u};
    cl.dispatch(prep, {act, params, k_cache, v_cache, tok}, pp, a.n_head + a.n_kv, n);
    cl.barrier();
    cl.mark("attn prep");
    // The kernel attention_kernel() picks; all take the same push constants and a grid of
    // (head groups, row blocks[, parts]).
    const bool aligned = k_cache.offset % 16 == 0 && v_cache.offset % 16 == 0;
    const Features& f = dev_.features();
    const WindowTile w = window_tile(f, tuning, a, v, act.offset, aligned);
    AttentionSplit s =
        aligned ? attention_rows_split(f, tuning, a, n, v, act.offset) : AttentionSplit{};
    if (s.parts > 1 &&
        (split.counters.buffer == VK_NULL_HANDLE || split.parts.buffer == VK_NULL_HANDLE ||
         split.counters.range < s.need.counters || split.parts.range < s.need.parts))
        s.parts = 1;
    AttnWindowPush wp{a.n_head,
                      a.n_kv,
                      n,
                      w.heads,
                      a.qo_off,
                      a.o_off,
                      r.o_row,
                      a.gate_off,
                      a.gate_stride,
                      r.gate_row,
                      1.0f / std::sqrt((float)a.head_dim),
                      s.parts};
    const uint32_t gx = a.n_head / w.heads, gy = (n + w.rows - 1) / w.rows;
    if (w.kernel == WindowAttentionKernel::cm2) {
        const Kernel& att = pipes_.get(w.module, 4, sizeof(AttnWindowPush), w.spec);
        cl.dispatch(att, {act, k_cache, v_cache, tok}, wp, gx, gy);
        return;
    }
    // (Unsplit, the scratch bindings are bound to act and never read.)
    const Kernel& att = pipes_.get(w.module, 6, sizeof(AttnWindowPush), w.spec);
    const bool sp = s.parts > 1;
    cl.dispatch(att,
                {act, k_cache, v_cache, tok, sp ? split.counters : act, sp ? split.parts : act}, wp,
                gx, gy, s.parts);
}

AttentionKernels::AttentionTiles AttentionKernels::attention_tiles(const Features& f,
                                                                   uint32_t head_dim,
                                                                   uint32_t n_head, uint32_t n_kv,
                                                                   bool shuffles) {
    if (auto d = attention_supported(f, head_dim, n_head, n_kv)) fail("{}", d->reason);
    // The output phase gives every dim pair of a head a thread, for qg groups of query vectors:
    // about 128 threads, within what the device allows.
    const uint32_t w = head_dim / 2;
    uint32_t qg = std::clamp(128u / w, 1u, 64u);
    while (qg > 1 && w * qg > f.max_workgroup_invocations) --qg;
    const uint32_t threads = w * qg;
    if (threads > f.max_workgroup_invocations)
        fail("the device allows {} threads a workgroup, window attention of head size {} needs {}",
             f.max_workgroup_invocations, head_dim, threads);
    const uint32_t group = n_head / n_kv;
    const uint32_t min_sg = std::max<uint32_t>(f.min_subgroup_size, 1);
    // Cache bytes read per query fall as 1 / query_vectors, so the most query vectors a thread
    // can accumulate (16, 32 accumulators) come first; then the longest key tile that fits.
    for (uint32_t qpt = std::max(1u, std::min(16u, 64u / qg)); qpt >= 1; qpt /= 2) {
        const uint32_t qv = qpt * qg;
        // Shuffle scores: the threads split evenly into lanes a query vector, a power of two
        // within one subgroup (so the xor partners are lanes of one subgroup).
        const uint32_t lanes = threads % qv == 0 ? threads / qv : 0;
        const bool sh = shuffles && f.subgroup_shuffle && lanes >= 2 && lanes <= min_sg &&
                        (lanes & (lanes - 1)) == 0 && w % lanes == 0;
        for (uint32_t keys : {64u, 32u, 16u, 8u}) {
            uint32_t sk = 1, nkg = keys;
            if (sh) {
                if (keys % lanes) continue;
                sk = keys / lanes;
                nkg = lanes;
            } else {
                if (keys > 32) continue;
                // Enough scores per thread to keep every thread busy in the score phase.
                const uint32_t want = std::max(1u, qv * keys / threads);
                while (sk * 2 <= want && keys % (sk * 2) == 0) sk *= 2;
                nkg = keys / sk;
            }
            // Queries (plain module only), the F32 tile (rows padded by a pair), weights, per
            // key group max and sum, running max (two halves) and rescale: as declared in the
            // shader, and the word of a split's last part.
            const uint32_t bytes = (sh ? 0 : 8 * w * qv) + 8 * keys * (w + 1) + 4 * keys * qv +
                                   8 * nkg * qv + 12 * qv + 4;
            if (bytes > f.max_shared_memory) continue;
            const uint32_t heads = tile_heads(group, qv);
            return {threads, qv, keys, sk, heads, qv / heads, bytes, sh ? lanes : 0};
        }
        if (qpt == 1) break;
    }
    fail("the device's {} bytes of shared memory hold no window attention tile for head size {}",
         f.max_shared_memory, head_dim);
}

}  // namespace dl::vk
