// The decode token command with its fusions (the RMSNorms as GEMV epilogues, the FFN gate and up
// GEMVs with the SwiGLU as one dispatch) against the same command with separate stages: the same
// logits up to F32 rounding, token after token, and three stages fewer per layer in the 9B's
// layer pattern. The norms applied by the GEMVs that read them (Fusions::norm_in_readers)
// against the norm epilogues, over x in bytes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "model/tiny_model.h"
#include "vk_test.h"
#include "vulkan/driver.h"

namespace dl::vk {
namespace {

using dl::test::TinySpec;

DriverOptions options(bool fused, Kernels::GemvX x = Kernels::GemvX::automatic, bool norm_in = true,
                      bool merge_in = true, bool pre_round = true, bool gated_in = true,
                      bool round_h = true, bool gated_rounded = true, bool attn_rounded = true) {
    DriverOptions o;
    o.device = test::device_options();
    o.plan.n_ctx = 64;
    o.plan.window = 0;  // every token goes through the token command
    o.fusions.norm_epilogue = fused;
    o.tuning.gemv_x = x;
    o.fusions.norm_in_readers = norm_in;
    o.fusions.merged_input_projections = merge_in;
    o.fusions.ffn_q8_out = pre_round;
    o.fusions.gated_norm_in_output = gated_in;
    o.fusions.residual_q8_out = round_h;
    o.fusions.deltanet_q8_out = gated_rounded;
    o.fusions.attention_q8_out = attn_rounded;
    o.fusions.residual_q8_out_min = 0;  // the tiny models' h
    return o;
}

// The features the tiled GEMV needs (Kernels::gemv_tile_supported), stated here apart from it.
bool tiled_gemv_here(const Features& f) {
    return f.integer_dot && f.subgroup_arithmetic && f.subgroup_shuffle && f.min_subgroup_size >= 4;
}

uint32_t recurrent_layers(const Model& m) {
    uint32_t n = 0;
    for (int64_t il = 0; il < m.hp.n_layer; ++il) n += m.hp.is_recurrent(il) ? 1 : 0;
    return n;
}

// Decodes toks on two drivers' sessions side by side: a's logits finite, at most
// tol · (1 + max |logit of b|) from b's, and (same_greedy) the same greedy token. Two paths that
// round x to bytes from differently rounded floats may break a random tiny model's near ties
// either way, so they pass same_greedy = false: where b's best logit leads its runner-up by more
// than twice the bound, the bound itself already fixes a's greedy token.
void expect_same_decode(ResidentDriver& a, SessionState& sa, ResidentDriver& b, SessionState& sb,
                        const std::vector<int32_t>& toks, double tol, const std::string& what,
                        bool same_greedy = true) {
    std::vector<float> la, lb;
    for (size_t i = 0; i < toks.size(); ++i) {
        a.decode(sa, toks[i], la);
        b.decode(sb, toks[i], lb);
        ASSERT_EQ(la.size(), lb.size());
        double worst = 0, scale = 0;
        for (size_t j = 0; j < la.size(); ++j) {
            ASSERT_TRUE(std::isfinite(la[j])) << what << " token " << i << " logit " << j;
            worst = std::max(worst, std::fabs((double)la[j] - lb[j]));
            scale = std::max(scale, std::fabs((double)lb[j]));
        }
        EXPECT_LE(worst, tol * (1 + scale)) << what << " token " << i;
        if (same_greedy) {
            EXPECT_EQ(std::max_element(la.begin(), la.end()) - la.begin(),
                      std::max_element(lb.begin(), lb.end()) - lb.begin())
                << what << " token " << i;
        }
    }
}

void check_fused_equals_unfused(const TinySpec& spec, double tol) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(spec);
    auto fused = ResidentDriver::create(model, options(true));
    auto split = ResidentDriver::create(model, options(false));
    ASSERT_TRUE(fused.ok()) << fused.reason();
    ASSERT_TRUE(split.ok()) << split.reason();
    auto sf = (*fused)->new_session(32), ss = (*split)->new_session(32);
    expect_same_decode(**fused, *sf, **split, *ss, {1, 7, 42, 3, 3, 79, 0, 15, 8, 64, 22, 5}, tol,
                       spec.arch);
}

// The same sums in another order (the norm's sum of squares over one workgroup instead of
// rms_norm's): only rounding apart, far below the CPU parity tolerance of 2e-3.
TEST(VulkanDecodeFusion, FusedLogitsEqualSeparateStages) {
    check_fused_equals_unfused(test::parity_spec("qwen35", QType::F32), 2e-5);
    check_fused_equals_unfused(test::parity_spec("llama", QType::F32), 2e-5);
    check_fused_equals_unfused(test::parity_spec("qwen35", QType::Q8_0), 2e-5);
}

// Every rule of Fusions off records the plain chain: per layer a stage for the input projections,
// the mixer, the output projection, its norm, the FFN's gate and up, the SwiGLU, the down
// projection and its norm (8), besides the embedding, the first norm, the head and the choice;
// no GEMV reads or writes an int8 activation of another's. Its logits are the fused command's up
// to F32 rounding.
TEST(VulkanDecodeFusion, NoFusionsRecordsThePlainChain) {
    VK_TEST_DEVICE();
    for (const char* arch : {"qwen35", "llama"}) {
        auto model = dl::test::tiny_model(test::parity_spec(arch, QType::F32));
        DriverOptions plain_options = options(true);
        plain_options.fusions = Fusions::none();
        auto plain = ResidentDriver::create(model, plain_options);
        auto fused = ResidentDriver::create(model, options(true));
        ASSERT_TRUE(plain.ok()) << plain.reason();
        ASSERT_TRUE(fused.ok()) << fused.reason();
        auto sp = (*plain)->new_session(32), sf = (*fused)->new_session(32);
        const auto c = (*plain)->token_command_counts(*sp);
        EXPECT_EQ(c.barriers, 4 + 8 * (uint32_t)model->hp.n_layer) << arch;
        EXPECT_EQ(c.ffn_q8_reads + c.gated_norm_reads + c.deltanet_q8_reads + c.residual_q8_writes +
                      c.attention_q8_reads + c.shared_output_pipeline,
                  0u)
            << arch;
        EXPECT_LT((*fused)->token_command_counts(*sf).barriers, c.barriers) << arch;
        expect_same_decode(**plain, *sp, **fused, *sf, {1, 7, 42, 3, 3, 79, 0, 15}, 2e-5, arch);
    }
}

// Over x in bytes, each norm applied by the GEMVs that read it (every workgroup rounding h · w
// and scaling its rows by the norm's factor) against the norm epilogues (the last workgroup
// writing the normalized h), token after token; the first norm's stage gone. The two round x to
// bytes from differently rounded floats, so a byte that lands near a half may go either way,
// and over tokens that spreads as far as each path's distance from the CPU chain: the tolerance
// is the byte-path parity tests' (VulkanDriver.*DecodeOverBytes). The greedy token is not
// compared: on an H200 the Q4_K model's second token is a near tie that the two paths break
// differently.
TEST(VulkanDecodeFusion, NormsInTheirReadersEqualEpilogues) {
    VK_TEST_DEVICE();
    if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
    for (auto [t, tol] : {std::pair{QType::Q8_0, 2e-2}, std::pair{QType::Q4_K, 3e-2}}) {
        for (const char* arch : {"qwen35", "llama"}) {
            auto model = dl::test::tiny_model(test::parity_spec(arch, t));
            auto nin = ResidentDriver::create(model, options(true, Kernels::GemvX::bytes, true));
            auto epi = ResidentDriver::create(model, options(true, Kernels::GemvX::bytes, false));
            ASSERT_TRUE(nin.ok()) << nin.reason();
            ASSERT_TRUE(epi.ok()) << epi.reason();
            auto sn = (*nin)->new_session(32), se = (*epi)->new_session(32);
            const auto cn = (*nin)->token_command_counts(*sn);
            const auto ce = (*epi)->token_command_counts(*se);
            EXPECT_EQ(cn.barriers + 1, ce.barriers) << arch << " " << qtype_name(t);
            EXPECT_EQ(cn.dispatches + 1, ce.dispatches) << arch << " " << qtype_name(t);
            expect_same_decode(**nin, *sn, **epi, *se, {1, 7, 42, 3, 3, 79, 0, 15}, tol,
                               std::string(arch) + " " + std::string(qtype_name(t)), false);
            if (HasFatalFailure()) return;
        }
    }
}

// Over x in bytes, the residual stream rounded to bytes times the next norm's weights by the
// GEMV that writes it (its blocks' sums of squares beside), against each reader rounding it:
// the same dispatches and stages, the same bytes, but the norm's sum of squares added in
// another order, so over tokens a byte near a half may go either way, as between the norm
// paths above (their tolerance, the greedy token not compared). Where the tiled GEMV runs, the
// writers whose next norm's readers all run on it round h.
TEST(VulkanDecodeFusion, ResidualRoundedByItsWritersEqualsRoundedByItsReaders) {
    VK_TEST_DEVICE();
    if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
    for (auto [t, tol] : {std::pair{QType::Q8_0, 2e-2}, std::pair{QType::Q4_K, 3e-2}}) {
        for (const char* arch : {"qwen35", "qwen3"}) {
            const TinySpec spec = test::parity_spec(arch, t);
            auto model = dl::test::tiny_model(spec);
            const auto bytes = Kernels::GemvX::bytes;
            auto writers =
                ResidentDriver::create(model, options(true, bytes, true, true, true, true, true));
            auto readers =
                ResidentDriver::create(model, options(true, bytes, true, true, true, true, false));
            ASSERT_TRUE(writers.ok()) << writers.reason();
            ASSERT_TRUE(readers.ok()) << readers.reason();
            auto sw = (*writers)->new_session(32), sr = (*readers)->new_session(32);
            const auto cw = (*writers)->token_command_counts(*sw);
            const auto cr = (*readers)->token_command_counts(*sr);
            const std::string what = std::string(arch) + " " + std::string(qtype_name(t));
            EXPECT_EQ(cw.barriers, cr.barriers) << what;
            EXPECT_EQ(cw.dispatches, cr.dispatches) << what;
            EXPECT_EQ(cr.residual_q8_writes, 0u) << what;
            // Q4_K rows are held in tiles.
            if (t == QType::Q4_K && tiled_gemv_here(dev.features()))
                EXPECT_GT(cw.residual_q8_writes, 0u) << what;
            else
                EXPECT_EQ(cw.residual_q8_writes, 0u) << what;
            expect_same_decode(**writers, *sw, **readers, *sr, {1, 7, 42, 3, 3, 79, 0, 15}, tol,
                               what, false);
            if (HasFatalFailure()) return;
        }
    }
}

// Over x in bytes, the FFN activations rounded to bytes by the gate and up pair that writes
// them, for the down projection, against a down projection that rounds them itself: the same
// dispatches and stages, every layer's down projection (plain, or with the norm epilogue where
// the norms are not taken by their readers) reading the rounding, and the same bytes, so the
// logits agree to F32 rounding and the greedy tokens are the same.
TEST(VulkanDecodeFusion, FfnRoundedByThePairEqualsRoundedByTheDownProjection) {
    VK_TEST_DEVICE();
    if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
    for (QType t : {QType::Q8_0, QType::Q4_K}) {
        for (const char* arch : {"qwen35", "qwen3", "llama"}) {
            for (bool norm_in : {true, false}) {
                const TinySpec spec = test::parity_spec(arch, t);
                auto model = dl::test::tiny_model(spec);
                const auto bytes = Kernels::GemvX::bytes;
                // h rounded by its writers or not on both sides (its own test below).
                auto once = ResidentDriver::create(
                    model, options(true, bytes, norm_in, true, true, true, false));
                auto each = ResidentDriver::create(
                    model, options(true, bytes, norm_in, true, false, true, false));
                ASSERT_TRUE(once.ok()) << once.reason();
                ASSERT_TRUE(each.ok()) << each.reason();
                auto so = (*once)->new_session(32), se = (*each)->new_session(32);
                const auto co = (*once)->token_command_counts(*so);
                const auto ce = (*each)->token_command_counts(*se);
                const std::string what = std::string(arch) + " " + std::string(qtype_name(t)) +
                                         (norm_in ? " norm in" : " norm epilogue");
                EXPECT_EQ(co.barriers, ce.barriers) << what;
                EXPECT_EQ(co.dispatches, ce.dispatches) << what;
                EXPECT_EQ(ce.ffn_q8_reads, 0u) << what;
                EXPECT_EQ(co.ffn_q8_reads, (uint32_t)spec.n_layer) << what;
                expect_same_decode(**once, *so, **each, *se, {1, 7, 42, 3, 3, 79, 0, 15}, 1e-5,
                                   what);
                if (HasFatalFailure()) return;
            }
        }
    }
}

// Over x in bytes with the norms in their readers, each DeltaNet layer's gated RMSNorm applied by
// its output projection (the step leaving o · w · silu(z) and its column groups' sums of
// squares) against the step applying it: the same dispatches and stages, and every DeltaNet
// layer's output projection taking the norm. The output projection rounds the same bytes either
// way (the rounding is blind to the head's factor), but its block scales are the same numbers
// computed in another order, so h differs in its last bits, and a later GEMV's rounding of it
// may land a byte on either side of a half: on lavapipe the Q8_0 and Q4_K models' logits agree
// to 1e-6 over these tokens, the Q4_K_M mix's from its second token to 0.026 (set off in the
// first layer: with only that layer's norm moved the logits differ as much). The tolerance is the
// byte-path tests' for two roundings of x.
TEST(VulkanDecodeFusion, GatedNormInTheOutputProjectionEqualsTheStepsOwn) {
    VK_TEST_DEVICE();
    if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
    for (auto [t, q4_k_m, tol] :
         {std::tuple{QType::Q8_0, false, 2e-2}, std::tuple{QType::Q4_K, false, 3e-2},
          std::tuple{QType::Q4_K, true, 3e-2}}) {
        TinySpec spec = test::parity_spec("qwen35", t);
        spec.q4_k_m = q4_k_m;
        auto model = dl::test::tiny_model(spec);
        const auto bytes = Kernels::GemvX::bytes;
        auto gated = ResidentDriver::create(model, options(true, bytes, true, true, true, true));
        auto step = ResidentDriver::create(model, options(true, bytes, true, true, true, false));
        ASSERT_TRUE(gated.ok()) << gated.reason();
        ASSERT_TRUE(step.ok()) << step.reason();
        auto sg = (*gated)->new_session(32), ss = (*step)->new_session(32);
        const auto cg = (*gated)->token_command_counts(*sg);
        const auto cs = (*step)->token_command_counts(*ss);
        const std::string what = std::string(qtype_name(t)) + (q4_k_m ? " Q4_K_M mix" : "");
        EXPECT_EQ(cg.barriers, cs.barriers) << what;
        EXPECT_EQ(cg.dispatches, cs.dispatches) << what;
        EXPECT_EQ(cs.gated_norm_reads, 0u) << what;
        EXPECT_GT(recurrent_layers(*model), 0u) << what;
        EXPECT_EQ(cg.gated_norm_reads, recurrent_layers(*model)) << what;
        expect_same_decode(**gated, *sg, **step, *ss, {1, 7, 42, 3, 3, 79, 0, 15}, tol, what,
                           false);
        if (HasFatalFailure()) return;
    }
}

// With the gated norm in the output projection, the DeltaNet step's output rounded to bytes by
// the step (DeltaNetStep::round_y) where that projection runs on the tiled GEMV, against the
// projection's workgroups rounding the floats: the same dispatches and stages, every DeltaNet
// layer's projection over the step's rounding, and the same bytes; the block scales are taken
// times the heads' factors in another order (d · f and d · sum · f, against d · f · sum), so h
// differs in its last bits, and the tolerance is the one above, the greedy token not compared.
TEST(VulkanDecodeFusion, GatedOutputRoundedByTheStepEqualsRoundedByTheProjection) {
    VK_TEST_DEVICE();
    if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
    for (auto [t, q4_k_m] : {std::pair{QType::Q4_K, false}, std::pair{QType::Q4_K, true},
                             std::pair{QType::Q8_0, false}}) {
        TinySpec spec = test::parity_spec("qwen35", t);
        spec.q4_k_m = q4_k_m;
        auto model = dl::test::tiny_model(spec);
        const auto bytes = Kernels::GemvX::bytes;
        auto step =
            ResidentDriver::create(model, options(true, bytes, true, true, true, true, true, true));
        auto proj = ResidentDriver::create(
            model, options(true, bytes, true, true, true, true, true, false));
        ASSERT_TRUE(step.ok()) << step.reason();
        ASSERT_TRUE(proj.ok()) << proj.reason();
        auto ss = (*step)->new_session(32), sp = (*proj)->new_session(32);
        const auto cs = (*step)->token_command_counts(*ss);
        const auto cp = (*proj)->token_command_counts(*sp);
        const std::string what = std::string(qtype_name(t)) + (q4_k_m ? " Q4_K_M mix" : "");
        EXPECT_EQ(cs.barriers, cp.barriers) << what;
        EXPECT_EQ(cs.dispatches, cp.dispatches) << what;
        EXPECT_EQ(cs.gated_norm_reads, cp.gated_norm_reads) << what;
        EXPECT_EQ(cp.deltanet_q8_reads, 0u) << what;
        // Q4_K output projections on the tiled GEMV.
        const bool tiled = t == QType::Q4_K && tiled_gemv_here(dev.features());
        EXPECT_EQ(cs.deltanet_q8_reads, tiled ? recurrent_layers(*model) : 0u) << what;
        expect_same_decode(**step, *ss, **proj, *sp, {1, 7, 42, 3, 3, 79, 0, 15}, 3e-2, what,
                           false);
        if (HasFatalFailure()) return;
    }
}

// The decode attention's output rounded to bytes by the attention (Attention::round_off) where
// its output projection runs on the tiled GEMV, against the projection's workgroups rounding the
// floats: the same dispatches and stages, every attention layer's projection over the
// attention's rounding, and the same bytes and scales (round16 and the lanes' rounding are the
// same arithmetic), so the logits agree to F32 rounding and the greedy tokens are the same.
TEST(VulkanDecodeFusion, AttentionOutputRoundedByTheAttentionEqualsRoundedByTheProjection) {
    VK_TEST_DEVICE();
    if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
    for (const char* arch : {"qwen35", "qwen3", "llama"}) {
        for (auto [t, q4_k_m] : {std::pair{QType::Q4_K, false}, std::pair{QType::Q4_K, true},
                                 std::pair{QType::Q8_0, false}}) {
            TinySpec spec = test::parity_spec(arch, t);
            spec.q4_k_m = q4_k_m;
            auto model = dl::test::tiny_model(spec);
            const auto bytes = Kernels::GemvX::bytes;
            auto att = ResidentDriver::create(
                model, options(true, bytes, true, true, true, true, true, true, true));
            auto proj = ResidentDriver::create(
                model, options(true, bytes, true, true, true, true, true, true, false));
            ASSERT_TRUE(att.ok()) << att.reason();
            ASSERT_TRUE(proj.ok()) << proj.reason();
            auto sa = (*att)->new_session(32), sp = (*proj)->new_session(32);
            const auto ca = (*att)->token_command_counts(*sa);
            const auto cp = (*proj)->token_command_counts(*sp);
            const std::string what =
                fmt::format("{} {}{}", arch, qtype_name(t), q4_k_m ? " Q4_K_M mix" : "");
            EXPECT_EQ(ca.barriers, cp.barriers) << what;
            EXPECT_EQ(ca.dispatches, cp.dispatches) << what;
            EXPECT_EQ(cp.attention_q8_reads, 0u) << what;
            // Q4_K output projections on the tiled GEMV, heads of 64.
            const bool tiled = t == QType::Q4_K && tiled_gemv_here(dev.features());
            const uint32_t attention_layers =
                (uint32_t)model->hp.n_layer - recurrent_layers(*model);
            EXPECT_GT(attention_layers, 0u) << what;
            EXPECT_EQ(ca.attention_q8_reads, tiled ? attention_layers : 0u) << what;
            expect_same_decode(**att, *sa, **proj, *sp, {1, 7, 42, 3, 3, 79, 0, 15}, 1e-6, what);
            if (HasFatalFailure()) return;
        }
    }
}

// A hybrid model's attention layers' output projections in the DeltaNet layers' form (the tiled
// GEMV over the step's rounding, DeltaNetStep::round_y, with no gated norm factor: one pipeline
// for both kinds of layer) against a form of their own: the same dispatches and stages, every
// attention layer's projection in the DeltaNet form where its weights' type and row length are
// the DeltaNet projections' (the tiny models': 4 heads of 64 and 4 value heads of 64, Q4_K), and
// the same bytes and scales, so the logits agree to F32 rounding. A factor taken from the sums of
// squares the DeltaNet step leaves (none were written for the attention) would not.
TEST(VulkanDecodeFusion, AttentionOutputInTheDeltaNetFormEqualsItsOwnForm) {
    VK_TEST_DEVICE();
    if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
    for (bool q4_k_m : {false, true}) {
        TinySpec spec = test::parity_spec("qwen35", QType::Q4_K);
        spec.q4_k_m = q4_k_m;
        spec.n_layer = 8;  // two attention layers, each after DeltaNet layers
        auto model = dl::test::tiny_model(spec);
        const auto bytes = Kernels::GemvX::bytes;
        DriverOptions shared = options(true, bytes), own = options(true, bytes);
        shared.fusions.shared_output_pipeline = true;
        own.fusions.shared_output_pipeline = false;
        auto a = ResidentDriver::create(model, shared), b = ResidentDriver::create(model, own);
        ASSERT_TRUE(a.ok()) << a.reason();
        ASSERT_TRUE(b.ok()) << b.reason();
        auto sa = (*a)->new_session(32), sb = (*b)->new_session(32);
        const auto ca = (*a)->token_command_counts(*sa);
        const auto cb = (*b)->token_command_counts(*sb);
        const std::string what = q4_k_m ? "Q4_K_M mix" : "Q4_K";
        EXPECT_EQ(ca.barriers, cb.barriers) << what;
        EXPECT_EQ(ca.dispatches, cb.dispatches) << what;
        EXPECT_EQ(cb.shared_output_pipeline, 0u) << what;
        const uint32_t attention_layers = (uint32_t)model->hp.n_layer - recurrent_layers(*model);
        EXPECT_EQ(attention_layers, 2u) << what;
        EXPECT_EQ(ca.shared_output_pipeline,
                  tiled_gemv_here(dev.features()) ? attention_layers : 0u)
            << what;
        EXPECT_EQ(ca.attention_q8_reads, cb.attention_q8_reads) << what;
        expect_same_decode(**a, *sa, **b, *sb, {1, 7, 42, 3, 3, 79, 0, 15}, 1e-6, what);
        if (HasFatalFailure()) return;
    }
}

// Each run of a mixer's input projections that lies back to back read in one GEMV, against a
// GEMV each: fewer dispatches in the same stages, and every row computed as before (the same
// slices, lanes and sums; x rounded the same way by every workgroup), so the logits agree to F32
// rounding. Over F32 x and x in bytes, on the Q4_K_M mix, where the Q6_K qkv and attn_v of every
// other layer break the runs.
TEST(VulkanDecodeFusion, InputProjectionsInOneGemvEqualOneEach) {
    VK_TEST_DEVICE();
    for (auto x : {Kernels::GemvX::global, Kernels::GemvX::bytes}) {
        if (x == Kernels::GemvX::bytes && !dev.features().integer_dot) continue;
        for (const char* arch : {"qwen35", "qwen3"}) {
            TinySpec s = test::parity_spec(arch, QType::Q4_K);
            s.q4_k_m = true;
            auto model = dl::test::tiny_model(s);
            auto one = ResidentDriver::create(model, options(true, x, true, true));
            auto each = ResidentDriver::create(model, options(true, x, true, false));
            ASSERT_TRUE(one.ok()) << one.reason();
            ASSERT_TRUE(each.ok()) << each.reason();
            auto so = (*one)->new_session(32), se = (*each)->new_session(32);
            const auto co = (*one)->token_command_counts(*so);
            const auto ce = (*each)->token_command_counts(*se);
            const std::string what =
                std::string(arch) + (x == Kernels::GemvX::bytes ? " bytes" : " F32");
            EXPECT_EQ(co.barriers, ce.barriers) << what;
            EXPECT_LT(co.dispatches, ce.dispatches) << what;
            expect_same_decode(**one, *so, **each, *se, {1, 7, 42, 3, 3, 79, 0, 15}, 1e-6, what);
            if (HasFatalFailure()) return;
        }
    }
}

// The 9B's layer pattern (32 layers, every fourth attention: 24 DeltaNet + 8 attention): the
// fusion takes out the ffn_norm stage of every layer and every attn_norm but the first, with the
// output norm (2 stages and 2 dispatches per layer), and the SwiGLU stage (1 stage; the gate, up
// and swiglu dispatches become one).
TEST(VulkanDecodeFusion, ThreeStagesFewerPerLayer) {
    VK_TEST_DEVICE();
    TinySpec s = test::parity_spec("qwen35", QType::F32);
    s.n_layer = 32;
    s.interval = 4;
    auto model = dl::test::tiny_model(s);
    auto fused = ResidentDriver::create(model, options(true));
    auto split = ResidentDriver::create(model, options(false));
    ASSERT_TRUE(fused.ok()) << fused.reason();
    ASSERT_TRUE(split.ok()) << split.reason();
    auto sf = (*fused)->new_session(16), ss = (*split)->new_session(16);
    const auto f = (*fused)->token_command_counts(*sf), u = (*split)->token_command_counts(*ss);
    std::printf(
        "[ stages   ] 32 layers (24 DeltaNet + 8 attention): %u barriers, %u dispatches "
        "a token; separate norms: %u barriers, %u dispatches\n",
        f.barriers, f.dispatches, u.barriers, u.dispatches);
    EXPECT_EQ(u.barriers - f.barriers, 3u * 32u);
    EXPECT_EQ(u.dispatches - f.dispatches, 4u * 32u);
    // Per layer the fused command keeps: gemv | deltanet or attention | gemv+norm | gate/up gemv
    // with the swiglu | down gemv+norm; plus embed, the first norm and the head.
    EXPECT_LE(f.barriers, 32u * 5u + 3u + 8u * 2u);  // attention's own two inner barriers
}

// A mixture-of-experts router's choice in its GEMV's last workgroup, beside the shared expert's
// gate and up as one GEMV (Fusions::router_top_k), against the router GEMV and a route stage;
// then the shared expert's gated output in the experts' weighted sum and the next norm left to
// its readers (Fusions::experts_sum_epilogue): a stage fewer a layer for each, and the same
// logits up to the rounding of sums taken in another order, token after token (qwen35moe with
// its shared expert, qwen3moe, and the Q4_K mix, whose router stays F32 as llama-quantize
// leaves it).
TEST(VulkanDecodeFusion, MixtureOfExpertsStages) {
    VK_TEST_DEVICE();
    const std::pair<const char*, QType> cases[] = {
        {"qwen35moe", QType::F32}, {"qwen3moe", QType::F32}, {"qwen35moe", QType::Q4_K}};
    const std::vector<int32_t> toks = {1, 7, 42, 3, 3, 79, 0, 15, 8, 64, 22, 5};
    for (const auto& [arch, type] : cases) {
        SCOPED_TRACE(::testing::Message() << arch << " " << qtype_name(type));
        auto model = dl::test::tiny_model(test::moe_spec(arch, type));
        const int64_t layers = model->hp.n_layer;
        const bool shared = model->hp.n_ff_shexp > 0;
        // Over x in bytes on the tiled GEMV the next layer's input GEMVs norm h themselves.
        const bool readers_norm = type == QType::Q4_K && tiled_gemv_here(dev.features());
        const Kernels::GemvX x = readers_norm ? Kernels::GemvX::bytes : Kernels::GemvX::automatic;
        DriverOptions all = options(true, x), router = options(true, x), none = options(true, x);
        router.fusions.experts_sum_epilogue = false;
        none.fusions.router_top_k = none.fusions.experts_sum_epilogue = false;
        none.plan.n_ctx = 128;  // two sessions' blocks
        auto d_all = ResidentDriver::create(model, all);
        auto d_router = ResidentDriver::create(model, router);
        auto d_none = ResidentDriver::create(model, none);
        ASSERT_TRUE(d_all.ok() && d_router.ok() && d_none.ok()) << d_all.reason();
        auto s_all = (*d_all)->new_session(32), s_router = (*d_router)->new_session(32),
             s_none = (*d_none)->new_session(32);
        const TokenPlan p_all = (*d_all)->token_plan(*s_all, false, false);
        const TokenPlan p_router = (*d_router)->token_plan(*s_router, false, false);
        const TokenPlan p_none = (*d_none)->token_plan(*s_none, false, false);
        auto count = [](const TokenPlan& p, const std::string& role) {
            return std::count_if(p.stages.begin(), p.stages.end(),
                                 [&](const TokenStage& st) { return st.role == role; });
        };
        EXPECT_EQ(count(p_router, "router"), layers) << p_router.describe();
        EXPECT_EQ(count(p_router, "route"), 0) << p_router.describe();
        EXPECT_EQ(count(p_none, "route"), layers) << p_none.describe();
        EXPECT_EQ(p_router.stages.size() + layers, p_none.stages.size());
        // The shared expert's stage (which also norms) goes; where the readers norm, so does the
        // norm of a model without one.
        EXPECT_EQ(count(p_router, "shared expert"), shared ? layers : 0);
        EXPECT_EQ(count(p_all, "shared expert"), 0) << p_all.describe();
        EXPECT_EQ(p_all.stages.size() + (readers_norm ? layers : 0), p_router.stages.size())
            << p_all.describe();
        // Over x in bytes the forms round x in other kernels (the shared expert's pair GEMV,
        // the norms in their readers), a byte near a half either way: the byte paths' tolerance
        // (NormsInTheirReadersEqualEpilogues), greedy tokens not compared.
        const double tol = readers_norm ? 3e-2 : 2e-5;
        expect_same_decode(**d_router, *s_router, **d_none, *s_none, toks, tol, arch,
                           !readers_norm);
        auto s_none2 = (*d_none)->new_session(32);
        expect_same_decode(**d_all, *s_all, **d_none, *s_none2, toks, tol, arch, !readers_norm);
    }
}

// The token command's plan as a value (token_plan.h): the plain chain's stages in the order of
// the model's forward pass, and each rule of Fusions, switched off alone, changing the plan of a
// model where it applies (the Q4_K mix over x as int8, whose tiled GEMVs take every rule here)
// and leaving every other rule's count as it was.
TEST(VulkanTokenPlan, ThePlainChainInTheForwardPassOrder) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("llama", QType::F32));
    DriverOptions o = options(true);
    o.fusions = Fusions::none();
    auto d = ResidentDriver::create(model, o);
    ASSERT_TRUE(d.ok()) << d.reason();
    auto s = (*d)->new_session(32);
    const TokenPlan p = (*d)->token_plan(*s, false, false);
    std::vector<std::string> roles;
    for (const TokenStage& st : p.stages) roles.push_back(st.role);
    std::vector<std::string> want = {"embed", "norm"};
    for (int64_t il = 0; il < model->hp.n_layer; ++il)
        for (const char* r : {"gemv in", "attention", "gemv out", "norm", "gemv ffn", "swiglu",
                              "gemv down", "norm"})
            want.push_back(r);
    want.push_back("head");
    want.push_back("sample");
    EXPECT_EQ(roles, want) << p.describe();
    EXPECT_TRUE(p.stages.back().to_host);
    // The host's logits: the head's stage is the last and goes to the host; nothing is sampled.
    const TokenPlan h = (*d)->token_plan(*s, true, false);
    ASSERT_EQ(h.stages.size(), p.stages.size() - 1);
    EXPECT_EQ(h.stages.back().role, "head");
    EXPECT_TRUE(h.stages.back().to_host);
    EXPECT_EQ(h.stages.back().dispatches.at(0).y, TokenOutput::host_logits);
}

TEST(VulkanTokenPlan, EachFusionOffChangesThePlan) {
    VK_TEST_DEVICE();
    if (!tiled_gemv_here(dev.features())) GTEST_SKIP() << "no tiled GEMV on this device";
    auto model = dl::test::tiny_model(test::parity_spec("qwen35", QType::Q4_K));
    auto plan_with = [&](const Fusions& f) {
        DriverOptions o = options(true, Kernels::GemvX::bytes);
        o.fusions = f;
        o.fusions.residual_q8_out_min = 0;  // the tiny model's h
        auto d = ResidentDriver::create(model, o);
        EXPECT_TRUE(d.ok()) << d.reason();
        auto s = (*d)->new_session(32);
        return (*d)->token_plan(*s, false, false);
    };
    const TokenPlan all = plan_with(Fusions{});
    // Every counted form is taken with every rule on.
    EXPECT_GT(all.ffn_q8_reads, 0u);
    EXPECT_GT(all.gated_norm_reads, 0u);
    EXPECT_GT(all.deltanet_q8_reads, 0u);
    EXPECT_GT(all.residual_q8_writes, 0u);
    EXPECT_GT(all.attention_q8_reads, 0u);
    EXPECT_GT(all.shared_output_pipeline, 0u);
    struct Rule {
        const char* name;
        bool Fusions::*field;
        uint32_t TokenPlan::*count;  // the count the rule gives its form, or null
    };
    const Rule rules[] = {
        {"norm_epilogue", &Fusions::norm_epilogue, nullptr},
        {"norm_in_readers", &Fusions::norm_in_readers, nullptr},
        {"ffn_q8_out", &Fusions::ffn_q8_out, &TokenPlan::ffn_q8_reads},
        {"residual_q8_out", &Fusions::residual_q8_out, &TokenPlan::residual_q8_writes},
        {"merged_input_projections", &Fusions::merged_input_projections, nullptr},
        {"gated_norm_in_output", &Fusions::gated_norm_in_output, &TokenPlan::gated_norm_reads},
        {"deltanet_q8_out", &Fusions::deltanet_q8_out, &TokenPlan::deltanet_q8_reads},
        {"attention_q8_out", &Fusions::attention_q8_out, &TokenPlan::attention_q8_reads},
        {"shared_output_pipeline", &Fusions::shared_output_pipeline,
         &TokenPlan::shared_output_pipeline},
    };
    for (const Rule& r : rules) {
        Fusions f;
        f.*r.field = false;
        const TokenPlan off = plan_with(f);
        EXPECT_NE(off.describe(), all.describe()) << r.name;
        if (r.count) {
            EXPECT_EQ(off.*r.count, 0u) << r.name;
        }
    }
    // The plan is a function of its inputs: planned twice, it is the same.
    EXPECT_EQ(plan_with(Fusions{}).describe(), all.describe());
}

}  // namespace
}  // namespace dl::vk
