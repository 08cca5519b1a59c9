// The resident driver's batched step: decode tokens of several sequences at different positions
// in one command give, row by row, the double-precision reference's logits for each sequence
// alone (the bars of the window tests, whose GEMM tiles the batch uses), the same tokens when
// sampled on the device as each sequence's own decode_sample, and leave every session where its
// next solo decode continues. Compositions change between steps.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu/reference_forward.h"
#include "model/tiny_model.h"
#include "vk_test.h"
#include "vulkan/driver.h"

namespace dl::vk {
namespace {

using Want = StepItem::Want;

DriverOptions batch_options() {
    DriverOptions o;
    o.device = test::device_options();
    o.plan.n_ctx = 128;
    o.plan.sequences = 8;  // the batch's sessions and their solo twins
    return o;
}

// How often `word` occurs in `text` (a plan's description).
size_t occurrences(const std::string& text, const std::string& word) {
    size_t n = 0;
    for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
    return n;
}

void check_batch(const dl::test::TinySpec& spec) {
    VK_TEST_DEVICE();
    const std::string& arch = spec.arch;
    const QType type = spec.matrix_type;
    auto model = dl::test::tiny_model(spec);
    auto drv = ResidentDriver::create(model, batch_options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    if (d.plan().window < 5) GTEST_SKIP() << "no window kernels here";
    // F32 activations and an F16 KV cache on the scalar tiles; F16 tiles round every GEMM input.
    const double tol =
        Kernels::gemm_uses_coopmat(d.device().features(), d.plan().variant) ? 1e-2 : 2e-3;
    const int64_t V = model->hp.n_vocab;
    const std::vector<int64_t> history = {3, 17, 1, 40, 9, 22};
    std::vector<std::vector<int32_t>> toks;
    std::vector<std::vector<std::vector<double>>> ref;
    std::vector<std::unique_ptr<SessionState>> gpu;
    std::vector<float> ignored;
    auto open = [&](size_t i) {
        gpu[i] = d.new_session(96);
        d.prefill(*gpu[i], std::span<const int32_t>(toks[i].data(), (size_t)history[i]),
                  LogitsRows::last, ignored);
    };
    for (size_t i = 0; i < history.size(); ++i) {
        toks.push_back(dl::test::tiny_tokens(history[i] + 5, V, 70 + (uint32_t)i));
        ref.push_back(dl::test::reference_forward(*model, toks[i]));
        gpu.emplace_back();
        if (i < 5) open(i);
    }
    // All five sequences, three of them in another order, three others (two join, two leave);
    // then sequence 2 closes and sequence 5 opens in its state slot and blocks, and joins; then
    // all that are open. Which sessions a batch's rows hold is data: one command of each row
    // count serves every composition.
    const std::vector<std::vector<size_t>> steps = {
        {0, 1, 2, 3, 4}, {3, 0, 2}, {1, 4, 0}, {1, 5, 4}, {4, 3, 5, 1, 0}};
    std::vector<int64_t> next(history.size(), 0);
    for (size_t k = 0; k < steps.size(); ++k) {
        if (k == 3) {
            gpu[2].reset();
            open(5);
        }
        std::vector<StepItem> items;
        for (size_t i : steps[k]) {
            StepItem it;
            it.session = gpu[i].get();
            it.tokens = std::span<const int32_t>(&toks[i][(size_t)(history[i] + next[i])], 1);
            items.push_back(it);
        }
        d.step(items);
        for (size_t j = 0; j < steps[k].size(); ++j) {
            const size_t i = steps[k][j];
            const int64_t pos = history[i] + next[i]++;
            EXPECT_EQ(gpu[i]->n_past, pos + 1);
            ASSERT_EQ(items[j].logits.size(), (size_t)V);
            for (float x : items[j].logits) ASSERT_TRUE(std::isfinite(x));
            EXPECT_LE(test::rel_err(items[j].logits, ref[i][(size_t)pos]), tol)
                << arch << " " << qtype_name(type) << " step " << k << " sequence " << i;
        }
    }
    EXPECT_EQ(d.batch_commands(), 2u) << "a command for each row count, not each composition";
    // After the batches each session continues alone where the reference does.
    for (size_t i = 0; i < history.size(); ++i) {
        if (!gpu[i]) continue;
        const int64_t pos = history[i] + next[i];
        std::vector<float> a;
        d.decode(*gpu[i], toks[i][(size_t)pos], a);
        EXPECT_LE(test::rel_err(a, ref[i][(size_t)pos]), tol)
            << arch << " " << qtype_name(type) << " solo decode after, sequence " << i;
    }
}

void check_batch(const std::string& arch, QType type) {
    check_batch(test::parity_spec(arch, type));
}

// Over bytes (Tuning::gemv_x, as a GPU with fast integer dot products runs rows of 1024+ values):
// the batched step's GEMMs round their rows to bytes (round_rows, the batched GEMV over bytes)
// as the decode GEMVs round x, so each row is compared with its sequence decoded alone over
// bytes, step by step, rather than with the double reference (which both miss by about 1 %).
// Most rows agree to 1e-4; where a value lies a hair from a half, the two paths (which compute
// it in another order: the decode GEMVs round x times the norm weights, the batch the normed
// rows) round it the other way, and one byte moves a tiny model's logits by up to 0.5 %.
void check_batch_over_bytes(const dl::test::TinySpec& spec) {
    VK_TEST_DEVICE();
    if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
    auto model = dl::test::tiny_model(spec);
    DriverOptions o = batch_options();
    o.tuning.gemv_x = Kernels::GemvX::bytes;
    auto drv = ResidentDriver::create(model, o);
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    if (d.plan().window < 4) GTEST_SKIP() << "no window kernels here";
    ASSERT_NE(d.batch_plan(4, true).describe().find("round_rows"), std::string::npos)
        << "the batched step does not run over bytes";
    const int64_t V = model->hp.n_vocab;
    std::vector<std::unique_ptr<SessionState>> batched, alone;
    std::vector<std::vector<int32_t>> toks;
    std::vector<float> ignored, solo;
    for (uint32_t i = 0; i < 4; ++i) {
        toks.push_back(dl::test::tiny_tokens(12, V, 90 + i));
        for (auto* set : {&batched, &alone}) {
            set->push_back(d.new_session(64));
            d.prefill(*set->back(), std::span<const int32_t>(toks[i].data(), 3 + i),
                      LogitsRows::last, ignored);
        }
    }
    int close = 0;
    for (uint32_t k = 0; k < 4; ++k) {
        std::vector<StepItem> items;
        for (uint32_t i = 0; i < 4; ++i) {
            StepItem it;
            it.session = batched[i].get();
            it.tokens = std::span<const int32_t>(&toks[i][3 + i + k], 1);
            items.push_back(it);
        }
        d.step(items);
        for (uint32_t i = 0; i < 4; ++i) {
            d.decode(*alone[i], toks[i][3 + i + k], solo);
            for (float x : items[i].logits) ASSERT_TRUE(std::isfinite(x));
            const double e =
                test::rel_err(items[i].logits, std::vector<double>(solo.begin(), solo.end()));
            EXPECT_LE(e, 1e-2) << spec.arch << " step " << k << " sequence " << i;
            close += e <= 1e-4;
        }
    }
    EXPECT_GE(close, 8) << "of 16 rows, too few agree with their solo decodes to 1e-4";
}

TEST(VulkanBatchedStep, Qwen35Q8RowsOverBytesEqualTheirSoloDecodes) {
    check_batch_over_bytes(test::parity_spec("qwen35", QType::Q8_0));
}
TEST(VulkanBatchedStep, Qwen35Q4KMixRowsOverBytesEqualTheirSoloDecodes) {
    check_batch_over_bytes(test::parity_spec("qwen35", QType::Q4_K));
}
TEST(VulkanBatchedStep, LlamaQ4KRowsOverBytesEqualTheirSoloDecodes) {
    check_batch_over_bytes(test::parity_spec("llama", QType::Q4_K));
}

TEST(VulkanBatchedStep, Qwen35F32RowsEqualTheReferenceAlone) {
    check_batch("qwen35", QType::F32);
}
TEST(VulkanBatchedStep, Qwen3F32RowsEqualTheReferenceAlone) {
    check_batch("qwen3", QType::F32);
}
TEST(VulkanBatchedStep, LlamaF32RowsEqualTheReferenceAlone) {
    check_batch("llama", QType::F32);
}
TEST(VulkanBatchedStep, Qwen35Q8RowsEqualTheReferenceAlone) {
    check_batch("qwen35", QType::Q8_0);
}
TEST(VulkanBatchedStep, Qwen3Q4KRowsEqualTheReferenceAlone) {
    check_batch("qwen3", QType::Q4_K);
}
TEST(VulkanBatchedStep, Qwen35MoeF32RowsEqualTheReferenceAlone) {
    check_batch(test::moe_spec("qwen35moe"));
}
TEST(VulkanBatchedStep, Qwen3MoeQ8RowsEqualTheReferenceAlone) {
    check_batch(test::moe_spec("qwen3moe", QType::Q8_0));
}
// Q4_K: the router stays F32 (as llama-quantize leaves it) among K-quant matrices, so its GEMM
// takes the batched GEMV for float matrices (Tuning::gemm_gemv_rows_float).
TEST(VulkanBatchedStep, Qwen35MoeQ4KRowsEqualTheReferenceAlone) {
    check_batch(test::moe_spec("qwen35moe", QType::Q4_K));
}

// The steps above take both forms of a mixture's experts (the tiny models choose 2 of 8 experts):
// 3 rows (6 pairs, under one an expert) in the rows' order, 5 rows (10 pairs) grouped by expert.
// The first form has no sort, SwiGLU or sum stage of its own (nor a rounding of the SwiGLU's
// rows to bytes, where the down projection reads bytes): three or four stages a layer fewer.
TEST(VulkanBatchedStep, MoeRowsUnderOnePairAnExpertRunUnsorted) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::moe_spec("qwen3moe", QType::Q8_0));
    auto drv = ResidentDriver::create(model, batch_options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    if ((*drv)->plan().window < 5) GTEST_SKIP() << "no window kernels here";
    const std::string three = (*drv)->batch_plan(3, true).describe();
    const std::string five = (*drv)->batch_plan(5, true).describe();
    const size_t layers = (size_t)model->hp.n_layer;
    EXPECT_EQ(occurrences(three, "moe_sort"), 0u) << three;
    EXPECT_EQ(occurrences(five, "moe_sort"), layers) << five;
    EXPECT_EQ(occurrences(five, "moe_sum"), layers) << five;
    EXPECT_EQ(occurrences(three, "moe_sum"), 0u) << three;
    EXPECT_EQ(occurrences(three, "stage 'swiglu'"), 0u) << three;
    EXPECT_EQ(occurrences(three, "stage 'experts sum'"), 0u) << three;
    EXPECT_GE(occurrences(five, "stage "), occurrences(three, "stage ") + 3 * layers)
        << three << five;
}

// A step's experts in the rows' order with their SwiGLU rounded to bytes once
// (Tuning::expert_down_rounded_rows): one rounding stage a layer more, and rows as close to the
// double reference as the same step's forming the SwiGLU in the down projection (F32). Both
// drivers read bytes elsewhere (Tuning::gemv_x), so the rounding of the down projection's input
// is their one difference; over bytes a tiny model's rows miss the reference by up to about 1 %
// either way (check_batch_over_bytes), so each form is held to 2 % a row and the rounded one to
// the formed one's error over all rows, with a quarter more.
void check_rounded_down(const dl::test::TinySpec& spec) {
    VK_TEST_DEVICE();
    if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
    auto model = dl::test::tiny_model(spec);
    DriverOptions o = batch_options();
    o.tuning.gemv_x = Kernels::GemvX::bytes;
    auto formed = ResidentDriver::create(model, o);
    o.tuning.expert_down_rounded_rows = 2;
    auto rounded = ResidentDriver::create(model, o);
    ASSERT_TRUE(formed.ok()) << formed.reason();
    ASSERT_TRUE(rounded.ok()) << rounded.reason();
    if ((*formed)->plan().window < 5) GTEST_SKIP() << "no window kernels here";
    // (3 rows of 2 experts of 8: under one pair an expert, the rows' order)
    const std::string before = (*formed)->batch_plan(3, true).describe();
    const std::string after = (*rounded)->batch_plan(3, true).describe();
    EXPECT_EQ(occurrences(before, "moe_sort"), 0u) << before;
    EXPECT_EQ(occurrences(after, "the SwiGLU with ups@"), (size_t)model->hp.n_layer) << after;
    EXPECT_EQ(occurrences(before, "the SwiGLU with ups@"), 0u) << before;
    EXPECT_EQ(occurrences(after, "round_rows"),
              occurrences(before, "round_rows") + (size_t)model->hp.n_layer)
        << after;
    const int64_t V = model->hp.n_vocab;
    std::vector<std::unique_ptr<SessionState>> a, b;
    std::vector<std::vector<int32_t>> toks;
    std::vector<float> ignored;
    for (uint32_t i = 0; i < 3; ++i) {
        toks.push_back(dl::test::tiny_tokens(12, V, 120 + i));
        a.push_back((*formed)->new_session(64));
        b.push_back((*rounded)->new_session(64));
        (*formed)->prefill(*a.back(), std::span<const int32_t>(toks[i].data(), 3 + i),
                           LogitsRows::last, ignored);
        (*rounded)->prefill(*b.back(), std::span<const int32_t>(toks[i].data(), 3 + i),
                            LogitsRows::last, ignored);
    }
    std::vector<std::vector<std::vector<double>>> ref;
    for (const auto& t : toks) ref.push_back(dl::test::reference_forward(*model, t));
    double differ = 0, err_formed = 0, err_rounded = 0;
    for (uint32_t k = 0; k < 4; ++k) {
        std::vector<StepItem> ia, ib;
        for (uint32_t i = 0; i < 3; ++i) {
            StepItem it;
            it.tokens = std::span<const int32_t>(&toks[i][3 + i + k], 1);
            it.session = a[i].get();
            ia.push_back(it);
            it.session = b[i].get();
            ib.push_back(it);
        }
        (*formed)->step(ia);
        (*rounded)->step(ib);
        for (uint32_t i = 0; i < 3; ++i) {
            for (float x : ib[i].logits) ASSERT_TRUE(std::isfinite(x));
            const std::vector<double>& want = ref[i][3 + i + k];
            const double ea = test::rel_err(ia[i].logits, want);
            const double eb = test::rel_err(ib[i].logits, want);
            EXPECT_LE(ea, 2e-2) << spec.arch << " formed, step " << k << " sequence " << i;
            EXPECT_LE(eb, 2e-2) << spec.arch << " rounded, step " << k << " sequence " << i;
            err_formed += ea;
            err_rounded += eb;
            differ = std::max(differ,
                              test::rel_err(ib[i].logits, std::vector<double>(ia[i].logits.begin(),
                                                                              ia[i].logits.end())));
        }
    }
    EXPECT_LE(err_rounded, 1.25 * err_formed) << spec.arch;
    // (The two forms differ: the rounding ran, and in bytes.)
    EXPECT_GT(differ, 0.0) << "the rounded form's logits are the formed one's to the bit";
}

TEST(VulkanBatchedStep, Qwen3MoeRowsOverTheirSwigluRoundedOnceAsCloseAsFormedInTheDown) {
    check_rounded_down(test::moe_spec("qwen3moe", QType::Q8_0));
}
TEST(VulkanBatchedStep, Qwen35MoeQ4KRowsOverTheirSwigluRoundedOnceAsCloseAsFormedInTheDown) {
    check_rounded_down(test::moe_spec("qwen35moe", QType::Q4_K));
}

// Sampled on the device in a batch: the tokens each sequence's own decode_sample chooses with the
// same parameters and draw (greedy and seeded rows together).
TEST(VulkanBatchedStep, SampledRowsChooseAsSoloDecodes) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("qwen35"));
    auto drv = ResidentDriver::create(model, batch_options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    if (d.plan().window < 4) GTEST_SKIP() << "no window kernels here";
    const int64_t V = model->hp.n_vocab;
    std::vector<SamplerParams> params(4);
    params[0].temperature = 0;
    params[1].temperature = 0.8f;
    params[1].top_k = 20;
    params[2].temperature = 1.2f;
    params[2].top_k = 40;
    params[2].top_p = 0.9f;
    params[3].temperature = 0;
    const std::vector<double> u = {0, 0.31, 0.77, 0};
    std::vector<std::unique_ptr<SessionState>> a, b;
    std::vector<std::vector<int32_t>> toks;
    std::vector<float> ignored;
    for (uint32_t i = 0; i < 4; ++i) {
        toks.push_back(dl::test::tiny_tokens(6 + 5 * i, V, 90 + i));
        std::span<const int32_t> h(toks[i].data(), toks[i].size() - 1);
        a.push_back(d.new_session(64));
        b.push_back(d.new_session(64));
        d.prefill(*a[i], h, LogitsRows::last, ignored);
        d.prefill(*b[i], h, LogitsRows::last, ignored);
    }
    std::vector<StepItem> items(4);
    for (size_t i = 0; i < 4; ++i) {
        items[i].session = a[i].get();
        items[i].tokens = std::span<const int32_t>(&toks[i].back(), 1);
        items[i].want = Want::sample;
        items[i].params = &params[i];
        items[i].u = u[i];
    }
    d.step(items);
    for (size_t i = 0; i < 4; ++i) {
        const int32_t solo = d.decode_sample(*b[i], toks[i].back(), params[i], u[i]);
        EXPECT_EQ(items[i].token, solo) << "sequence " << i;
        EXPECT_TRUE(items[i].logits.empty());
    }
}

// Prompt chunks in the same command as other sequences' decode tokens (ResidentDriver::
// run_batch): a fresh session's first chunk, a chunk whose logits nobody reads, a prompt's last
// chunk, beside decode rows at other positions; two chunks with and without decode rows. Every
// row's logits equal the reference's for its sequence alone, and every session then goes on
// alone where the reference does.
void check_chunk_beside_decodes(const dl::test::TinySpec& spec) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(spec);
    auto drv = ResidentDriver::create(model, batch_options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    if (d.plan().window < 24) GTEST_SKIP() << "no window kernels here";
    const double tol =
        Kernels::gemm_uses_coopmat(d.device().features(), d.plan().variant) ? 1e-2 : 2e-3;
    const int64_t V = model->hp.n_vocab;
    // Sequences 0-2 decode; 3, 5 and 6 start empty, 4 with 6 tokens of its prompt.
    const std::vector<int64_t> history = {5, 11, 8, 0, 6, 0, 0};
    std::vector<std::vector<int32_t>> toks;
    std::vector<std::vector<std::vector<double>>> ref;
    std::vector<std::unique_ptr<SessionState>> s;
    std::vector<float> ignored;
    for (size_t i = 0; i < history.size(); ++i) {
        toks.push_back(dl::test::tiny_tokens(30, V, 40 + (uint32_t)i));
        ref.push_back(dl::test::reference_forward(*model, toks[i]));
        s.push_back(d.new_session(64));
        if (history[i] > 0)
            d.prefill(*s[i], std::span<const int32_t>(toks[i].data(), (size_t)history[i]),
                      LogitsRows::last, ignored);
    }
    struct Chunk {
        size_t seq;
        int64_t n;
        Want want;
    };
    // Step by step: the decoding sequences, then the chunks (each its session's next n tokens).
    const std::vector<std::pair<std::vector<size_t>, std::vector<Chunk>>> steps = {
        {{0, 1, 2}, {{3, 9, Want::last_logits}}},
        {{2, 0, 3, 1}, {{4, 13, Want::nothing}}},
        {{1}, {{4, 1, Want::last_logits}}},
        {{4, 3}, {{0, 17, Want::last_logits}}},
        {{}, {{5, 7, Want::last_logits}, {6, 5, Want::nothing}}},
        {{0, 1}, {{6, 6, Want::last_logits}, {2, 10, Want::last_logits}}}};
    std::vector<int64_t> at(history);  // each sequence's tokens run so far
    const uint64_t mixed_before = d.mixed_steps();
    for (size_t k = 0; k < steps.size(); ++k) {
        const auto& [decodes, chunks] = steps[k];
        std::vector<StepItem> items;
        std::vector<size_t> seq = decodes;
        for (size_t i : decodes) {
            StepItem it;
            it.session = s[i].get();
            it.tokens = std::span<const int32_t>(&toks[i][(size_t)at[i]], 1);
            items.push_back(it);
        }
        for (const Chunk& ch : chunks) {
            StepItem c;
            c.session = s[ch.seq].get();
            c.tokens = std::span<const int32_t>(&toks[ch.seq][(size_t)at[ch.seq]], (size_t)ch.n);
            c.want = ch.want;
            items.push_back(c);
            seq.push_back(ch.seq);
        }
        d.step(items);
        for (size_t j = 0; j < items.size(); ++j) {
            const size_t i = seq[j];
            at[i] += (int64_t)items[j].tokens.size();
            EXPECT_EQ(s[i]->n_past, at[i]) << "step " << k << " sequence " << i;
            if (items[j].want == Want::nothing) {
                EXPECT_TRUE(items[j].logits.empty());
                continue;
            }
            ASSERT_EQ(items[j].logits.size(), (size_t)V) << "step " << k << " sequence " << i;
            for (float x : items[j].logits) ASSERT_TRUE(std::isfinite(x));
            EXPECT_LE(test::rel_err(items[j].logits, ref[i][(size_t)at[i] - 1]), tol)
                << spec.arch << " step " << k << " sequence " << i
                << (j < decodes.size() ? " (decode)" : " (chunk)");
        }
    }
    // (A one-token chunk of a session that holds tokens is a decode row like the others.)
    EXPECT_EQ(d.mixed_steps() - mixed_before, 5u) << "a chunk ran apart";
    for (size_t i = 0; i < s.size(); ++i) {
        std::vector<float> a;
        d.decode(*s[i], toks[i][(size_t)at[i]], a);
        EXPECT_LE(test::rel_err(a, ref[i][(size_t)at[i]]), tol)
            << spec.arch << " solo decode after, sequence " << i;
    }
}

TEST(VulkanBatchedStep, Qwen35F32ChunkBesideDecodesEqualsTheReference) {
    check_chunk_beside_decodes(test::parity_spec("qwen35", QType::F32));
}
TEST(VulkanBatchedStep, Qwen3Q4KChunkBesideDecodesEqualsTheReference) {
    check_chunk_beside_decodes(test::parity_spec("qwen3", QType::Q4_K));
}
TEST(VulkanBatchedStep, LlamaF32ChunkBesideDecodesEqualsTheReference) {
    check_chunk_beside_decodes(test::parity_spec("llama", QType::F32));
}
TEST(VulkanBatchedStep, Qwen35MoeF32ChunkBesideDecodesEqualsTheReference) {
    check_chunk_beside_decodes(test::moe_spec("qwen35moe"));
}

// A driver warmed up for 6 sequences (a server before it answers) makes no pipeline in the
// steps that follow: prompts of many lengths, batches of 2-6 rows, a chunk beside decode rows.
TEST(VulkanBatchedStep, AWarmedUpDriverMakesNoPipelineInItsSteps) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("qwen35", QType::Q8_0));
    auto drv = ResidentDriver::create(model, batch_options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    if (d.plan().window < 40) GTEST_SKIP() << "no window kernels here";
    EXPECT_NE(d.warm_up(6).find("pipelines made ahead"), std::string::npos);
    const size_t made = d.pipelines();
    EXPECT_GT(made, 0u);
    const int64_t V = model->hp.n_vocab;
    std::vector<std::unique_ptr<SessionState>> s;
    std::vector<std::vector<int32_t>> toks;
    std::vector<float> ignored;
    for (uint32_t i = 0; i < 6; ++i) {
        toks.push_back(dl::test::tiny_tokens(60, V, 7 + i));
        s.push_back(d.new_session(96));
        d.prefill(*s[i], std::span<const int32_t>(toks[i].data(), 3 + 7 * i), LogitsRows::last,
                  ignored);
    }
    for (uint32_t n = 2; n <= 6; ++n) {
        std::vector<StepItem> items;
        for (uint32_t i = 0; i < n; ++i) {
            StepItem it;
            it.session = s[i].get();
            it.tokens = std::span<const int32_t>(&toks[i][(size_t)s[i]->n_past], 1);
            items.push_back(it);
        }
        if (n == 4) {  // and a chunk beside them
            items.pop_back();
            items.back().tokens = std::span<const int32_t>(&toks[2][(size_t)s[2]->n_past], 12);
            items.back().want = Want::nothing;
        }
        d.step(items);
    }
    EXPECT_EQ(d.pipelines(), made) << "a step made pipelines the warm-up had not";
}

}  // namespace
}  // namespace dl::vk
