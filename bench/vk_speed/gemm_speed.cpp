// Throughput report of the prefill GEMM tiles (Kernels::gemm) on a 512-row window against
// Qwen3.5-9B-sized matrices, meant for a real GPU.
// It prints TFLOP/s for each variant the device runs, and for the cooperative-matrix tiles also
// with the dequantization or the products left out, which says what bounds the tile. The full
// runs still check their output against a CPU reference, so a fast but wrong kernel fails.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <tuple>

#include "core/env.h"
#include "quant/quant.h"
#include "speed.h"

namespace dl::vk {
namespace {

// y (m rows of `rows` sums) against the double products of every third vector of x with every
// 97th weight row, within rel times the sum of the products' magnitudes.
void check_products(const std::vector<float>& y, const test::RepeatedMatrix& w,
                    const std::vector<float>& x, uint32_t m, uint32_t rows, uint32_t cols,
                    double rel, std::string_view what) {
    for (uint32_t i = 0; i < m; i += 3)
        for (uint32_t r = 0; r < rows; r += 97) {
            double ref = 0, mag = 0;
            for (uint32_t k = 0; k < cols; ++k) {
                const double p = (double)w.row(r)[k] * x[(size_t)i * cols + k];
                ref += p;
                mag += std::fabs(p);
            }
            ASSERT_NEAR(y[(size_t)i * rows + r], ref, rel * mag + 1e-4)
                << what << " vector " << i << " row " << r;
        }
}

struct GemmSpeedCase {
    QType type;
    uint32_t rows, cols, m;
};

void report(Device& dev, Kernels& K, const GemmSpeedCase& c) {
    const Features& f = dev.features();
    std::mt19937 rng(c.rows ^ c.cols);
    std::normal_distribution<float> nd(0.f, 1.f);
    const test::RepeatedMatrix rw = test::repeated_rows(dev, c.type, c.rows, c.cols, rng);
    const Buffer& w = rw.w;
    std::vector<float> x((size_t)c.m * c.cols);
    for (float& v : x) v = nd(rng);
    Buffer xb = test::to_device(dev, x);
    Buffer y = test::poisoned(dev, (size_t)c.m * c.rows);
    const double flop = 2.0 * c.m * c.rows * c.cols;
    const uint32_t runs = f.cpu ? 1 : 20;

    struct Run {
        Variant v;
        uint32_t ablate;
        Kernels::GemmTile tile;
        int expand;          // Kernels::gemm_expand
        bool acc16 = false;  // Kernels::gemm_acc16: the error is printed, not checked
    };
    std::vector<Run> plans = {{Variant::scalar, 0, {}, 0}};
    if (Kernels::gemm_uses_coopmat(f, Variant::khr_coopmat))
        for (uint32_t ablate : {0u, 1u, 2u}) plans.push_back({Variant::khr_coopmat, ablate, {}, 0});
    // The NV cooperative matrix 2 tiles as gemm() runs them (expanding W to F16 first), then
    // decoding inside the loads in a spread of sizes, then expanded in other sizes.
    if (Kernels::gemm_uses_cm2(f, dev.variant())) {
        plans.push_back({dev.variant(), 0, {}, -1});
        for (Kernels::GemmTile g :
             {Kernels::GemmTile{}, Kernels::GemmTile{64, 128, 32}, Kernels::GemmTile{64, 256, 32},
              Kernels::GemmTile{128, 128, 32}, Kernels::GemmTile{128, 256, 32},
              Kernels::GemmTile{64, 64, 32}, Kernels::GemmTile{32, 128, 32},
              Kernels::GemmTile{64, 128, 64}, Kernels::GemmTile{128, 128, 32, 128},
              Kernels::GemmTile{64, 128, 32, 128}, Kernels::GemmTile{128, 64, 32, 128}})
            plans.push_back({dev.variant(), 0, g, 0});
        // Expanded, F32 sums: sizes and workgroups (invocations past the device's workgroup-
        // scope limit are left out).
        for (Kernels::GemmTile g :
             {Kernels::GemmTile{128, 128, 32}, Kernels::GemmTile{256, 128, 64},
              Kernels::GemmTile{128, 256, 64}, Kernels::GemmTile{64, 128, 64},
              Kernels::GemmTile{128, 128, 64, 128}, Kernels::GemmTile{128, 128, 32, 128},
              Kernels::GemmTile{64, 128, 64, 128}, Kernels::GemmTile{128, 256, 32, 512},
              Kernels::GemmTile{256, 128, 32, 512}, Kernels::GemmTile{256, 256, 32, 512},
              Kernels::GemmTile{128, 128, 64, 512}})
            if (g.wg <= f.cm2_max_workgroup) plans.push_back({dev.variant(), 0, g, 1});
        // F16 accumulators (half the registers): the F16 tiles in the larger sizes they allow.
        if (!find_module("gemm_f16_acc16@nv_coopmat2").empty())
            for (Kernels::GemmTile g :
                 {Kernels::GemmTile{128, 128, 64}, Kernels::GemmTile{128, 256, 64},
                  Kernels::GemmTile{256, 128, 64}, Kernels::GemmTile{128, 256, 32},
                  Kernels::GemmTile{256, 256, 32}})
                plans.push_back({dev.variant(), 0, g, 1, true});
    }
    Buffer w16 = dev.create_buffer((uint64_t)c.rows * c.cols * 2, MemoryKind::device);
    Buffer x16 = dev.create_buffer((uint64_t)c.m * c.cols * 2, MemoryKind::device);
    test::run(dev, [&](CommandList& cl) { K.f16_copy(cl, view(xb), 0, view(x16), c.m * c.cols); });
    for (const auto& [v, ablate, tile, expand, acc16] : plans) {
        test::Scoped tile_scope(K.tuning.gemm_tile, tile);
        test::Scoped expand_scope(K.tuning.gemm_expand, expand);
        test::Scoped acc16_scope(K.tuning.gemm_acc16, acc16);
        std::optional<test::Scoped<uint32_t>> ablate_scope(std::in_place,
                                                           K.tuning.gemm_omitted_work, ablate);
        const double ms = test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
            K.gemm(cl, v, c.type, view(w), c.rows, c.cols, view(xb), 0, view(x16), view(y), 0, c.m,
                   false, view(w16));
        });
        ablate_scope.reset();
        const bool expanded = K.gemm_expands(v, c.type, c.rows, c.cols, c.m, view(w16));
        const Kernels::GemmTile g = K.gemm_cm2_tile(expanded ? QType::F16 : c.type, c.rows, c.m);
        const std::string shape = Kernels::gemm_uses_cm2(f, v)
                                      ? fmt::format(" {}x{}x{}/{}{}", g.bm, g.bn, g.bk, g.wg,
                                                    expanded ? " expanded to F16" : "")
                                      : "";
        const char* part = ablate == 1   ? " without dequantization"
                           : ablate == 2 ? " without products"
                           : acc16       ? " F16 accumulators"
                                         : "";
        fmt::print("GEMM {} {}x{} weights, {} rows, {}{}{}: {:.3f} ms, {:.1f} TFLOP/s\n",
                   qtype_name(c.type), c.rows, c.cols, c.m, variant_name(v), shape, part, ms,
                   flop / (ms * 1e-3) / 1e12);
        if (ablate != 0) continue;
        auto out = test::from_device<float>(dev, y, (size_t)c.m * c.rows);
        const double tol = v == Variant::scalar ? 1e-5 : 3e-3;
        double worst = 0;  // the largest error relative to the sum of |products|
        for (uint32_t i = 0; i < c.m; i += 97)
            for (uint32_t r = 0; r < c.rows; r += 31) {
                double ref = 0, mag = 0;
                for (uint32_t k = 0; k < c.cols; ++k) {
                    double p = (double)rw.row(r)[k] * x[(size_t)i * c.cols + k];
                    ref += p;
                    mag += std::fabs(p);
                }
                const double got = out[(size_t)i * c.rows + r];
                worst = std::max(worst, std::isfinite(got) ? std::fabs(got - ref) / mag : 1e30);
                if (!acc16) {
                    ASSERT_NEAR(got, ref, tol * mag + 1e-4)
                        << variant_name(v) << " row " << i << " col " << r;
                }
            }
        if (acc16) fmt::print("  largest error / sum of |products|: {:.2e}\n", worst);
    }
}

TEST(GemmSpeed, Report) {
    VK_SPEED_DEVICE();
    const bool cpu = dev.features().cpu;
    // 9B FFN up and down in Q4_K, Q6_K and Q8_0, the same up in F16 (no dequantization cost to
    // speak of), and a 0.8B-sized FFN up (a small grid).
    const uint32_t m = cpu ? 64u : 512u;
    for (const GemmSpeedCase& c :
         {GemmSpeedCase{QType::Q4_K, 12288, 4096, m}, GemmSpeedCase{QType::Q4_K, 4096, 12288, m},
          GemmSpeedCase{QType::Q6_K, 4096, 12288, m}, GemmSpeedCase{QType::Q8_0, 12288, 4096, m},
          GemmSpeedCase{QType::F16, 12288, 4096, m}, GemmSpeedCase{QType::Q4_K, 3584, 1024, m},
          // The window the driver now runs.
          GemmSpeedCase{QType::Q4_K, 12288, 4096, 4 * m},
          GemmSpeedCase{QType::Q4_K, 4096, 4096, 4 * m}}) {
        if (cpu && c.rows > 4096) continue;
        report(dev, K, c);
        if (HasFatalFailure()) return;
    }
}

// The batched GEMV (a batched step's GEMMs of a few rows) in its forms: over F32 x (each weight
// slice decoded again for every vector of a group, or once for the group: Tuning::
// gemv_batch_decode_once) and over x rounded to bytes (round_rows, outside the timing), under the
// launcher's rows and threads a workgroup and forced ones. Each run's output is checked against
// the dequantized reference (over the host's rounding of x for the bytes form) on a spread of
// elements.
TEST(BatchedGemvSpeed, Forms) {
    VK_SPEED_DEVICE();
    const bool cpu = dev.features().cpu;
    const uint32_t rows = cpu ? 4096 : 12288, cols = 4096, runs = cpu ? 2 : 20;
    test::Scoped gemv_rows(K.tuning.gemm_gemv_rows, 64u);
    struct Form {
        bool bytes, once;
        uint32_t rows, threads;
    };
    const std::vector<Form> forms = {
        {false, false, 0, 0}, {false, true, 0, 0},  {true, false, 0, 0},  {true, false, 8, 0},
        {true, false, 8, 32}, {true, false, 8, 64}, {true, false, 4, 32}, {true, false, 4, 64}};
    for (QType t : {QType::Q4_K, QType::Q6_K, QType::Q8_0}) {
        std::mt19937 rng(rows ^ cols ^ (uint32_t)t);
        std::normal_distribution<float> nd(0.f, 1.f);
        const test::RepeatedMatrix w = test::repeated_rows(dev, t, rows, cols, rng);
        for (uint32_t m : {2u, 8u, 32u}) {
            std::vector<float> x((size_t)m * cols);
            for (float& v : x) v = nd(rng);
            const std::vector<float> xr = test::round_x_bytes(x.data(), x.size()).values;
            Buffer xb = test::to_device(dev, x);
            Buffer xq = test::poisoned(dev, m * Kernels::rounding_floats(cols) + 4);
            test::run(
                dev, [&](CommandList& cl) { K.round_rows(cl, view(xb), 0, view(xq), 0, cols, m); });
            Buffer y = test::poisoned(dev, (size_t)m * rows);
            for (const Form& form : forms) {
                test::Scoped x_form(K.tuning.gemv_x,
                                    form.bytes ? Kernels::GemvX::bytes : Kernels::GemvX::global);
                if (form.bytes && !K.gemv_batch_reads_bytes(t, cols, m)) continue;
                test::Scoped once_scope(K.tuning.gemv_batch_decode_once, form.once);
                test::Scoped rows_scope(K.tuning.gemv_batch_rows, form.rows);
                test::Scoped threads_scope(K.tuning.gemv_batch_threads, form.threads);
                const double ms = test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
                    K.gemm(cl, Variant::scalar, t, view(w.w), rows, cols, view(xb), 0, view(xq),
                           view(y), 0, m, false, {});
                });
                auto count = [](uint32_t v) {
                    return v ? fmt::format("{}", v) : std::string("auto");
                };
                fmt::print(
                    "batched GEMV {} {}x{}, {} vectors, {}, rows a workgroup {}, threads {}: "
                    "{:.3f} ms, {:.1f} GB/s of weights\n",
                    qtype_name(t), rows, cols, m,
                    form.bytes  ? "over bytes"
                    : form.once ? "F32 x, decoded once"
                                : "F32 x, decoded for each vector",
                    count(form.rows), count(form.threads), ms,
                    (double)w.row_bytes * rows / (ms * 1e-3) / 1e9);
                auto out = test::from_device<float>(dev, y, (size_t)m * rows);
                check_products(out, w, form.bytes ? xr : x, m, rows, cols, form.bytes ? 1e-4 : 1e-5,
                               qtype_name(t));
                if (HasFatalFailure()) return;
            }
        }
    }
}

// The skinny GEMM (GEMMs of a batched step's rows on KHR cooperative matrices) over the 9B's
// matrix shapes, at 8 to 64 rows of X, in its default form and its switches' forms: the time
// and the weights' GB/s, each run's output checked against the dequantized reference (F16
// rounding) on a spread of elements.
TEST(SkinnyGemmSpeed, Forms) {
    VK_SPEED_DEVICE();
    if (!Kernels::gemm_uses_skinny(dev.features(), dev.variant()))
        GTEST_SKIP() << "no skinny GEMM on this device or build";
    const uint32_t runs = 20;
    test::Scoped on(K.tuning.gemm_skinny, true);
    test::Scoped rows_scope(K.tuning.gemm_skinny_rows, 256u);
    test::Scoped gemv_rows(K.tuning.gemm_gemv_rows, 0u);
    for (auto [t, rows, cols] : {std::tuple{QType::Q4_K, 12288u, 4096u},
                                 {QType::Q4_K, 4096u, 12288u},
                                 {QType::Q6_K, 4096u, 4096u}}) {
        std::mt19937 rng(rows ^ cols ^ (uint32_t)t);
        std::normal_distribution<float> nd(0.f, 1.f);
        const test::RepeatedMatrix w = test::repeated_rows(dev, t, rows, cols, rng);
        for (uint32_t m : {8u, 16u, 32u, 64u}) {
            std::vector<float> x((size_t)m * cols);
            for (float& v : x) v = nd(rng);
            Buffer xb = test::to_device(dev, x);
            Buffer x16 = test::poisoned(dev, (size_t)m * cols / 2 + 4);
            test::run(dev,
                      [&](CommandList& cl) { K.f16_copy(cl, view(xb), 0, view(x16), m * cols); });
            Buffer y = test::poisoned(dev, (size_t)m * rows);
            // The defaults (tiles and parts by the rule, X a stage ahead, the weights two), then
            // with Q4_K decoded to halves by bit operations (by the rule, two and four tiles of
            // weight rows); X between the barriers and the weights one stage ahead; four tiles
            // of weight rows over at most two of X.
            std::vector<std::tuple<uint32_t, uint32_t, bool, uint32_t, uint32_t, bool>> forms = {
                {0u, 0u, true, 2u, 0u, false},  {0u, 0u, true, 2u, 0u, true},
                {2u, 0u, true, 2u, 0u, true},   {4u, 0u, true, 2u, 0u, true},
                {0u, 0u, false, 1u, 0u, false}, {4u, 0u, true, 2u, 2u, false}};
            for (auto [rt, parts, prefetch, ahead, mt, half] : forms) {
                test::Scoped rt_scope(K.tuning.gemm_skinny_rt, rt);
                test::Scoped parts_scope(K.tuning.gemm_skinny_parts, parts);
                test::Scoped prefetch_scope(K.tuning.gemm_skinny_prefetch, prefetch);
                test::Scoped ahead_scope(K.tuning.gemm_skinny_ahead, ahead);
                test::Scoped mt_scope(K.tuning.gemm_skinny_mt, mt);
                test::Scoped half_scope(K.tuning.gemm_skinny_half, half);
                const Kernels::SkinnyShape sh = K.skinny_shape(rows, cols, m);
                // Its split's scratch (its counters zero).
                Buffer counters =
                    test::to_device(dev, std::vector<uint32_t>(sh.split.need.counters / 4 + 4, 0u));
                Buffer sums = test::poisoned(dev, sh.split.need.parts / 4 + 4);
                const double ms = test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
                    K.gemm(cl, dev.variant(), t, view(w.w), rows, cols, view(xb), 0, view(x16),
                           view(y), 0, m, false, {}, false, 0, {view(counters), view(sums)});
                });
                fmt::print(
                    "skinny GEMM {} {}x{}, {} rows of X, {} tiles a workgroup ({} of X), parts {} "
                    "({}){}{}{}: "
                    "{:.3f} ms, {:.1f} GB/s of weights\n",
                    qtype_name(t), rows, cols, m, sh.rt, sh.mt,
                    parts ? fmt::format("{}", parts) : "auto", sh.split.parts,
                    prefetch ? ", X a stage ahead" : "",
                    ahead == 2 ? ", weights two stages ahead" : "",
                    half ? ", Q4_K to halves by bits" : "", ms,
                    (double)w.row_bytes * rows / (ms * 1e-3) / 1e9);
                auto out = test::from_device<float>(dev, y, (size_t)m * rows);
                check_products(out, w, x, m, rows, cols, 2e-3, qtype_name(t));
                if (HasFatalFailure()) return;
            }
        }
    }
}

}  // namespace
}  // namespace dl::vk
