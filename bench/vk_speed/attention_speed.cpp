// Speed reports of the attention kernels: the decode attention of one layer at positions of a
// long context and after other work, the window attention of a prefill window on every path the
// device has, and a window's attention beside an expansion of weights to F16.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attn_window.h"
#include "cpu/ops.h"
#include "model/rope.h"
#include "speed.h"

namespace dl::vk {
namespace {

using test::Path;
using test::path_variant;
using test::Window;
using test::WindowCase;

// One decode attention layer of a real model's shape over a cache of n_ctx random F16 rows, for
// the speed reports: the activations, norm weights and frequencies, caches, partials, the
// position's word and the split counters, and record() to record the layer at a context.
struct AttnLayer {
    const char* name;
    uint32_t n_head, n_kv, head_dim, n_rot;
    bool gate;
};
struct AttnBench {
    AttnLayer s;
    uint32_t q_stride, k_off, v_off, qo_off, o_off, n_act;
    Buffer pb, act, kc, vc, tok, counter, part;

    AttnBench(Device& dev, const AttnLayer& shape, uint32_t n_ctx) : s(shape) {
        const uint32_t hd = s.head_dim;
        q_stride = s.gate ? 2 * hd : hd;
        k_off = s.n_head * q_stride;
        v_off = k_off + s.n_kv * hd;
        qo_off = v_off + s.n_kv * hd;
        o_off = qo_off + s.n_head * hd;
        n_act = o_off + s.n_head * hd;
        std::vector<float> params = test::randn(2 * hd, 7);
        std::vector<float> inv(s.n_rot / 2);
        rope_inv_freq(1e7f, s.n_rot, nullptr, inv.data());
        params.insert(params.end(), inv.begin(), inv.end());
        pb = test::to_device(dev, params);
        act = test::to_device(dev, test::randn(n_act, 9));
        // Random F16 rows: pairs of halves of N(0, 1) values.
        const size_t words = Kernels::attention_cache_bytes(n_ctx, s.n_kv, hd) / 4;
        std::vector<float> r = test::randn(2 * words, 11);
        std::vector<uint32_t> packed(words);
        for (size_t i = 0; i < words; ++i) {
            uint16_t h[2];
            cpu::to_f16(&r[2 * i], h, 2);
            packed[i] = h[0] | (uint32_t)h[1] << 16;
        }
        kc = test::to_device(dev, packed);
        vc = test::to_device(dev, packed);
        // One sequence alone in the pool: its blocks in order, as a driver's session takes them.
        const uint64_t tok_bytes = Kernels::tok_bytes(n_ctx);
        tok = dev.create_buffer(tok_bytes, MemoryKind::host);
        auto* t = static_cast<uint32_t*>(tok.mapped());
        std::memset(t, 0, tok_bytes);
        for (uint32_t b = 0; b < Kernels::kv_blocks(n_ctx); ++b) t[Kernels::kKvTable + b] = b;
        counter = dev.create_buffer((size_t)s.n_head * 4, MemoryKind::device);
        dev.fill(counter, 0, (size_t)s.n_head * 4, 0);
        part = dev.create_buffer(Kernels::attention_partials(args(n_ctx)) * 4, MemoryKind::device);
    }
    Kernels::Attention args(uint32_t ctx) const {
        const uint32_t hd = s.head_dim;
        return Kernels::Attention{
            s.n_head, s.n_kv, hd,    s.n_rot, ctx,   0,
            q_stride, k_off,  v_off, qo_off,  o_off, s.gate ? hd : Kernels::kNone,
            q_stride, 0,      hd,    2 * hd,  1e-6f, false};
    }
    void at(uint32_t pos) { static_cast<uint32_t*>(tok.mapped())[0] = pos; }
    void record(Kernels& K, CommandList& cl, uint32_t ctx) {
        K.attention(cl, args(ctx), view(act), view(pb), view(kc), view(vc), view(part), view(tok),
                    view(counter));
    }
    // Every output finite, every split counter back at 0.
    void check(Device& dev) {
        const std::vector<float> out = test::from_device<float>(dev, act, n_act);
        for (uint32_t i = o_off; i < n_act; ++i) ASSERT_TRUE(std::isfinite(out[i])) << i;
        for (uint32_t v : test::from_device<uint32_t>(dev, counter, s.n_head)) ASSERT_EQ(v, 0u);
    }
};
const AttnLayer kQwen35_9b{"qwen35-9b", 16, 4, 256, 64, true};
const AttnLayer kQwen3_8b{"qwen3-8b", 32, 8, 128, 128, false};

// What one layer's decode attention (Kernels::attention: one dispatch, the preparation of the
// queries and the new row, the split attention with its merge) costs on this device at each
// position of a context as long as a server would give a session, for the attention layers of
// Qwen3.5-9B (16 query heads over 4 key/value heads of 256, gated) and Qwen3-8B (32 over 8 of
// 128). The cache holds random F16 rows; only the time is reported.
TEST(DecodeAttentionSpeed, Report) {
    VK_SPEED_DEVICE();
    const bool cpu = dev.features().cpu;
    const uint32_t n_ctx = cpu ? 1024 : 32768;
    for (const AttnLayer& s : {kQwen35_9b, kQwen3_8b}) {
        AttnBench b(dev, s, n_ctx);
        const uint32_t runs = cpu ? 4 : 200;
        auto time_at = [&](uint32_t pos, uint32_t ctx) {
            b.at(pos);
            return 1e3 * test::device_ms_per_run(dev, runs,
                                                 [&](CommandList& cl) { b.record(K, cl, ctx); });
        };
        std::string line =
            fmt::format("{} decode attention, context {}, us a layer at:", s.name, n_ctx);
        for (uint32_t pos : {0u, 127u, 1023u, 4095u, 16383u, 32767u})
            if (pos < n_ctx) line += fmt::format(" {} {:.1f};", pos + 1, time_at(pos, n_ctx));
        fmt::print("{}\n", line);
        fmt::print("{} decode attention at 128 in a context of 192: {:.1f} us\n", s.name,
                   time_at(127, 192));
        b.check(dev);
    }
}

// Where the decode attention's cost after other work comes from (in a Qwen3.5 token it runs
// every fourth layer, after about 600 MB of weights and some forty dispatches of other
// kernels): the L2 having lost its code to the data streamed between, or the multiprocessors'
// instruction caches having lost it to other kernels' code (test::OtherWork). Each layer's
// attention at position 128 of a context of 192.
TEST(DecodeAttentionSpeed, AfterOtherWork) {
    VK_SPEED_DEVICE();
    test::OtherWork other(dev, K);
    const uint32_t rounds = dev.features().cpu ? 2 : 50;
    for (const AttnLayer& s : {kQwen35_9b, kQwen3_8b}) {
        AttnBench b(dev, s, 192);
        b.at(127);
        fmt::print("{} decode attention at 128 of 192, us (a timestamp included): {}\n", s.name,
                   other.report(rounds, [&](CommandList& cl) { b.record(K, cl, 192); }));
        b.check(dev);
    }
}

// The best of five runs of a window's attention (its preparation of the rows not counted), ms.
double attention_ms(Device& dev, Kernels& K, Window& w, Variant v,
                    Kernels::SplitScratch split = {}) {
    CommandList cl(dev);
    cl.enable_timestamps(2);
    cl.begin(true);
    w.record(K, cl, v, split);
    cl.mark("attention");
    cl.end();
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
        cl.submit_and_wait();
        for (const auto& [label, ms] : cl.times())
            if (label == "attention") best = std::min(best, ms);
    }
    return best;
}

// Speed report (meant for a real GPU): the attention of Qwen3.5-9B (16 query
// heads over 4 key/value heads of 256, gated) and of Qwen3-8B (32 over 8 of 128) for a window of
// 512 rows at the start of a prompt and as the last window of 4096- and 8192-token prompts, on
// every path the device has (tiles with and without shuffled scores, the NV tensor-core kernel at
// a few tile sizes and with its inner key tiles unclamped, the KHR cooperative-matrix kernel), with
// the cache bytes the tiles read against reading the whole history once per query row and head.
// A few rows are still checked.
TEST(WindowAttentionSpeed, Report) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    const bool cpu = f.cpu;
    const uint32_t n = cpu ? 32 : 512;
    struct Config {
        Path path;
        Kernels::AttentionCm2 tile;  // cm2 only; zero: the launcher's choice
        bool unclamped = false;      // cm2 only: Tuning::attention_cm2_unclamped
    };
    std::vector<Config> configs = {{Path::shuffle, {}},
                                   {Path::plain, {}},
                                   {Path::cm2, {}},
                                   {Path::cm2, {}, true},
                                   {Path::khr, {}}};
    if (!cpu)
        for (uint32_t qv : {64u, 128u})
            for (uint32_t keys : {32u, 64u}) configs.push_back({Path::cm2, {qv, keys, 0, 0}});
    for (const AttnLayer& m : {kQwen35_9b, kQwen3_8b})
        for (const Config& cf : configs) {
            const bool shuffles = cf.path == Path::shuffle;
            const Variant v = path_variant(cf.path);
            uint32_t rows = 0, heads = 0;
            std::string what;
            if (cf.path == Path::cm2) {
                auto t = Kernels::attention_cm2(f, v, m.head_dim, m.n_head, m.n_kv);
                if (!t) continue;
                if (cf.tile.query_vectors) {
                    t->query_vectors = cf.tile.query_vectors;
                    t->keys = cf.tile.keys;
                    t->rows = t->query_vectors / t->heads;
                }
                rows = t->rows;
                heads = t->heads;
                what = fmt::format("tensor cores, {} rows x {} heads, {} keys a tile{}{}", t->rows,
                                   t->heads, t->keys, cf.tile.query_vectors ? "" : " (launcher)",
                                   cf.unclamped ? ", inner key tiles unclamped" : "");
            } else if (cf.path == Path::khr) {
                const auto t = Kernels::attention_khr(f, v, m.head_dim, m.n_head, m.n_kv);
                if (!t) continue;
                rows = t->rows;
                heads = t->heads;
                what = fmt::format(
                    "KHR cooperative matrices {}x{}x{}, {} rows x {} heads, {} keys a tile, {} "
                    "threads, {} bytes, {} output blocks a subgroup at most",
                    t->shape.m, t->shape.n, t->shape.k, t->rows, t->heads, t->keys, t->threads,
                    t->shared_bytes, t->blocks);
            } else {
                const auto t = Kernels::attention_tiles(f, m.head_dim, m.n_head, m.n_kv, shuffles);
                if (shuffles && !t.shuffle_lanes) continue;
                rows = t.rows;
                heads = t.heads;
                what = fmt::format(
                    "tiles {} rows x {} heads, {} keys a tile, {} threads, {} bytes, {}", t.rows,
                    t.heads, t.keys, t.threads, t.shared_bytes,
                    t.shuffle_lanes ? fmt::format("scores over {} lanes", t.shuffle_lanes)
                                    : std::string("plain scores"));
            }
            test::Scoped shuffle_scope(K.tuning.attention_shuffles, shuffles);
            test::Scoped tile_scope(K.tuning.attention_cm2_tile, cf.tile);
            test::Scoped unclamped_scope(K.tuning.attention_cm2_unclamped, cf.unclamped);
            fmt::print("window attention {}: {}\n", m.name, what);
            for (uint32_t start :
                 cpu ? std::vector<uint32_t>{0, 224} : std::vector<uint32_t>{0, 3584, 7680}) {
                Window w(dev, WindowCase{m.head_dim, m.n_head, m.n_kv, start, 0, 0, m.gate}, n);
                const double best = attention_ms(dev, K, w, v);
                // Keys seen by all rows; each costs 2·hd flops for the score and 2·hd for the
                // value.
                const double keys = (double)n * start + (double)n * (n + 1) / 2;
                const double flop = 4.0 * m.head_dim * m.n_head * keys;
                // A K and a V row of one key/value head are 4·hd bytes (F16). Reading the
                // history per row and head costs that for every key of every query head; a
                // workgroup reads it once for the keys of its last row.
                const double per_row_head = keys * 4.0 * m.head_dim * m.n_head;
                double tiled = 0;
                for (uint32_t r0 = 0; r0 < n; r0 += rows)
                    tiled += (double)(m.n_head / heads) * (start + std::min(r0 + rows, n)) * 4.0 *
                             m.head_dim;
                fmt::print(
                    "window attention {}, {} rows at {}: {:.3f} ms, {:.2f} TFLOP/s; cache reads "
                    "{:.1f} MiB ({:.1f} KiB a row), per row and head {:.1f} MiB\n",
                    m.name, n, start, best, flop / (best * 1e-3) / 1e12, tiled / 1048576,
                    tiled / n / 1024, per_row_head / 1048576);
                auto out = test::from_device<float>(dev, w.act, w.n_act);
                for (uint32_t r : {0u, n / 2, n - 1})
                    for (uint32_t h : {0u, 5u, m.n_head - 1}) {
                        w.check(out, r, h, cf.path == Path::cm2 || cf.path == Path::khr);
                        if (HasFatalFailure()) break;
                    }
                if (HasFatalFailure()) break;
            }
            if (HasFatalFailure()) break;
        }
}

// Speed report (meant for a real GPU): short windows late in a long prompt (a chat's later
// turn: its new rows over thousands of cached ones), where the window's few blocks of rows and
// heads leave most of the device idle unless the keys are split (Kernels::attention_rows_split):
// the 9B's and Qwen3-8B's attention for 16 to 512 rows at position 6144 of a context of 8192,
// on the kernel the driver picks, unsplit and by the launcher's rule. A few rows are checked.
TEST(WindowAttentionSpeed, ShortWindowsLate) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    const bool cpu = f.cpu;
    const uint32_t start = cpu ? 192 : 6144;
    const Variant planned = dev.variant();
    for (const AttnLayer& m : {kQwen35_9b, kQwen3_8b}) {
        const Variant v = Kernels::attention_variant(f, planned, m.head_dim);
        for (uint32_t n :
             cpu ? std::vector<uint32_t>{4, 16} : std::vector<uint32_t>{16, 76, 164, 512}) {
            Window w(dev, WindowCase{m.head_dim, m.n_head, m.n_kv, start, 0, 0, m.gate}, n);
            w.args.a.n_ctx = cpu ? 256 : 8192;
            std::string line = fmt::format("window attention {}, {} rows at {}:", m.name, n, start);
            for (int parts : {1, -1}) {
                test::Scoped parts_scope(K.tuning.attention_rows_parts, parts);
                const Kernels::AttentionSplit s =
                    Kernels::attention_rows_split(f, K.tuning, w.args.a, n, v, 0);
                Buffer counters, sums;
                Kernels::SplitScratch scratch{};
                if (s.parts > 1) {
                    counters = dev.create_buffer(s.need.counters, MemoryKind::device);
                    dev.fill(counters, 0, s.need.counters, 0);
                    sums = dev.create_buffer(s.need.parts, MemoryKind::device);
                    scratch = {view(counters), view(sums)};
                }
                const double best = attention_ms(dev, K, w, v, scratch);
                line += fmt::format(" {} part{} {:.3f} ms;", s.parts, s.parts > 1 ? "s" : "", best);
                auto out = test::from_device<float>(dev, w.act, w.n_act);
                for (uint32_t r : {0u, n - 1})
                    for (uint32_t h : {0u, m.n_head - 1}) {
                        w.check(out, r, h, v != Variant::scalar);
                        if (HasFatalFailure()) return;
                    }
            }
            fmt::print("{}\n", line);
        }
    }
}

// Speed report (meant for a real GPU): whether a window's attention, bound by the matrix units,
// and the F16 expansion of a mixture's expert stack, bound by memory, overlap when recorded side
// by side without a barrier, as a window could run them: Qwen3-30B-A3B's attention (32 query
// heads over 4 of 128) over 2048 rows at the start of a prompt, and its gate stack (128 experts
// of 768 x 2048 in Q4_K) expanded; each alone, then both in either order. The window spends
// about as long on each (docs/perf/history.md, 2026-12-07 (09:40)).
TEST(WindowAttentionSpeed, BesideAnExpansion) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    const bool cpu = f.cpu;
    const uint32_t n = cpu ? 64 : 2048, rows = cpu ? 128 : 128 * 768, cols = cpu ? 256 : 2048;
    const uint32_t runs = cpu ? 1 : 10;
    const Variant v = Kernels::attention_variant(f, dev.variant(), 128);
    Window w(dev, WindowCase{128, 32, 4, 0, 0, 0, false}, n);
    std::mt19937 rng(5);
    const test::RepeatedMatrix m = test::repeated_rows(dev, QType::Q4_K, rows, cols, rng);
    Buffer h = dev.create_buffer((uint64_t)rows * cols * 2, MemoryKind::device);
    auto attention = [&](CommandList& cl) { w.record(K, cl, v); };
    auto expand = [&](CommandList& cl) {
        K.dequant_f16(cl, QType::Q4_K, view(m.w), rows, cols, view(h));
    };
    const double a = test::device_ms_per_run(dev, runs, attention);
    const double e = test::device_ms_per_run(dev, runs, expand);
    const double ae = test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
        attention(cl);
        expand(cl);
    });
    const double ea = test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
        expand(cl);
        attention(cl);
    });
    fmt::print(
        "window attention beside an expansion: attention {:.3f} ms, expansion {:.3f} ms ({:.0f} "
        "GB/s "
        "written), sum {:.3f}; attention then expansion {:.3f} ms, expansion then attention {:.3f} "
        "ms\n",
        a, e, e > 0 ? (double)rows * cols * 2 / (e * 1e-3) / 1e9 : 0.0, a + e, ae, ea);
    auto out = test::from_device<float>(dev, w.act, w.n_act);
    for (uint32_t r : {0u, n - 1})
        for (uint32_t hd : {0u, 31u}) {
            w.check(out, r, hd, v != Variant::scalar);
            if (HasFatalFailure()) return;
        }
}

}  // namespace
}  // namespace dl::vk
