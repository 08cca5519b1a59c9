// Bandwidth report of the decode GEMV (Kernels::gemv) on decode-sized matrices, meant for a real
// GPU. It prints the weight bytes streamed per
// second for each shape and still checks every output row of the last run against a CPU
// reference, so a fast but wrong kernel fails.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <random>

#include "core/env.h"
#include "quant/quant.h"
#include "speed.h"

namespace dl::vk {
namespace {

struct SpeedCase {
    QType type;
    uint32_t rows, cols;
};

// One shape: weights made of `kDistinct` quantized rows tiled over all rows (quantizing a
// quarter-billion weights on the CPU would take minutes), copied enough times that successive
// runs cannot be served from the GPU's last-level cache, as in decode where every weight is read
// once per token.
void report(Device& dev, Kernels& K, const SpeedCase& c, bool spread = true) {
    constexpr uint32_t kDistinct = 64;
    const Features& f = dev.features();
    const uint64_t rb = row_size(c.type, c.cols), bytes = rb * c.rows;
    const std::string what =
        fmt::format("{} {} rows x {} cols", qtype_name(c.type), c.rows, c.cols);
    if (bytes + 4 > f.max_storage_buffer_range) {
        fmt::print("GEMV {}: skipped, {} MB is over the device's storage buffer range\n", what,
                   bytes >> 20);
        return;
    }

    std::mt19937 rng(c.rows ^ c.cols);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> wf((size_t)kDistinct * c.cols), x(c.cols);
    for (float& v : wf) v = nd(rng);
    for (float& v : x) v = nd(rng);
    const auto [wq, deq] = test::quantize_rows(c.type, wf, kDistinct, c.cols);
    // References over x and over x rounded to bytes (the byte path, Kernels::GemvX), with the
    // allowance for a few values rounded the other way (test::round_x_bytes).
    const test::BytesX xb8 = test::round_x_bytes(x.data(), c.cols);
    std::vector<double> ref(kDistinct), mag(kDistinct), ref8(kDistinct), tol8(kDistinct);
    for (uint32_t r = 0; r < kDistinct; ++r) {
        double flip = 0;
        for (uint32_t i = 0; i < c.cols; ++i) {
            const double w = deq[(size_t)r * c.cols + i];
            ref[r] += w * x[i];
            mag[r] += std::fabs(w * x[i]);
            ref8[r] += w * xb8.values[i];
            flip = std::max(flip, std::fabs(w) * xb8.scale[i]);
        }
        tol8[r] = 1e-5 * mag[r] + 1e-5 + 4 * flip;
    }

    // A CPU device gets one copy and a few runs: the point there is only that the code runs.
    const uint64_t kPastCache = 512ull << 20;
    const uint32_t copies = f.cpu ? 1 : (uint32_t)std::clamp<uint64_t>(kPastCache / bytes, 1, 64);
    const uint32_t runs = f.cpu ? 2 : 200;
    std::vector<uint8_t> tiled((bytes + 3) / 4 * 4 + 4, 0);
    for (uint32_t r = 0; r < c.rows; ++r)
        std::copy_n(wq.data() + (r % kDistinct) * rb, rb, tiled.data() + r * rb);
    std::vector<Buffer> w;
    for (uint32_t i = 0; i < copies; ++i) {
        w.push_back(dev.create_buffer(tiled.size(), MemoryKind::device));
        dev.upload(w.back(), 0, tiled.data(), tiled.size());
    }
    Buffer xb = test::to_device(dev, x);
    Buffer y = test::poisoned(dev, c.rows);

    // Each run follows a barrier, as every GEMV of the token command does. The launcher's shape
    // first, then a spread of workgroup shapes (threads x rows) on a GPU; each reading x from
    // the x buffer and rounded to bytes (integer dot products).
    std::vector<Kernels::GemvShape> shapes = {{}};
    if (!f.cpu)
        for (Kernels::GemvShape s :
             {Kernels::GemvShape{32, 4}, Kernels::GemvShape{32, 8}, Kernels::GemvShape{64, 4},
              Kernels::GemvShape{64, 8}, Kernels::GemvShape{128, 4}, Kernels::GemvShape{128, 8},
              Kernels::GemvShape{128, 16}, Kernels::GemvShape{256, 4}, Kernels::GemvShape{256, 8}})
            shapes.push_back(s);
    // Then, at the launcher's shape, what the time is made of: the same runs with the reads of
    // x left out, with the Q4_K decode left out, both; with barriers that also name transfers
    // (`full`), and with no barriers at all (the runs then overlap). The others take the
    // token command's barriers (compute to compute).
    using X = Kernels::GemvX;
    enum class Barrier { full, compute, none };
    struct Config {
        Kernels::GemvShape shape;
        X x;
        uint32_t ablate = 0;
        Barrier barrier = Barrier::compute;
        Kernels::GemvWide wide = Kernels::GemvWide::automatic;
    };
    std::vector<Config> configs;
    if (spread) {
        for (X x : {X::global, X::bytes})
            for (Kernels::GemvShape shape : shapes) configs.push_back({shape, x});
    } else {
        // Only the launcher's shape over x in bytes, with each Kernels::gemv_wide; for Q4_K also
        // without the decode, and without the decode and the rounding of x: the rows' slope
        // then says what the loads alone stream at.
        for (Kernels::GemvWide wide :
             {Kernels::GemvWide::off, Kernels::GemvWide::automatic, Kernels::GemvWide::all})
            configs.push_back({{}, X::bytes, 0, Barrier::compute, wide});
        if (!f.cpu && c.type == QType::Q4_K)
            for (uint32_t ab : {2u, 6u}) configs.push_back({{}, X::bytes, ab});
    }
    if (!f.cpu && spread)
        for (X x : {X::global, X::bytes}) {
            for (uint32_t ab : {1u, 2u, 3u, 4u, 6u})
                if ((ab == 1 || c.type == QType::Q4_K) && (ab < 4 || x == X::bytes))
                    configs.push_back({{}, x, ab});
            configs.push_back({{}, x, 0, Barrier::full});
            configs.push_back({{}, x, 0, Barrier::none});
        }
    for (const Config& cf : configs) {
        const X x = cf.x;
        std::optional<test::Scoped<X>> x_scope(std::in_place, K.tuning.gemv_x, x);
        if (K.gemv_x_for(c.type, c.cols) != x) continue;
        const bool i8 = x == X::bytes;
        std::optional<test::Scoped<Kernels::GemvShape>> shape_scope(std::in_place,
                                                                    K.tuning.gemv_shape, cf.shape);
        std::optional<test::Scoped<uint32_t>> ablate_scope(std::in_place,
                                                           K.tuning.gemv_omitted_work, cf.ablate);
        std::optional<test::Scoped<Kernels::GemvWide>> wide_scope(std::in_place, K.tuning.gemv_wide,
                                                                  cf.wide);
        dev.fill(y, 0, (uint64_t)c.rows * 4, test::kPoison);
        CommandList cl(dev);
        cl.enable_timestamps(1);
        cl.begin(true);
        for (uint32_t i = 0; i < runs; ++i) {
            K.gemv(cl, {.type = c.type,
                        .w = view(w[i % copies]),
                        .rows = c.rows,
                        .cols = c.cols,
                        .x = view(xb),
                        .x_off = 0,
                        .y = view(y),
                        .y_off = 0,
                        .accumulate = false});
            if (cf.barrier == Barrier::full)
                cl.transfer_barrier();
            else if (cf.barrier == Barrier::compute)
                cl.barrier();
        }
        cl.mark("gemv");
        cl.end();
        shape_scope.reset();
        x_scope.reset();
        ablate_scope.reset();
        wide_scope.reset();
        const Kernels::GemvShape shape = cf.shape;
        const double us = test::best_of_three_ms(dev, cl, true) * 1e3 / runs;
        const std::string how =
            (i8 ? std::string(", x in bytes") : std::string()) +
            (shape.threads ? fmt::format(", {} threads x {} rows", shape.threads, shape.rows)
                           : "") +
            (cf.ablate & 1 ? ", no x reads" : "") + (cf.ablate & 2 ? ", no decode" : "") +
            (cf.ablate & 4 ? ", no x rounding" : "") +
            (!spread ? fmt::format(", wide {}", std::array{"off", "auto", "all"}[(int)cf.wide])
                     : "") +
            (cf.barrier == Barrier::full   ? ", barriers naming transfers"
             : cf.barrier == Barrier::none ? ", no barriers"
                                           : "");
        fmt::print("GEMV {}: {:.1f} MB, {:.2f} us, {:.1f} GB/s ({} copies, {} runs{}{})\n", what,
                   bytes / 1e6, us, bytes / (us * 1e3), copies, runs, f.cpu ? ", CPU device" : "",
                   how);
        if (cf.ablate) continue;  // the results are wrong by design
        auto out = test::from_device<float>(dev, y, c.rows);
        for (uint32_t r = 0; r < c.rows; ++r) {
            const uint32_t d = r % kDistinct;
            ASSERT_NEAR(out[r], i8 ? ref8[d] : ref[d], i8 ? tol8[d] : 1e-5 * mag[d] + 1e-5)
                << what << " row " << r << how;
        }
    }
}

TEST(GemvSpeed, Report) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    fmt::print("device {}: subgroup {} (arithmetic {}), integer dot {}, timestamps {}\n", f.name,
               f.subgroup_size, f.subgroup_arithmetic ? "yes" : "no",
               f.integer_dot ? (f.integer_dot_fast ? "accelerated" : "yes") : "no",
               f.timestamps ? "yes" : "no");
    // Qwen3.5-9B FFN gate/up and down (Q4_K_M has both Q4_K and Q6_K downs), a square 4096
    // projection, a 248k-vocabulary output head, a 0.8B-sized FFN in Q8_0.
    for (const SpeedCase& c :
         {SpeedCase{QType::Q4_K, 12288, 4096}, SpeedCase{QType::Q4_K, 4096, 12288},
          SpeedCase{QType::Q6_K, 4096, 12288}, SpeedCase{QType::Q4_K, 4096, 4096},
          SpeedCase{QType::Q6_K, 248320, 4096}, SpeedCase{QType::Q8_0, 3584, 1024}}) {
        report(dev, K, c);
        if (HasFatalFailure()) return;
    }
}

// The device's read rate against the bytes each thread has in flight: the streaming probe of
// bench's floor (Kernels::stream_read) over 1 GiB of random words (a CPU device: 16 MiB), with
// threads a workgroup and independent 16-byte loads a thread forced. Then the same reads by a
// grid of one or two 512-invocation workgroups a multiprocessor, each looping over its chunks
// with a fold and barriers between them, as the decode GEMVs walk their row blocks: what that
// structure costs the read rate before any arithmetic. Every chunk's fold is checked against the
// host's on the last shape of each, so a probe that skipped loads fails.
TEST(GemvSpeed, Stream) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    const uint64_t chunk = 16ull << 20, bytes = f.cpu ? chunk : 1ull << 30;
    if (bytes > f.max_storage_buffer_range) GTEST_SKIP() << "1 GiB is over the buffer range";
    std::mt19937 rng(7);
    std::vector<uint32_t> words(chunk / 4);
    for (auto& w : words) w = rng();
    Buffer src = dev.create_buffer(bytes, MemoryKind::device);
    for (uint64_t off = 0; off < bytes; off += chunk) dev.upload(src, off, words.data(), chunk);
    const uint32_t runs = f.cpu ? 1 : 10;
    // Reads with shape sh; checks every chunk's fold when `check`.
    auto measure = [&](Kernels::StreamShape sh, bool check) {
        test::Scoped<Kernels::StreamShape> scope(K.tuning.stream_shape, sh);
        const uint32_t groups = K.stream_read_groups(bytes);
        Buffer out = dev.create_buffer((uint64_t)groups * 4, MemoryKind::host);
        const double ms = test::device_ms_per_run(
            dev, runs, [&](CommandList& cl) { K.stream_read(cl, view(src), bytes, view(out), 0); });
        if (!check) return bytes / (ms * 1e6);
        const auto* o = static_cast<const uint32_t*>(out.mapped());
        const uint64_t per_group = (uint64_t)sh.threads * sh.loads * 4;  // words a chunk
        for (uint32_t g = 0; g < groups; ++g) {
            uint32_t want = 0;
            for (uint64_t w = g * per_group; w < (g + 1) * per_group; ++w)
                want ^= words[w % words.size()];
            EXPECT_EQ(o[g], want) << "chunk " << g;
            if (o[g] != want) break;
        }
        return bytes / (ms * 1e6);
    };
    for (uint32_t threads : {64u, 128u, 256u, 512u, 1024u}) {
        if (threads > f.max_workgroup_invocations) continue;
        for (uint32_t loads : {1u, 2u, 4u, 8u, 16u}) {
            // The last shape: the most loads in the largest workgroup the device allows.
            const bool last = loads == 16u && threads * 2 > f.max_workgroup_invocations;
            const double gbps = measure({threads, loads}, last);
            fmt::print(
                "stream read, {} threads x {} loads of 16 bytes: {:.1f} GB/s ({} KB a "
                "workgroup)\n",
                threads, loads, gbps, threads * loads * 16 / 1024);
        }
    }
    const uint32_t sms = std::max<uint32_t>(f.sm_count, 1), threads = 512;
    if (threads > f.max_workgroup_invocations) return;
    for (uint32_t per_sm : {1u, 2u}) {
        for (uint32_t loads : {1u, 2u, 3u, 4u, 8u}) {
            const double gbps = measure({threads, loads, sms * per_sm}, loads == 8u);
            fmt::print(
                "stream read, {} workgroups of {} threads looping over chunks of {} loads of 16 "
                "bytes: {:.1f} GB/s\n",
                sms * per_sm, threads, loads, gbps);
        }
    }
}

// The launcher's shape against the number of rows: what a stage costs beyond its bytes.
TEST(GemvSpeed, Rows) {
    VK_SPEED_DEVICE();
    for (QType t : {QType::Q4_K, QType::Q6_K}) {
        for (uint32_t rows : {1024u, 2048u, 4096u, 8192u, 12288u, 16384u, 24576u, 32768u, 65536u}) {
            report(dev, K, SpeedCase{t, rows, 4096}, false);
            if (HasFatalFailure()) return;
        }
        // The FFN down projections' shape.
        report(dev, K, SpeedCase{t, 4096, 12288}, false);
        if (HasFatalFailure()) return;
    }
}

}  // namespace
}  // namespace dl::vk
