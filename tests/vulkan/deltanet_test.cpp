// The fused Gated DeltaNet decode step against the CPU chain's DeltaNet pieces (conv + SiLU,
// q/k l2 norm, gates, delta rule, gated RMSNorm), over several tokens so the conv ring and the
// state carry over, with H_v != H_k so the value-to-key head pairing (h mod H_k) is exercised.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "cpu/deltanet.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

namespace dn = cpu::deltanet;

using test::randn;

// columns: value columns a workgroup (Kernels::deltanet_columns, 0: a whole head); when it
// splits the heads, the counter words must be back at 0 after every token. subgroups:
// Kernels::deltanet_subgroups (the workgroup sums through subgroup sums, where the device has
// them, or the shared-memory tree). norm_out: the step leaves the gated norm to its reader
// (DeltaNetStep::ss_off): y then holds o · w · silu(z) and the sums of squares of o of each
// column group follow it, and the norm those give must be the CPU chain's. round_y (with
// norm_out): y holds those values rounded to bytes by 16-value blocks (DeltaNetStep::round_y,
// the layout of Kernels::GemvRounding), which times their block scales and the heads' factors
// must be the CPU chain's output to within half a rounding step, each block's largest byte
// ±127 and its scaled sum the scale times the sum of its bytes. pooled: ring and state are the
// second slot of pools of three (DeltaNetStep::state_in_tok, a batch's rows), found through
// tok[8] and tok[9]; the other slots, poisoned, must stay untouched.
void run_case(uint32_t hk, uint32_t hv, uint32_t dk, uint32_t dv, int tokens, uint32_t columns,
              bool subgroups, bool norm_out = false, bool round_y = false, bool pooled = false) {
    VK_TEST_DEVICE();
    test::Scoped cols(K.tuning.deltanet_columns, columns);
    test::Scoped sgs(K.tuning.deltanet_subgroups, subgroups);
    Buffer counter = dev.create_buffer(hv * 4, MemoryKind::device);
    dev.fill(counter, 0, hv * 4, 0);
    const uint32_t KC = 4;
    const float eps = 1e-6f;
    dn::Shape shape{hk, hv, dk, dv};
    const uint32_t conv_dim = (uint32_t)shape.conv_dim(), inner = hv * dv;
    std::mt19937 rng(hk * 100 + hv * 10 + dk + dv);

    // Layer parameters, packed as the driver packs them: conv taps | dt_bias | ssm_a | norm.
    std::vector<float> conv_w = randn((size_t)conv_dim * KC, rng, 0.5f);
    std::vector<float> dt_bias = randn(hv, rng), ssm_a(hv), norm = randn(dv, rng, 0.3f);
    for (float& a : ssm_a) a = -std::exp(std::uniform_real_distribution<float>(-2.f, 1.f)(rng));
    for (float& w : norm) w += 1.f;
    std::vector<float> params;
    const uint32_t conv_off = 0, dt_off = conv_dim * KC, a_off_p = dt_off + hv,
                   norm_off = a_off_p + hv;
    params.insert(params.end(), conv_w.begin(), conv_w.end());
    params.insert(params.end(), dt_bias.begin(), dt_bias.end());
    params.insert(params.end(), ssm_a.begin(), ssm_a.end());
    params.insert(params.end(), norm.begin(), norm.end());
    Buffer pb = test::to_device(dev, params);

    // Activations: qkv | z | beta | alpha | y | the sums of squares (norm_out; y and the sums
    // poisoned each token).
    const uint32_t qkv_off = 0, z_off = conv_dim, b_off = z_off + inner, a_off = b_off + hv,
                   y_off = a_off + hv, ss_off = y_off + inner;
    const uint32_t groups = K.deltanet_groups(dv, true);
    const uint32_t n_act = ss_off + (norm_out ? hv * groups : 0);
    Buffer act = dev.create_buffer(n_act * 4, MemoryKind::device);
    const size_t ring_n = (size_t)KC * conv_dim, state_n = (size_t)hv * dk * dv;
    const size_t slots = pooled ? 3 : 1, slot = pooled ? 1 : 0;
    Buffer ring = test::poisoned(dev, slots * ring_n), state = test::poisoned(dev, slots * state_n);
    dev.fill(ring, slot * ring_n * 4, ring_n * 4, 0);
    dev.fill(state, slot * state_n * 4, state_n * 4, 0);
    Buffer tok = dev.create_buffer(64, MemoryKind::host);
    static_cast<uint32_t*>(tok.mapped())[8] = (uint32_t)(slot * state_n);
    static_cast<uint32_t*>(tok.mapped())[9] = (uint32_t)(slot * ring_n);

    std::vector<float> S((size_t)hv * dk * dv, 0.f), conv_state((size_t)(KC - 1) * conv_dim, 0.f);
    Kernels::DeltaNetStep args{hk,    hv,    dk,       dv,     KC,      qkv_off,  z_off, b_off,
                               a_off, y_off, conv_off, dt_off, a_off_p, norm_off, eps};
    if (norm_out) args.ss_off = ss_off;
    args.round_y = round_y;
    args.state_in_tok = pooled;
    for (int t = 0; t < tokens; ++t) {
        std::vector<float> qkv = randn(conv_dim, rng), z = randn(inner, rng), b = randn(hv, rng),
                           a = randn(hv, rng, 2.f);
        std::vector<float> in(n_act);
        std::copy(qkv.begin(), qkv.end(), in.begin() + qkv_off);
        std::copy(z.begin(), z.end(), in.begin() + z_off);
        std::copy(b.begin(), b.end(), in.begin() + b_off);
        std::copy(a.begin(), a.end(), in.begin() + a_off);
        for (uint32_t i = y_off; i < n_act; ++i) std::memcpy(&in[i], &test::kPoison, 4);
        dev.upload(act, 0, in.data(), n_act * 4);
        static_cast<uint32_t*>(tok.mapped())[0] = (uint32_t)t;
        test::run(dev, [&](CommandList& cl) {
            K.deltanet_step(cl, args, view(act), view(pb), view(ring), view(state), view(tok),
                            view(counter));
        });
        for (uint32_t c : test::from_device<uint32_t>(dev, counter, hv))
            ASSERT_EQ(c, 0u) << "token " << t << ": a head's counter was not reset";
        auto out = test::from_device<float>(dev, act, n_act);

        // CPU reference.
        std::vector<float> c(conv_dim), beta(hv), g(hv), o(inner), y(inner);
        dn::conv_silu(1, conv_dim, KC, qkv.data(), conv_w.data(), conv_state.data(), c.data());
        dn::normalize_qk(shape, 1, c.data());
        dn::gates(1, hv, b.data(), a.data(), dt_bias.data(), ssm_a.data(), beta.data(), g.data());
        dn::step(shape, S.data(), c.data(), c.data() + shape.qk_width(),
                 c.data() + 2 * shape.qk_width(), g.data(), beta.data(), o.data());
        dn::gated_norm(shape, 1, o.data(), z.data(), norm.data(), eps, y.data());
        if (norm_out) {
            // The reader's norm from what the step left: each head's factor from its groups'
            // sums, times o · w · silu(z) (or its rounding).
            for (uint32_t i = ss_off; i < n_act; ++i)
                ASSERT_TRUE(std::isfinite(out[i])) << "token " << t << " sum " << i - ss_off;
            std::vector<float> f(hv);
            for (uint32_t h = 0; h < hv; ++h) {
                float ss = 0.f;
                for (uint32_t g = 0; g < groups; ++g) ss += out[ss_off + h * groups + g];
                f[h] = 1.f / std::sqrt(ss / (float)dv + eps);
            }
            if (round_y) {
                for (uint32_t e = 0; e < inner / 16; ++e) {
                    test::RoundedBlock b;
                    test::read_rounded_block(out, y_off, inner, e,
                                             fmt::format("token {} block {}", t, e), b);
                    if (::testing::Test::HasFatalFailure()) return;
                    const float fh = f[16 * e / dv];
                    for (uint32_t j = 0; j < 16; ++j) {
                        const float want = y[16 * e + j];
                        ASSERT_NEAR(b.q[j] * b.d * fh, want,
                                    0.5f * b.d * fh + 2e-4 * (1 + std::fabs(want)))
                            << "token " << t << " y[" << 16 * e + j << "]";
                    }
                }
                continue;
            }
            for (uint32_t h = 0; h < hv; ++h)
                for (uint32_t j = 0; j < dv; ++j) out[y_off + h * dv + j] *= f[h];
        }
        for (uint32_t i = 0; i < inner; ++i) {
            ASSERT_TRUE(std::isfinite(out[y_off + i])) << "token " << t << " y[" << i << "]";
            ASSERT_NEAR(out[y_off + i], y[i], 2e-4 * (1 + std::fabs(y[i])))
                << "token " << t << " y[" << i << "]";
        }
    }
    // The state itself, after all tokens; the other slots as they were.
    auto Sd = test::from_device<float>(dev, state, slots * state_n);
    for (size_t i = 0; i < S.size(); ++i)
        ASSERT_NEAR(Sd[slot * state_n + i], S[i], 2e-4 * (1 + std::fabs(S[i]))) << "S[" << i << "]";
    auto Rd = test::from_device<uint32_t>(dev, ring, slots * ring_n);
    for (size_t o = 0; o < slots; ++o) {
        if (o == slot) continue;
        for (size_t i = 0; i < state_n; ++i) {
            uint32_t w;
            std::memcpy(&w, &Sd[o * state_n + i], 4);
            ASSERT_EQ(w, test::kPoison) << "slot " << o << " state " << i;
        }
        for (size_t i = 0; i < ring_n; ++i)
            ASSERT_EQ(Rd[o * ring_n + i], test::kPoison) << "slot " << o << " ring " << i;
    }
}

TEST(VulkanDeltaNet, StepMatchesCpuWithMoreValueHeads) {
    for (bool sg : {true, false}) run_case(2, 4, 64, 32, 6, 0, sg);
}
TEST(VulkanDeltaNet, StepMatchesCpuEqualHeadsSmallKey) {
    for (bool sg : {true, false}) run_case(3, 3, 16, 64, 5, 0, sg);
}
// Value columns split over workgroups (the last of a head applies the gated norm), with d_k
// split over several threads a column; 9B-sized heads with H_v = 2 H_k.
TEST(VulkanDeltaNet, StepMatchesCpuWithColumnGroups) {
    for (bool sg : {true, false}) {
        run_case(2, 4, 64, 32, 6, 8, sg);
        run_case(2, 4, 128, 128, 4, 32, sg);
        run_case(3, 3, 16, 64, 5, 16, sg);
    }
}

// The gated norm left to the reader, with and without column groups (the counter then unused:
// it must stay 0).
TEST(VulkanDeltaNet, StepLeavesTheGatedNormToItsReader) {
    for (bool sg : {true, false}) {
        run_case(2, 4, 64, 32, 6, 8, sg, true);
        run_case(2, 4, 128, 128, 4, 32, sg, true);
        run_case(3, 3, 16, 64, 5, 0, sg, true);
        run_case(2, 4, 64, 64, 6, 32, sg, true);
        run_case(2, 4, 64, 64, 6, 0, sg, true);
        run_case(2, 4, 64, 64, 6, 16, sg, true);
    }
}

// ... and y rounded to bytes by the step, in column groups of 16 and more (blocks that start
// inside a head and groups of one block each).
TEST(VulkanDeltaNet, StepRoundsItsOutputForItsReader) {
    for (bool sg : {true, false}) {
        run_case(2, 4, 128, 128, 4, 32, sg, true, true);
        run_case(3, 3, 16, 64, 5, 0, sg, true, true);
        run_case(2, 4, 64, 64, 6, 16, sg, true, true);
        run_case(2, 4, 64, 32, 6, 0, sg, true, true);
    }
}

// A batch's row: ring and state in a slot of pools shared with other sessions, found through the
// row's words, with and without column groups and the norm left to the reader.
TEST(VulkanDeltaNet, StepFindsItsStateInThePools) {
    for (bool sg : {true, false}) {
        run_case(2, 4, 64, 32, 6, 0, sg, false, false, true);
        run_case(2, 4, 128, 128, 4, 32, sg, false, false, true);
        run_case(2, 4, 64, 64, 6, 16, sg, true, true, true);
    }
}

// The rows of a batch in one dispatch (DeltaNetStep::rows): row r at its own position, its words
// and counters a stride apart, its ring and state in slot slot_of[r] of pools with one slot
// more (poisoned, never touched), its activations r rows on. Each row must follow its own CPU
// reference, and every counter must be back at 0 after each step.
void run_rows(uint32_t hk, uint32_t hv, uint32_t dk, uint32_t dv, uint32_t columns) {
    VK_TEST_DEVICE();
    test::Scoped cols(K.tuning.deltanet_columns, columns);
    const std::vector<uint32_t> slot_of = {2, 0, 3};
    const uint32_t rows = (uint32_t)slot_of.size(), slots = rows + 1, spare = 1;
    const uint32_t tok_row = 16, counter_row = hv + 3, KC = 4;
    const float eps = 1e-6f;
    dn::Shape shape{hk, hv, dk, dv};
    const uint32_t conv_dim = (uint32_t)shape.conv_dim(), inner = hv * dv;
    std::mt19937 rng(hk * 1000 + hv * 100 + dk + dv + columns);

    std::vector<float> conv_w = randn((size_t)conv_dim * KC, rng, 0.5f);
    std::vector<float> dt_bias = randn(hv, rng), ssm_a(hv), norm = randn(dv, rng, 0.3f);
    for (float& a : ssm_a) a = -std::exp(std::uniform_real_distribution<float>(-2.f, 1.f)(rng));
    for (float& w : norm) w += 1.f;
    std::vector<float> params = conv_w;
    const uint32_t dt_off = conv_dim * KC, a_off_p = dt_off + hv, norm_off = a_off_p + hv;
    params.insert(params.end(), dt_bias.begin(), dt_bias.end());
    params.insert(params.end(), ssm_a.begin(), ssm_a.end());
    params.insert(params.end(), norm.begin(), norm.end());
    Buffer pb = test::to_device(dev, params);

    // act: qkv rows | z rows | beta rows | alpha rows | y rows.
    const uint32_t z_off = rows * conv_dim, b_off = z_off + rows * inner, a_off = b_off + rows * hv,
                   y_off = a_off + rows * hv, n_act = y_off + rows * inner;
    Buffer act = dev.create_buffer(n_act * 4, MemoryKind::device);
    const size_t ring_n = (size_t)KC * conv_dim, state_n = (size_t)hv * dk * dv;
    Buffer ring = test::poisoned(dev, slots * ring_n), state = test::poisoned(dev, slots * state_n);
    for (uint32_t r = 0; r < rows; ++r) {
        dev.fill(ring, slot_of[r] * ring_n * 4, ring_n * 4, 0);
        dev.fill(state, slot_of[r] * state_n * 4, state_n * 4, 0);
    }
    Buffer tok = dev.create_buffer(rows * tok_row * 4, MemoryKind::host);
    auto* words = static_cast<uint32_t*>(tok.mapped());
    for (uint32_t r = 0; r < rows; ++r) {
        words[r * tok_row + 8] = (uint32_t)(slot_of[r] * state_n);
        words[r * tok_row + 9] = (uint32_t)(slot_of[r] * ring_n);
    }
    Buffer counter = dev.create_buffer(rows * counter_row * 4, MemoryKind::device);
    dev.fill(counter, 0, rows * counter_row * 4, 0);

    std::vector<std::vector<float>> S(rows, std::vector<float>(state_n, 0.f));
    std::vector<std::vector<float>> conv_state(rows,
                                               std::vector<float>((size_t)(KC - 1) * conv_dim));
    Kernels::DeltaNetStep args{hk,    hv,    dk, dv,     KC,      0,        z_off, b_off,
                               a_off, y_off, 0,  dt_off, a_off_p, norm_off, eps};
    args.state_in_tok = true;
    args.rows = rows;
    args.tok_row = tok_row;
    args.counter_row = counter_row;
    for (int t = 0; t < 5; ++t) {
        std::vector<float> in(n_act);
        for (float& x : in) std::memcpy(&x, &test::kPoison, 4);
        std::vector<std::vector<float>> qkv(rows), z(rows), b(rows), a(rows);
        for (uint32_t r = 0; r < rows; ++r) {
            qkv[r] = randn(conv_dim, rng), z[r] = randn(inner, rng), b[r] = randn(hv, rng);
            a[r] = randn(hv, rng, 2.f);
            std::copy(qkv[r].begin(), qkv[r].end(), in.begin() + r * conv_dim);
            std::copy(z[r].begin(), z[r].end(), in.begin() + z_off + r * inner);
            std::copy(b[r].begin(), b[r].end(), in.begin() + b_off + r * hv);
            std::copy(a[r].begin(), a[r].end(), in.begin() + a_off + r * hv);
            words[r * tok_row] = (uint32_t)(7 * r + t);  // each row at a position of its own
        }
        dev.upload(act, 0, in.data(), n_act * 4);
        test::run(dev, [&](CommandList& cl) {
            K.deltanet_step(cl, args, view(act), view(pb), view(ring), view(state), view(tok),
                            view(counter));
        });
        for (uint32_t c : test::from_device<uint32_t>(dev, counter, rows * counter_row))
            ASSERT_EQ(c, 0u) << "token " << t << ": a counter was not reset";
        auto out = test::from_device<float>(dev, act, n_act);
        for (uint32_t r = 0; r < rows; ++r) {
            std::vector<float> c(conv_dim), beta(hv), g(hv), o(inner), y(inner);
            dn::conv_silu(1, conv_dim, KC, qkv[r].data(), conv_w.data(), conv_state[r].data(),
                          c.data());
            dn::normalize_qk(shape, 1, c.data());
            dn::gates(1, hv, b[r].data(), a[r].data(), dt_bias.data(), ssm_a.data(), beta.data(),
                      g.data());
            dn::step(shape, S[r].data(), c.data(), c.data() + shape.qk_width(),
                     c.data() + 2 * shape.qk_width(), g.data(), beta.data(), o.data());
            dn::gated_norm(shape, 1, o.data(), z[r].data(), norm.data(), eps, y.data());
            for (uint32_t i = 0; i < inner; ++i)
                ASSERT_NEAR(out[y_off + r * inner + i], y[i], 2e-4 * (1 + std::fabs(y[i])))
                    << "token " << t << " row " << r << " y[" << i << "]";
        }
    }
    auto Sd = test::from_device<float>(dev, state, slots * state_n);
    for (uint32_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < state_n; ++i)
            ASSERT_NEAR(Sd[slot_of[r] * state_n + i], S[r][i], 2e-4 * (1 + std::fabs(S[r][i])))
                << "row " << r << " S[" << i << "]";
    for (size_t i = 0; i < state_n; ++i) {
        uint32_t w;
        std::memcpy(&w, &Sd[spare * state_n + i], 4);
        ASSERT_EQ(w, test::kPoison) << "the spare slot's state " << i;
    }
    auto Rd = test::from_device<uint32_t>(dev, ring, slots * ring_n);
    for (size_t i = 0; i < ring_n; ++i)
        ASSERT_EQ(Rd[spare * ring_n + i], test::kPoison) << "the spare slot's ring " << i;
}

TEST(VulkanDeltaNet, StepOfEveryBatchRowInOneDispatch) {
    run_rows(2, 4, 64, 32, 0);
    run_rows(2, 4, 128, 128, 32);
}

TEST(VulkanDeltaNet, StepOfManyRowsNeedsThePoolsAndItsOwnNorm) {
    VK_TEST_DEVICE();
    Kernels::DeltaNetStep args{2, 4, 64, 32, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1e-6f};
    args.rows = 2;
    Buffer b = dev.create_buffer(1 << 16, MemoryKind::device);
    auto record = [&] {
        test::run(dev, [&](CommandList& cl) {
            K.deltanet_step(cl, args, view(b), view(b), view(b), view(b), view(b), view(b));
        });
    };
    EXPECT_THROW(record(), Error) << "rows without state_in_tok";
    args.state_in_tok = true;
    args.ss_off = 0;
    EXPECT_THROW(record(), Error) << "rows with the norm left to the reader";
}

TEST(VulkanDeltaNet, DeclinesValueHeadThatIsNotAPowerOfTwo) {
    VK_TEST_DEVICE();
    auto d = Kernels::deltanet_step_supported(dev.features(), 128, 96, 4);
    ASSERT_TRUE(d.has_value());
    EXPECT_NE(d->reason.find("96"), std::string::npos);
    EXPECT_FALSE(Kernels::deltanet_step_supported(dev.features(), 128, 128, 4).has_value());
}

}  // namespace
}  // namespace dl::vk
