// Launchers of the decode attention (shaders/attn_decode.comp, see kernels_attention.h); the
// push-constant layout mirrors the shader. The window attention: kernels_window.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct AttnDecodePush {
    uint32_t n_head, n_kv, head_dim, q_off, n_split;
    float scale;
    uint32_t gate_off, gate_stride, o_off;
    uint32_t q_stride, k_off, v_off, qn_off, kn_off, freq_off, n_rot;
    float eps;
    uint32_t interleaved, one_split;
    uint32_t ro_off;
    uint32_t tok_row, part_row, counter_row, q_row, k_row, o_row;
};

}  // namespace

std::optional<Decline> AttentionKernels::attention_supported(const Features& f, uint32_t head_dim,
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

uint32_t AttentionKernels::attention_splits(uint32_t n_ctx, uint32_t max_splits) {
    const uint32_t chunks = std::max<uint32_t>((n_ctx + kAttnSplit - 1) / kAttnSplit, 1);
    return std::clamp<uint32_t>(chunks, 1, std::clamp<uint32_t>(max_splits, 1, kAttnMaxSplits));
}

uint64_t AttentionKernels::attention_partials(const Attention& a) {
    return (uint64_t)a.n_head * attention_splits(a.n_ctx, a.max_splits) * (a.head_dim + 2);
}

std::pair<uint32_t, uint32_t> AttentionKernels::attention_shape(const Attention& a) const {
    // Query heads a workgroup: up to four of one key/value head (each cache row read once for
    // them), at most 512 query values (g · head_dim), as many as the shared memory holds. On an
    // H200 the 9B's attention, which runs every fourth layer, took twice as long in the token as
    // right after a run of itself; four heads of 256 a workgroup (128 registers, 17 KB of shared
    // memory) paid more of that than two (64, 9 KB): tg128 305.5 -> 310.5 t/s at two, equal at
    // 16384 positions (docs/perf/history.md 2026-12-01).
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

uint32_t AttentionKernels::attention_group(const Attention& a) const {
    return attention_shape(a).first;
}

const Kernel& AttentionKernels::attention_kernel(const Attention& a) {
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

void AttentionKernels::prepare_attention(const Attention& a) {
    attention_kernel(a);
}

void AttentionKernels::attention(CommandList& cl, const Attention& a, View act, View params,
                                 View k_cache, View v_cache, View partials, View tok,
                                 View counter) {
    if (auto d = attention_supported(dev_.features(), a.head_dim, a.n_head, a.n_kv))
        fail("{}", d->reason);
    const uint32_t round_o = a.round_off != kNone;
    const uint64_t last = a.rows - 1;  // a batch's last row (Attention::rows)
    if (a.rows == 0 || (a.rows > 1 && round_o))
        fail("the decode attention takes one row or more, and rounds the output of one only");
    DL_ASSERT(counter.buffer != VK_NULL_HANDLE &&
              counter.range >= (last * a.counter_row + a.n_head) * 4);
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
    const uint64_t block = kv_block_bytes(a.n_kv, a.head_dim);
    if (k_cache.range < block || v_cache.range < block ||
        tok.range < last * a.tok_row * 4 + tok_bytes(a.n_ctx))
        fail(
            "the decode attention's pools hold {} and {} bytes (blocks of {}) and its token "
            "buffer {}, not the {} a block table of {} rows takes",
            k_cache.range, v_cache.range, block, tok.range, tok_bytes(a.n_ctx), a.n_ctx);
    const Kernel& dec = attention_kernel(a);
    AttnDecodePush dp{a.n_head,
                      a.n_kv,
                      a.head_dim,
                      a.q_off,
                      n_split,
                      1.0f / std::sqrt((float)a.head_dim),
                      a.gate_off,
                      a.gate_stride,
                      a.o_off,
                      a.q_stride,
                      a.k_off,
                      a.v_off,
                      a.q_norm_off,
                      a.k_norm_off,
                      a.freq_off,
                      a.n_rot,
                      a.eps,
                      a.interleaved ? 1u : 0u,
                      tuning.attn_one_split,
                      a.round_off,
                      a.tok_row,
                      a.part_row,
                      a.counter_row,
                      a.q_row,
                      a.k_row,
                      a.o_row};
    DL_ASSERT(partials.range >= (last * a.part_row + attention_partials(a)) * 4);
    cl.dispatch(dec, {act, k_cache, v_cache, partials, tok, counter, params}, dp, a.n_head / g,
                n_split, a.rows);
}

}  // namespace dl::vk
