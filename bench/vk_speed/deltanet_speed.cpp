// Speed reports of the Gated DeltaNet kernels: the decode step after other work, and a prefill
// window on every scan module the device has.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu/deltanet.h"
#include "deltanet_reference.h"
#include "speed.h"

namespace dl::vk {
namespace {

namespace dn = cpu::deltanet;

using Scan = Kernels::DeltaNetScan;
using test::randn;
using test::Reference;

// The decode step of a Qwen3.5 DeltaNet layer in the token's form (its gated norm left to the
// output projection, y rounded to bytes), timed right after itself and after other work
// (test::OtherWork): what it pays for running cold, as in a token, where it follows a layer's
// weights and GEMVs. 16 key heads of 128; 32 value heads (9B) or 16 (0.8B).
TEST(DeltaNetStepSpeed, AfterOtherWork) {
    VK_SPEED_DEVICE();
    test::OtherWork other(dev, K);
    const uint32_t rounds = dev.features().cpu ? 2 : 50;
    struct Shape {
        const char* name;
        uint32_t hk, hv;
    };
    for (const Shape& sh : {Shape{"Qwen3.5-9B", 16, 32}, Shape{"Qwen3.5-0.8B", 16, 16}}) {
        const uint32_t dk = 128, dv = 128, KC = 4;
        const dn::Shape shape{sh.hk, sh.hv, dk, dv};
        const uint32_t conv_dim = (uint32_t)shape.conv_dim(), inner = sh.hv * dv;
        // Parameters: conv taps | dt_bias | ssm_a (negative) | norm.
        std::vector<float> params = randn((size_t)conv_dim * KC + 2 * sh.hv + dv, 7, 0.5f);
        const uint32_t dt_off = conv_dim * KC, a_off_p = dt_off + sh.hv, norm_off = a_off_p + sh.hv;
        for (uint32_t h = 0; h < sh.hv; ++h) params[a_off_p + h] = -0.5f - 0.01f * (float)h;
        Buffer pb = test::to_device(dev, params);
        // act: qkv | z | beta | alpha | y (its rounding) | the column groups' sums of squares.
        const uint32_t z_off = conv_dim, b_off = z_off + inner, a_off = b_off + sh.hv,
                       y_off = a_off + sh.hv, ss_off = y_off + inner;
        const uint32_t groups = K.deltanet_groups(dv, true);
        std::vector<float> in = randn(ss_off + sh.hv * groups, 8);
        Buffer act = test::to_device(dev, in);
        Buffer ring = test::to_device(dev, randn((size_t)KC * conv_dim, 9));
        Buffer state = test::to_device(dev, randn((size_t)sh.hv * dk * dv, 10, 0.1f));
        Buffer tok = dev.create_buffer(16, MemoryKind::host);
        static_cast<uint32_t*>(tok.mapped())[0] = 127;
        Buffer counter = dev.create_buffer(sh.hv * 4, MemoryKind::device);
        dev.fill(counter, 0, sh.hv * 4, 0);
        Kernels::DeltaNetStep args{sh.hk, sh.hv, dk, dv,     KC,      0,        z_off, b_off,
                                   a_off, y_off, 0,  dt_off, a_off_p, norm_off, 1e-6f};
        args.ss_off = ss_off;
        args.round_y = true;
        // Every output poisoned, then written by the timed runs.
        dev.fill(act, (uint64_t)y_off * 4, (uint64_t)(inner + sh.hv * groups) * 4, test::kPoison);
        fmt::print("{} DeltaNet decode step, us (a timestamp included): {}\n", sh.name,
                   other.report(rounds, [&](CommandList& cl) {
                       K.deltanet_step(cl, args, view(act), view(pb), view(ring), view(state),
                                       view(tok), view(counter));
                   }));
        const auto out = test::from_device<float>(dev, act, ss_off + sh.hv * groups);
        const uint32_t scales = y_off + inner / 4;  // each block's scale and scaled sum
        for (uint32_t i = scales; i < scales + inner / 8; ++i)
            ASSERT_TRUE(std::isfinite(out[i])) << sh.name << " y's rounding, float " << i - y_off;
        for (uint32_t i = ss_off; i < ss_off + sh.hv * groups; ++i)
            ASSERT_TRUE(std::isfinite(out[i])) << sh.name << " sum of squares " << i - ss_off;
    }
}

// Timing of a 512-row window at the Qwen3.5 0.8B and 9B DeltaNet shapes for every scan module
// the device has (meant for a real GPU). Each module's last
// run is still checked against the double-precision loop, so a fast but wrong kernel fails.
TEST(DeltaNetWindowSpeed, Report) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    struct Shape {
        const char* name;
        uint32_t hk, hv;
    };
    for (Shape shp : {Shape{"0.8B", 16, 16}, Shape{"9B", 16, 32}}) {
        const uint32_t hk = shp.hk, hv = shp.hv, dk = 128, dv = 128, KC = 4, n = 512;
        const uint32_t conv_dim = 2 * hk * dk + hv * dv, inner = hv * dv;
        std::mt19937 rng(7);
        std::vector<float> conv_w = randn((size_t)conv_dim * KC, rng, 0.5f);
        std::vector<float> dt_bias = randn(hv, rng), ssm_a(hv), norm = randn(dv, rng, 0.3f);
        for (float& a : ssm_a) a = -std::exp(std::uniform_real_distribution<float>(-2.f, 1.f)(rng));
        for (float& w : norm) w += 1.f;
        std::vector<float> params;
        for (auto* v : {&conv_w, &dt_bias, &ssm_a, &norm})
            params.insert(params.end(), v->begin(), v->end());
        const uint32_t dt_off = conv_dim * KC, a_off_p = dt_off + hv, norm_off = a_off_p + hv;
        Buffer pb = test::to_device(dev, params);
        const uint32_t z_off = n * conv_dim, b_off = z_off + n * inner, a_off = b_off + n * hv,
                       y_off = a_off + n * hv, xc_off = y_off + n * inner,
                       wy_off = xc_off + n * conv_dim,
                       n_act = wy_off + n * Kernels::deltanet_wy_floats(hv, dk, dv);
        std::vector<float> in = randn(n_act, rng);
        Buffer act = test::to_device(dev, in);
        Buffer ring = dev.create_buffer((size_t)KC * conv_dim * 4, MemoryKind::device);
        Buffer state = dev.create_buffer((size_t)hv * dk * dv * 4, MemoryKind::device);
        Buffer tok = dev.create_buffer(16, MemoryKind::host);
        static_cast<uint32_t*>(tok.mapped())[0] = 0;
        Kernels::DeltaNetStep args{hk,    hv,    dk, dv,     KC,      0,        z_off, b_off,
                                   a_off, y_off, 0,  dt_off, a_off_p, norm_off, 1e-6f, wy_off};

        Reference ref{hk, hv, dk, dv, KC, conv_dim, {}, {}, {}, {}, {}, {}, 1e-6};
        ref.w.assign(conv_w.begin(), conv_w.end());
        ref.dt.assign(dt_bias.begin(), dt_bias.end());
        ref.ssm_a.assign(ssm_a.begin(), ssm_a.end());
        ref.norm.assign(norm.begin(), norm.end());
        ref.S.assign((size_t)hv * dk * dv, 0.0);
        std::vector<std::vector<double>> want(n);
        for (uint32_t r = 0; r < n; ++r) {
            std::vector<double> xc;
            ref.step(&in[(size_t)r * conv_dim], &in[z_off + (size_t)r * inner],
                     &in[b_off + (size_t)r * hv], &in[a_off + (size_t)r * hv], xc, want[r]);
        }

        // The chunked scan also with other walk shapes (threads a column x columns).
        std::vector<std::pair<Scan, Kernels::DeltaNetChunkTile>> configs;
        for (Scan scan : {Scan::chunked, Scan::clustered, Scan::shuffle, Scan::plain})
            configs.push_back({scan, {}});
        for (auto [g, c] : {std::pair{8u, 16u}, {16u, 16u}, {32u, 16u}})
            configs.push_back({Scan::chunked, {g, c}});
        for (auto [scan, tile] : configs) {
            if (scan == Scan::clustered && !f.subgroup_clustered) continue;
            if (scan == Scan::shuffle && !f.subgroup_shuffle) continue;
            if (scan == Scan::chunked && Kernels::deltanet_chunk_rows(f, dk, dv) == 0) continue;
            if (tile.groups * tile.cols > f.max_workgroup_invocations) continue;
            test::Scoped tile_scope(K.tuning.deltanet_chunk_tile, tile);
            // Wake the clocks up (the reference above left the GPU idle): 400 windows in a row.
            test::run(dev, [&](CommandList& cl) {
                for (int it = 0; it < 400; ++it) {
                    K.deltanet_rows(cl, args, xc_off, view(act), view(pb), view(ring), view(state),
                                    view(tok), n, scan);
                    cl.barrier();
                }
            });
            std::vector<std::pair<std::string, double>> best;
            for (int it = 0; it < 4; ++it) {
                dev.upload(act, 0, in.data(), (size_t)n_act * 4);
                dev.fill(ring, 0, ring.size(), 0);
                dev.fill(state, 0, state.size(), 0);
                CommandList cl(dev);
                cl.enable_timestamps(8);
                cl.begin();
                K.deltanet_rows(cl, args, xc_off, view(act), view(pb), view(ring), view(state),
                                view(tok), n, scan);
                cl.mark("dn norm");
                cl.end();
                cl.submit_and_wait();
                auto t = cl.times();
                if (it == 1) best = t;
                for (size_t i = 0; it > 1 && i < t.size(); ++i)
                    best[i].second = std::min(best[i].second, t[i].second);
            }
            static const char* const names[] = {"best", "clustered", "shuffle", "plain", "chunked"};
            std::string line = fmt::format(
                "DeltaNet window {} rows, {} shape, {} scan{}:", n, shp.name, names[(int)scan],
                tile.groups ? fmt::format(" {}x{}", tile.groups, tile.cols) : "");
            double total = 0;
            for (auto& [label, ms] : best) {
                line += fmt::format(" {} {:.1f} us", label, ms * 1e3);
                total += ms;
            }
            fmt::print("{}; total {:.1f} us = {:.2f} us per row\n", line, total * 1e3,
                       total * 1e3 / n);
            auto out = test::from_device<float>(dev, act, n_act);
            size_t bad = 0;
            for (uint32_t r = 0; r < n; ++r)
                for (uint32_t i = 0; i < inner; ++i) {
                    const float got = out[y_off + r * inner + i];
                    const double w = want[r][i];
                    if (!std::isfinite(got) || std::fabs(got - w) > 1e-3 * (1 + std::fabs(w)))
                        if (bad++ == 0)
                            ADD_FAILURE() << names[(int)scan] << " row " << r << " y " << i << ": "
                                          << got << " against " << w;
                }
            EXPECT_EQ(bad, 0u) << names[(int)scan] << ": outputs off the reference";
        }
    }
}

}  // namespace
}  // namespace dl::vk
