// A prefill window's plan as a value (window_plan.h): its stages in the order of the model's
// forward pass, written out here from the chain's shape, and its GEMMs one a matrix.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/tiny_model.h"
#include "vk_test.h"
#include "vulkan/driver.h"

namespace dl::vk {
namespace {

TEST(VulkanWindowPlan, StagesInTheForwardPassOrder) {
    VK_TEST_DEVICE();
    for (const char* arch : {"llama", "qwen35"}) {
        auto model = dl::test::tiny_model(test::parity_spec(arch, QType::F32));
        DriverOptions o;
        o.device.robust = test::robust();
        o.plan.n_ctx = 64;
        auto d = ResidentDriver::create(model, o);
        ASSERT_TRUE(d.ok()) << d.reason();
        ASSERT_GT((*d)->plan().window, 0);
        auto s = (*d)->new_session(64);
        for (bool all : {false, true}) {
            const WindowPlan p = (*d)->window_plan(*s, 16, all);
            std::vector<std::string> roles;
            uint32_t gemms = 0, head_gemvs = 0, to_logits = 0;
            for (const WindowItem& i : p.items) {
                if (i.kind == WindowItem::Kind::stage_end || i.kind == WindowItem::Kind::host_end)
                    roles.push_back(i.role);
                gemms += i.kind == WindowItem::Kind::gemm;
                to_logits += i.kind == WindowItem::Kind::gemm && i.to_logits;
                head_gemvs += i.kind == WindowItem::Kind::head_gemv;
            }
            std::vector<std::string> want = {"embed", "norm"};
            uint32_t matrices = 0;
            for (int64_t il = 0; il < model->hp.n_layer; ++il) {
                const bool dn = model->hp.is_recurrent(il);
                for (const char* r : {"gemm in", dn ? "deltanet" : "attention", "gemm out", "norm",
                                      "gemm ffn", "swiglu", "gemm out", "norm"})
                    want.push_back(r);
                matrices += (dn ? 4 : 3) + 1 + 2 + 1;  // inputs, output, gate and up, down
            }
            want.push_back("head");
            EXPECT_EQ(roles, want) << arch << "\n" << p.describe();
            EXPECT_EQ(p.items.back().kind, WindowItem::Kind::host_end);
            // The head is a GEMM over every row when all rows' logits are asked for, else one
            // GEMV over the last row.
            EXPECT_EQ(gemms, matrices + (all ? 1 : 0)) << arch;
            EXPECT_EQ(to_logits, all ? 1u : 0u) << arch;
            EXPECT_EQ(head_gemvs, all ? 0u : 1u) << arch;
        }
    }
}

// A batch of m decode rows: each layer's mixer, and the rows' sampling, is one item over all m
// rows (one dispatch a pass, each row on its own session's cache, state and words), so the
// plan's length does not grow with m.
TEST(VulkanWindowPlan, ABatchRunsEachMixerAndItsSamplingOnceForEveryRow) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("qwen35", QType::F32));
    DriverOptions o;
    o.device.robust = test::robust();
    o.plan.n_ctx = 64;
    auto d = ResidentDriver::create(model, o);
    ASSERT_TRUE(d.ok()) << d.reason();
    int64_t recurrent = 0;
    for (int64_t il = 0; il < model->hp.n_layer; ++il) recurrent += model->hp.is_recurrent(il);
    ASSERT_GT(recurrent, 0);
    ASSERT_LT(recurrent, model->hp.n_layer);
    size_t items_3 = 0;
    for (uint32_t m : {3u, 7u}) {
        const WindowPlan p = (*d)->batch_plan(m, false);
        int64_t deltanet = 0, attention = 0, samples = 0;
        for (const WindowItem& i : p.items) {
            if (i.kind == WindowItem::Kind::deltanet_batch) {
                ++deltanet;
                EXPECT_EQ(i.deltanet.rows, m);
                EXPECT_TRUE(i.deltanet.state_in_tok);
            }
            if (i.kind == WindowItem::Kind::attention_batch) {
                ++attention;
                EXPECT_EQ(i.attention.a.rows, m);
            }
            if (i.kind == WindowItem::Kind::sample_batch) {
                ++samples;
                EXPECT_EQ(i.n, m);
            }
        }
        EXPECT_EQ(deltanet, recurrent) << p.describe();
        EXPECT_EQ(attention, model->hp.n_layer - recurrent) << p.describe();
        EXPECT_EQ(samples, 1);
        if (m == 3)
            items_3 = p.items.size();
        else
            EXPECT_EQ(p.items.size(), items_3) << "the plan's items do not grow with the rows";
    }
}

// GEMMs of few rows split over K: GEMMs of one stage (no barrier between them) get scratches
// of their own, counters apart from every part's sums, each inside the window's split buffer;
// a window of more rows than splits never does.
TEST(VulkanWindowPlan, SplitGemmsOfAStageHaveScratchesOfTheirOwn) {
    VK_TEST_DEVICE();
    // (Rows of 256 values, the K-quants' block: every projection splits.)
    auto model = dl::test::tiny_model(test::parity_spec("qwen3", QType::Q4_K));
    DriverOptions o;
    o.device.robust = test::robust();
    o.plan.n_ctx = 256;
    o.tuning.gemm_split = 2;
    o.tuning.gemm_gemv_rows = 0;  // every GEMM on the tiles
    o.tuning.gemm_gemv_rows_float = 0;
    auto d = ResidentDriver::create(model, o);
    ASSERT_TRUE(d.ok()) << d.reason();
    const Plan& plan = (*d)->plan();
    ASSERT_GT(plan.window_split_bytes, plan.window_split_counters);
    auto s = (*d)->new_session(256);
    struct Range {
        uint64_t begin, end;
    };
    auto disjoint = [](const std::vector<Range>& rs) {
        for (size_t a = 0; a < rs.size(); ++a)
            for (size_t b = a + 1; b < rs.size(); ++b)
                if (rs[a].begin < rs[b].end && rs[b].begin < rs[a].end) return false;
        return true;
    };
    for (uint32_t m : {40u, 129u}) {
        if (m > (uint32_t)plan.window) continue;
        const WindowPlan p = (*d)->window_plan(*s, m, false);
        uint32_t split = 0, stages_with_two = 0;
        std::vector<Range> stage;  // the scratch ranges of this stage's GEMMs
        for (const WindowItem& i : p.items) {
            if (i.kind != WindowItem::Kind::gemm) {
                if (i.kind == WindowItem::Kind::barrier || i.kind == WindowItem::Kind::stage_end ||
                    i.kind == WindowItem::Kind::mark_end || i.kind == WindowItem::Kind::host_end) {
                    EXPECT_TRUE(disjoint(stage)) << p.describe();
                    stages_with_two += stage.size() >= 4;  // two GEMMs' two ranges
                    stage.clear();
                }
                continue;
            }
            const Kernels::SplitScratch& sc = i.split;
            if (sc.parts.range == 0) continue;
            ++split;
            EXPECT_GT(sc.counters.range, 0u);
            EXPECT_LE(sc.counters.offset + sc.counters.range, plan.window_split_counters);
            EXPECT_GE(sc.parts.offset, plan.window_split_counters);
            EXPECT_LE(sc.parts.offset + sc.parts.range, plan.window_split_bytes);
            stage.push_back({sc.counters.offset, sc.counters.offset + sc.counters.range});
            stage.push_back({sc.parts.offset, sc.parts.offset + sc.parts.range});
        }
        if (m <= Kernels::kGemmSplitRows) {
            EXPECT_GT(split, 0u) << "m " << m << "\n" << p.describe();
            EXPECT_GT(stages_with_two, 0u) << "no stage split two GEMMs\n" << p.describe();
        } else {
            EXPECT_EQ(split, 0u) << "m " << m << "\n" << p.describe();
        }
    }
}

}  // namespace
}  // namespace dl::vk
