// The paged KV cache through the driver: sessions whose blocks interleave in the pool, blocks a
// closed session gave back taken by another, a full pool refused before anything changes, and
// snapshots restored into sessions whose blocks lie elsewhere; each against the CPU chain.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "cpu/chain.h"
#include "model/tiny_model.h"
#include "vk_test.h"
#include "vulkan/driver.h"

namespace dl::vk {
namespace {

DriverOptions paged_options(int64_t n_ctx, int64_t sequences) {
    DriverOptions o;
    o.device = test::device_options();
    o.plan.n_ctx = n_ctx;
    o.plan.sequences = sequences;
    return o;
}

// The largest logit difference of two rows, relative to the reference's largest magnitude.
double logit_error(const std::vector<float>& got, const std::vector<float>& want) {
    EXPECT_EQ(got.size(), want.size());
    double worst = 0, scale = 0;
    for (size_t j = 0; j < want.size() && j < got.size(); ++j) {
        EXPECT_TRUE(std::isfinite(got[j])) << "logit " << j;
        worst = std::max(worst, std::fabs((double)got[j] - want[j]));
        scale = std::max(scale, std::fabs((double)want[j]));
    }
    return worst / (1 + scale);
}

// A sequence on both executors, fed the same tokens.
struct Twin {
    std::unique_ptr<SessionState> gpu, cpu;
    std::vector<int32_t> tokens;
};

// Each test runs the tiny model of its parameter's architecture on the driver and the CPU chain.
class PagedKv : public ::testing::TestWithParam<const char*> {
  protected:
    void open(int64_t n_ctx, int64_t sequences) {
        model_ = dl::test::tiny_model(test::parity_spec(GetParam()));
        auto drv = ResidentDriver::create(model_, paged_options(n_ctx, sequences));
        ASSERT_TRUE(drv.ok()) << drv.reason();
        driver_ = std::move(*drv);
        chain_ = std::make_unique<cpu::Chain>(model_);
    }
    int32_t vocab() const { return (int32_t)model_->hp.n_vocab; }
    std::shared_ptr<const Model> model_;
    std::unique_ptr<ResidentDriver> driver_;
    std::unique_ptr<cpu::Chain> chain_;
};

// Three sequences take their blocks in turn, so each one's blocks are scattered through the pool
// (a's rows 0-63, 64-127 and 128-191 live in pool blocks 0, 3 and 6 or wherever the turns left
// them), and one closes mid-way so that another grows into the blocks it gave back. Every decoded
// token's logits match the CPU chain's for the same sequence.
TEST_P(PagedKv, InterleavedSessionsMatchTheCpuChain) {
    VK_TEST_DEVICE();
    ASSERT_NO_FATAL_FAILURE(open(256, 3));
    ResidentDriver& d = *driver_;
    cpu::Chain& chain = *chain_;
    const int32_t V = vocab();
    std::vector<Twin> seqs(3);
    std::vector<float> lg, lc;
    for (size_t i = 0; i < seqs.size(); ++i) {
        seqs[i].gpu = d.new_session(256);
        seqs[i].cpu = chain.new_session(256);
        seqs[i].tokens = dl::test::tiny_tokens(200, V, 300 + (uint32_t)i);
    }
    // Prompts of 40 tokens each (one block), then one token at a time in turns past 190.
    for (Twin& t : seqs) {
        std::span<const int32_t> p(t.tokens.data(), 40);
        d.prefill(*t.gpu, p, LogitsRows::last, lg);
        chain.prefill(*t.cpu, p, LogitsRows::last, lc);
        ASSERT_LE(logit_error(lg, lc), 2e-3);
    }
    for (int64_t pos = 40; pos < 190; ++pos) {
        if (pos == 100) {
            seqs[1].gpu.reset();  // its two blocks go back; the others grow into them
            seqs[1].cpu.reset();
        }
        for (size_t i = 0; i < seqs.size(); ++i) {
            Twin& t = seqs[i];
            if (!t.gpu) continue;
            d.decode(*t.gpu, t.tokens[(size_t)pos], lg);
            chain.decode(*t.cpu, t.tokens[(size_t)pos], lc);
            ASSERT_LE(logit_error(lg, lc), 2e-3) << "sequence " << i << " position " << pos;
        }
    }
}

// A pool of two sequences' blocks: a third sequence's prompt that needs more than the free blocks
// is refused (CacheFull) before it changes anything; once a sequence closes, the same call runs
// and its logits match the CPU chain's.
TEST_P(PagedKv, FullPoolRefusesUntilASequenceCloses) {
    VK_TEST_DEVICE();
    ASSERT_NO_FATAL_FAILURE(open(128, 2));  // 4 blocks of 64
    ResidentDriver& d = *driver_;
    cpu::Chain& chain = *chain_;
    const int32_t V = vocab();
    const std::vector<int32_t> toks = dl::test::tiny_tokens(128, V, 77);
    std::vector<float> lg, lc;
    auto a = d.new_session(128), b = d.new_session(128), c = d.new_session(128);
    d.prefill(*a, std::span<const int32_t>(toks.data(), 100), LogitsRows::last, lg);  // 2 blocks
    d.prefill(*b, std::span<const int32_t>(toks.data(), 10), LogitsRows::last, lg);   // 1 block
    // c's 70 tokens need two blocks; one is free.
    EXPECT_THROW(d.prefill(*c, std::span<const int32_t>(toks.data(), 70), LogitsRows::last, lg),
                 CacheFull);
    EXPECT_EQ(c->n_past, 0);
    // A step with it is refused whole: b's decode beside it does not run either.
    std::vector<StepItem> items(2);
    items[0].session = b.get();
    items[0].tokens = std::span<const int32_t>(toks.data() + 10, 1);
    items[1].session = c.get();
    items[1].tokens = std::span<const int32_t>(toks.data(), 70);
    EXPECT_THROW(d.step(items), CacheFull);
    EXPECT_EQ(b->n_past, 10);
    EXPECT_EQ(c->n_past, 0);
    a.reset();
    d.prefill(*c, std::span<const int32_t>(toks.data(), 70), LogitsRows::last, lg);
    auto sc = chain.new_session(128);
    chain.prefill(*sc, std::span<const int32_t>(toks.data(), 70), LogitsRows::last, lc);
    EXPECT_LE(logit_error(lg, lc), 2e-3);
}

// A snapshot of a sequence whose blocks are scattered through the pool, restored into a session
// that held more rows of its own (they go back; the snapshot's blocks become its), goes on as the
// original would: the same logits as the CPU chain's over the same tokens.
TEST_P(PagedKv, SnapshotRestoresIntoOtherBlocks) {
    VK_TEST_DEVICE();
    ASSERT_NO_FATAL_FAILURE(open(256, 3));
    ResidentDriver& d = *driver_;
    cpu::Chain& chain = *chain_;
    const int32_t V = vocab();
    const std::vector<int32_t> toks = dl::test::tiny_tokens(160, V, 91);
    const std::vector<int32_t> other = dl::test::tiny_tokens(200, V, 92);
    std::vector<float> lg, lc;
    auto a = d.new_session(256), b = d.new_session(256);
    // a and b take blocks in turns, so a's 130 rows are not in consecutive blocks.
    for (int64_t pos = 0; pos < 130; pos += 10) {
        d.prefill(*a, std::span<const int32_t>(toks.data() + pos, 10), LogitsRows::last, lg);
        d.prefill(*b, std::span<const int32_t>(other.data() + pos, 10), LogitsRows::last, lg);
    }
    d.prefill(*b, std::span<const int32_t>(other.data() + 130, 60), LogitsRows::last, lg);
    auto snap = d.snapshot(*a);
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->n_past, 130);
    a.reset();
    ASSERT_TRUE(d.restore(*b, *snap));  // 190 rows of its own down to a's 130
    EXPECT_EQ(b->n_past, 130);
    auto sc = chain.new_session(256);
    chain.prefill(*sc, std::span<const int32_t>(toks.data(), 130), LogitsRows::last, lc);
    for (int64_t pos = 130; pos < 160; ++pos) {
        d.decode(*b, toks[(size_t)pos], lg);
        chain.decode(*sc, toks[(size_t)pos], lc);
        ASSERT_LE(logit_error(lg, lc), 2e-3) << "position " << pos;
    }
}

// A snapshot holds its session's blocks instead of copying them, and a session restored from it
// holds them too: neither takes a block until one writes into a block another holds, which it
// then copies (the block of the snapshot's last rows, 100 of 128). Two sessions restored from
// one snapshot go on with different tokens, and the original too, each as the CPU chain does;
// spilled to host memory the snapshot gives its blocks back and still restores.
TEST_P(PagedKv, SnapshotsShareBlocksUntilAWriterCopiesOne) {
    VK_TEST_DEVICE();
    ASSERT_NO_FATAL_FAILURE(open(256, 4));
    ResidentDriver& d = *driver_;
    cpu::Chain& chain = *chain_;
    const int32_t V = vocab();
    const std::vector<int32_t> prompt = dl::test::tiny_tokens(100, V, 41);
    std::vector<float> lg, lc;
    auto a = d.new_session(256);
    d.prefill(*a, prompt, LogitsRows::last, lg);
    const int64_t used = d.cache_use().used_rows;
    EXPECT_EQ(used, 128);
    auto snap = d.snapshot(*a);
    ASSERT_TRUE(snap);
    EXPECT_EQ(d.cache_use().used_rows, used) << "a snapshot took blocks of its own";
    auto b = d.new_session(256), c = d.new_session(256);
    ASSERT_TRUE(d.restore(*b, *snap));
    ASSERT_TRUE(d.restore(*c, *snap));
    EXPECT_EQ(d.cache_use().used_rows, used) << "a restore took blocks of its own";
    auto cold = chain.new_session(256);
    chain.prefill(*cold, prompt, LogitsRows::last, lc);
    auto snap_cpu = chain.snapshot(*cold);
    ASSERT_TRUE(snap_cpu);
    // Each writer copies the shared block once: three more blocks, then no more.
    const std::vector<std::pair<SessionState*, uint32_t>> writers = {
        {a.get(), 1}, {b.get(), 2}, {c.get(), 3}};
    for (auto [gpu, seed] : writers) {
        auto ref = chain.new_session(256);
        ASSERT_TRUE(chain.restore(*ref, *snap_cpu));
        const std::vector<int32_t> more = dl::test::tiny_tokens(20, V, 50 + seed);
        for (size_t i = 0; i < more.size(); ++i) {
            d.decode(*gpu, more[i], lg);
            chain.decode(*ref, more[i], lc);
            ASSERT_LE(logit_error(lg, lc), 2e-3) << "writer " << seed << " token " << i;
        }
        EXPECT_EQ(d.cache_use().used_rows, used + 64 * seed);
    }
    // Spilled, the snapshot gives its blocks back; restored, it goes on as before.
    const int64_t before_spill = d.cache_use().used_rows;
    ASSERT_TRUE(d.spill(*snap));
    EXPECT_EQ(d.cache_use().used_rows, before_spill - 64) << "the block only it held";
    auto e = d.new_session(256);
    ASSERT_TRUE(d.restore(*e, *snap));
    auto ref = chain.new_session(256);
    ASSERT_TRUE(chain.restore(*ref, *snap_cpu));
    for (int32_t t : dl::test::tiny_tokens(10, V, 60)) {
        d.decode(*e, t, lg);
        chain.decode(*ref, t, lc);
        ASSERT_LE(logit_error(lg, lc), 2e-3);
    }
    a.reset();
    b.reset();
    c.reset();
    e.reset();
    snap.reset();
    EXPECT_EQ(d.cache_use().used_rows, 0) << "a block was never given back";
}

INSTANTIATE_TEST_SUITE_P(Archs, PagedKv, ::testing::Values("qwen35", "qwen3", "llama"));

}  // namespace
}  // namespace dl::vk
