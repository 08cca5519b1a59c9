// The Gated DeltaNet window kernels (Kernels::deltanet_rows: conv into its own rows + ring update,
// gates, scan, gated norm) against a plain double-precision CPU loop, over consecutive windows of
// boundary lengths (one row, fewer rows than the conv taps, multiples of the taps, windows that
// cross the scan's staging chunks), with H_v != H_k, d_k != d_v and d_k that leaves an odd number
// of state rows per thread; every scan module the device has (the plain one always). The chunked
// (WY) module also gets windows measured in its own chunk length on this device: one row past a
// chunk, several chunks, exact multiples, a chunk less one row, an odd key head. Outputs are
// poisoned before each window, the input rows must come back untouched, and two decode steps
// after the windows check that the ring and the state are left in the decode kernel's format.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "core/env.h"
#include "deltanet_reference.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using Scan = Kernels::DeltaNetScan;

struct Case {
    uint32_t hk, hv, dk, dv, K;
    std::vector<uint32_t> windows;
    // Every part of act starts at a multiple of 4 floats (the kernels' vector loads), rather
    // than at odd offsets.
    bool aligned = false;
};

using test::randn;
using test::Reference;

// A mismatch ends the test (through ASSERT_NO_FATAL_FAILURE at each call) instead of flooding.
void near(float got, double want, double tol, const std::string& what) {
    ASSERT_TRUE(std::isfinite(got)) << what;
    ASSERT_NEAR(got, want, tol * (1 + std::fabs(want))) << what;
}

void run_case(const Case& cs, Scan scan) {
    VK_TEST_DEVICE();
    const Features& f = dev.features();
    if (scan == Scan::clustered && !f.subgroup_clustered)
        GTEST_SKIP() << "no clustered subgroup operations";
    if (scan == Scan::shuffle && !f.subgroup_shuffle) GTEST_SKIP() << "no subgroup shuffles";
    if (scan == Scan::chunked && Kernels::deltanet_chunk_rows(f, cs.dk, cs.dv) == 0)
        GTEST_SKIP() << "the chunked scan does not fit the device's shared memory";
    if (auto d = Kernels::deltanet_rows_supported(f, cs.dk, cs.dv, cs.K)) GTEST_SKIP() << d->reason;
    const uint32_t hk = cs.hk, hv = cs.hv, dk = cs.dk, dv = cs.dv, KC = cs.K;
    const uint32_t conv_dim = 2 * hk * dk + hv * dv, inner = hv * dv;
    const float eps = 1e-6f;
    std::mt19937 rng(hk * 1000 + hv * 100 + dk + dv * 7 + KC);

    std::vector<float> conv_w = randn((size_t)conv_dim * KC, rng, 0.5f);
    std::vector<float> dt_bias = randn(hv, rng), ssm_a(hv), norm = randn(dv, rng, 0.3f);
    for (float& a : ssm_a) a = -std::exp(std::uniform_real_distribution<float>(-2.f, 1.f)(rng));
    for (float& w : norm) w += 1.f;
    std::vector<float> params;
    const uint32_t conv_off = 0, dt_off = conv_dim * KC, a_off_p = dt_off + hv,
                   norm_off = a_off_p + hv;
    for (auto* v : {&conv_w, &dt_bias, &ssm_a, &norm})
        params.insert(params.end(), v->begin(), v->end());
    Buffer pb = test::to_device(dev, params);

    Reference ref{hk, hv, dk, dv, KC, conv_dim, {}, {}, {}, {}, {}, {}, eps};
    ref.w.assign(conv_w.begin(), conv_w.end());
    ref.dt.assign(dt_bias.begin(), dt_bias.end());
    ref.ssm_a.assign(ssm_a.begin(), ssm_a.end());
    ref.norm.assign(norm.begin(), norm.end());
    ref.S.assign((size_t)hv * dk * dv, 0.0);

    Buffer ring = dev.create_buffer((size_t)KC * conv_dim * 4, MemoryKind::device);
    dev.fill(ring, 0, ring.size(), 0);
    Buffer state = dev.create_buffer((size_t)hv * dk * dv * 4, MemoryKind::device);
    dev.fill(state, 0, state.size(), 0);
    Buffer tok = dev.create_buffer(16, MemoryKind::host);

    uint32_t pos = 0;
    for (size_t wi = 0; wi < cs.windows.size(); ++wi) {
        const uint32_t n = cs.windows[wi];
        // act: qkv | z | beta | alpha | y | conv out | the chunked scan's scratch, each n rows;
        // a few poisoned floats between.
        auto gap = [&](uint32_t end, uint32_t floats) {
            return cs.aligned ? (end + floats + 3) / 4 * 4 : end + floats;
        };
        const uint32_t qkv_off = gap(0, 3), z_off = qkv_off + n * conv_dim,
                       b_off = z_off + n * inner, a_off = b_off + n * hv,
                       y_off = gap(a_off + n * hv, 5), xc_off = gap(y_off + n * inner, 7),
                       wy_off = gap(xc_off + n * conv_dim, 9),
                       n_act = wy_off + n * Kernels::deltanet_wy_floats(hv, dk, dv) + 11;
        std::vector<float> qkv = randn((size_t)n * conv_dim, rng),
                           z = randn((size_t)n * inner, rng), b = randn((size_t)n * hv, rng),
                           a = randn((size_t)n * hv, rng, 2.f);
        std::vector<float> in(n_act);
        for (float& x : in) std::memcpy(&x, &test::kPoison, 4);
        std::copy(qkv.begin(), qkv.end(), in.begin() + qkv_off);
        std::copy(z.begin(), z.end(), in.begin() + z_off);
        std::copy(b.begin(), b.end(), in.begin() + b_off);
        std::copy(a.begin(), a.end(), in.begin() + a_off);
        Buffer act = test::to_device(dev, in);
        static_cast<uint32_t*>(tok.mapped())[0] = pos;
        Kernels::DeltaNetStep args{hk,      hv,       dk,    dv,    KC,       qkv_off,
                                   z_off,   b_off,    a_off, y_off, conv_off, dt_off,
                                   a_off_p, norm_off, eps,   wy_off};
        test::run(dev, [&](CommandList& cl) {
            K.deltanet_rows(cl, args, xc_off, view(act), view(pb), view(ring), view(state),
                            view(tok), n, scan);
        });
        auto out = test::from_device<float>(dev, act, n_act);
        for (uint32_t i = 0; i < n * conv_dim; ++i)
            ASSERT_EQ(test::bits(out[qkv_off + i]), test::bits(qkv[i]))
                << "input " << i << " changed";
        for (uint32_t r = 0; r < n; ++r) {
            std::vector<double> xc, y;
            ref.step(&qkv[(size_t)r * conv_dim], &z[(size_t)r * inner], &b[(size_t)r * hv],
                     &a[(size_t)r * hv], xc, y);
            const std::string at = "window " + std::to_string(wi) + " row " + std::to_string(r);
            for (uint32_t c = 0; c < conv_dim; ++c)
                ASSERT_NO_FATAL_FAILURE(near(out[xc_off + r * conv_dim + c], xc[c], 1e-5,
                                             at + " conv " + std::to_string(c)));
            for (uint32_t i = 0; i < inner; ++i)
                ASSERT_NO_FATAL_FAILURE(
                    near(out[y_off + r * inner + i], y[i], 3e-4, at + " y " + std::to_string(i)));
        }
        // Nothing written outside the outputs (the padding stays poisoned).
        for (uint32_t i : {y_off - 1, xc_off - 1, wy_off - 1, n_act - 1})
            ASSERT_EQ(test::bits(out[i]), test::kPoison) << "wrote padding at " << i;
        pos += n;
        auto Sd = test::from_device<float>(dev, state, ref.S.size());
        for (size_t i = 0; i < ref.S.size(); ++i)
            ASSERT_NO_FATAL_FAILURE(near(
                Sd[i], ref.S[i], 3e-4, "window " + std::to_string(wi) + " S " + std::to_string(i)));
    }

    // Two decode tokens continue from the ring and the state the windows left.
    for (int t = 0; t < 2; ++t) {
        const uint32_t qkv_off = 0, z_off = conv_dim, b_off = z_off + inner, a_off = b_off + hv,
                       y_off = a_off + hv, n_act = y_off + inner;
        std::vector<float> qkv = randn(conv_dim, rng), z = randn(inner, rng), b = randn(hv, rng),
                           a = randn(hv, rng, 2.f);
        std::vector<float> in(n_act);
        std::copy(qkv.begin(), qkv.end(), in.begin() + qkv_off);
        std::copy(z.begin(), z.end(), in.begin() + z_off);
        std::copy(b.begin(), b.end(), in.begin() + b_off);
        std::copy(a.begin(), a.end(), in.begin() + a_off);
        for (uint32_t i = y_off; i < n_act; ++i) std::memcpy(&in[i], &test::kPoison, 4);
        Buffer act = test::to_device(dev, in);
        static_cast<uint32_t*>(tok.mapped())[0] = pos;
        Kernels::DeltaNetStep args{hk,    hv,    dk,       dv,     KC,      qkv_off,  z_off, b_off,
                                   a_off, y_off, conv_off, dt_off, a_off_p, norm_off, eps};
        test::run(dev, [&](CommandList& cl) {
            K.deltanet_step(cl, args, view(act), view(pb), view(ring), view(state), view(tok));
        });
        auto out = test::from_device<float>(dev, act, n_act);
        std::vector<double> xc, y;
        ref.step(qkv.data(), z.data(), b.data(), a.data(), xc, y);
        for (uint32_t i = 0; i < inner; ++i)
            ASSERT_NO_FATAL_FAILURE(
                near(out[y_off + i], y[i], 3e-4,
                     "decode " + std::to_string(t) + " y " + std::to_string(i)));
        ++pos;
    }
}

struct Named {
    const char* name;
    Case c;
};

const Named kCases[] = {
    {"OneRow", {2, 4, 32, 16, 4, {1}}},
    {"FewerRowsThanTaps", {2, 4, 32, 16, 4, {2, 1, 2, 1}}},
    {"RowsMultipleOfTaps", {2, 4, 32, 16, 4, {4, 8, 4}}},
    {"OddStateRowsThreeTaps", {3, 3, 24, 8, 3, {5, 3, 6}}},
    {"KeyWiderThanValueOverChunks", {1, 2, 64, 32, 4, {37, 40}}},
    {"ValueWiderThanKeyTwoTaps", {2, 2, 16, 64, 2, {3, 2}}},
    {"FullHeadSize", {1, 2, 128, 128, 4, {70}}},
    // Not whole quads: no chunked shape, so `best` falls back to a token scan.
    {"KeyHeadNotWholeQuads", {1, 2, 18, 16, 4, {5, 3}}},
};

class DeltaNetWindow : public ::testing::TestWithParam<std::tuple<int, Scan>> {};

TEST_P(DeltaNetWindow, MatchesPlainLoop) {
    const auto [i, scan] = GetParam();
    run_case(kCases[i].c, scan);
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<int, Scan>>& p) {
    static const char* const scans[] = {"Best", "Clustered", "Shuffle", "Plain", "Chunked"};
    return std::string(kCases[std::get<0>(p.param)].name) + "_" + scans[(int)std::get<1>(p.param)];
}

INSTANTIATE_TEST_SUITE_P(Kernels, DeltaNetWindow,
                         ::testing::Combine(::testing::Range(0, (int)std::size(kCases)),
                                            ::testing::Values(Scan::best, Scan::clustered,
                                                              Scan::shuffle, Scan::plain,
                                                              Scan::chunked)),
                         case_name);

// Windows of the chunked module in units of its chunk length C on this device: each window is
// chunks × C + extra rows.
struct ChunkCase {
    const char* name;
    uint32_t hk, hv, dk, dv, K;
    std::vector<std::pair<uint32_t, int>> windows;
    bool aligned = false;
};

const ChunkCase kChunkCases[] = {
    {"OneRowPastAChunk", 2, 4, 32, 16, 4, {{1, 1}}},
    {"SeveralChunksThenMore", 1, 2, 64, 32, 4, {{3, 5}, {1, 0}, {0, 3}}},
    {"ExactChunksThenOneRowThenChunkLessOne", 3, 3, 24, 8, 3, {{2, 0}, {0, 1}, {1, -1}}},
    {"ValueWiderThanKey", 2, 2, 16, 64, 2, {{1, 1}, {2, -3}}},
    {"OddKeyHeadNarrowValue", 2, 2, 20, 4, 4, {{1, 2}, {0, 2}}},
    {"FullHeadSizeTwoValueHeadsAKey", 2, 4, 128, 128, 4, {{2, 1}, {1, 7}}},
    {"AlignedQuadsTwoValueHeadsAKey", 1, 2, 64, 32, 4, {{2, 3}, {1, 0}}, true},
};

class DeltaNetChunk : public ::testing::TestWithParam<int> {};

TEST_P(DeltaNetChunk, MatchesPlainLoopAcrossChunks) {
    VK_TEST_DEVICE();
    const ChunkCase& cc = kChunkCases[GetParam()];
    const uint32_t c = Kernels::deltanet_chunk_rows(dev.features(), cc.dk, cc.dv);
    if (c == 0) GTEST_SKIP() << "the chunked scan does not fit the device's shared memory";
    Case cs{cc.hk, cc.hv, cc.dk, cc.dv, cc.K, {}, cc.aligned};
    for (auto [chunks, extra] : cc.windows)
        cs.windows.push_back((uint32_t)((int)(chunks * c) + extra));
    // The walk with the launcher's threads a column (16 at these head counts), then with 8
    // (what it takes for many workgroups).
    for (uint32_t groups : {0u, 8u}) {
        SCOPED_TRACE(fmt::format("{} threads a column", groups));
        test::Scoped tile(K.tuning.deltanet_chunk_tile, Kernels::DeltaNetChunkTile{groups, 0});
        ASSERT_NO_FATAL_FAILURE(run_case(cs, Scan::chunked));
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, DeltaNetChunk, ::testing::Range(0, (int)std::size(kChunkCases)),
                         [](const ::testing::TestParamInfo<int>& p) {
                             return std::string(kChunkCases[p.param].name);
                         });

// Key heads of 18 (the token scans take them) are not whole quads, so the chunked scan has no
// shape for them on any device: forcing it is an error that says so, recorded nothing.
TEST(DeltaNetWindowDecline, ForcedChunkedThatDoesNotFitIsAnError) {
    VK_TEST_DEVICE();
    const uint32_t hk = 1, hv = 1, dk = 18, dv = 16, conv_dim = 2 * hk * dk + hv * dv;
    ASSERT_EQ(Kernels::deltanet_chunk_rows(dev.features(), dk, dv), 0u);
    ASSERT_FALSE(Kernels::deltanet_rows_supported(dev.features(), dk, dv, 4).has_value());
    Buffer act = dev.create_buffer(8192 * 4, MemoryKind::device);
    Buffer b = dev.create_buffer(8192 * 4, MemoryKind::device);
    Kernels::DeltaNetStep args{hk, hv, dk, dv, 4, 0, conv_dim, 0, 0, 0, 0, 0, 0, 0, 1e-6f, 8192};
    CommandList cl(dev);
    cl.begin();
    try {
        K.deltanet_rows(cl, args, 4096, view(act), view(b), view(b), view(b), view(b), 1,
                        Scan::chunked);
        ADD_FAILURE() << "forcing the chunked scan on key heads of 18 did not fail";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("key heads of 18"), std::string::npos) << e.what();
    }
    EXPECT_EQ(cl.n_dispatches(), 0u);
    cl.end();
}

TEST(DeltaNetWindowDecline, ForcedModuleTheDeviceLacksIsAnError) {
    VK_TEST_DEVICE();
    const Features& f = dev.features();
    if (f.subgroup_clustered && f.subgroup_shuffle) GTEST_SKIP() << "the device has every module";
    const Scan s = f.subgroup_clustered ? Scan::shuffle : Scan::clustered;
    const uint32_t hk = 1, hv = 1, dk = 16, dv = 16, conv_dim = 2 * hk * dk + hv * dv;
    Buffer act = dev.create_buffer(4096 * 4, MemoryKind::device);
    Buffer b = dev.create_buffer(4096 * 4, MemoryKind::device);
    Kernels::DeltaNetStep args{hk, hv, dk, dv, 4, 0, conv_dim, 0, 0, 0, 0, 0, 0, 0, 1e-6f};
    CommandList cl(dev);
    cl.begin();
    EXPECT_THROW(
        K.deltanet_rows(cl, args, 2048, view(act), view(b), view(b), view(b), view(b), 1, s),
        Error);
    cl.end();
}

}  // namespace
}  // namespace dl::vk
