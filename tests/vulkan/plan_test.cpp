// The residency plan on tiny models: every matrix placed inside a slab within the storage range,
// memory sums, the context shrunk to a budget, and declines (with their sentence) for types
// without kernels and budgets too small; the activation layout's mixture areas 16-byte aligned.
#include <gtest/gtest.h>

#include <tuple>
#include <utility>

#include "model/tiny_model.h"
#include "vulkan/kernels.h"
#include "vulkan/plan.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {
namespace {

Features big_device() {
    Features f;
    f.name = "test device";
    f.max_storage_buffer_range = 1u << 20;  // 1 MiB slabs: several on a tiny model
    f.max_buffer_size = 1ull << 30;
    f.max_workgroup_invocations = 1024;
    f.max_shared_memory = 48 << 10;
    f.device_local_bytes = 8ull << 30;
    return f;
}

// A tiny Q4_K model whose every matrix's input is a whole number of 256-element blocks.
dl::test::TinySpec q4_k_spec() {
    dl::test::TinySpec s;
    s.n_embd = 256;
    s.n_ff = 512;
    s.n_vocab = 1000;
    s.matrix_type = QType::Q4_K;
    s.head_dim = 64;
    s.d_state = 64;
    return s;
}

TEST(VulkanPlan, PlacesEveryMatrixInsideASlab) {
    auto model = dl::test::tiny_model(q4_k_spec());
    auto r = plan(*model, big_device(), Variant::scalar, {});
    ASSERT_TRUE(r.ok()) << r.reason();
    const Plan& p = *r;
    EXPECT_GT(p.slabs.size(), 1u);
    uint64_t sum = 0;
    for (const Placement& m : p.matrices) {
        ASSERT_LT(m.slab, p.slabs.size());
        EXPECT_EQ(m.offset % 256, 0u);
        EXPECT_LE(m.offset + m.bytes + 4, p.slabs[m.slab]) << m.tensor->name;
        EXPECT_LE(p.slabs[m.slab], big_device().max_storage_buffer_range);
        sum += m.bytes;
    }
    EXPECT_GE(p.weight_bytes, sum);
    // Matrices never overlap within a slab.
    for (size_t i = 0; i < p.matrices.size(); ++i)
        for (size_t j = i + 1; j < p.matrices.size(); ++j) {
            const Placement &a = p.matrices[i], &b = p.matrices[j];
            if (a.slab != b.slab) continue;
            EXPECT_TRUE(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset);
        }
    ASSERT_NE(p.find(model->output), nullptr);
    ASSERT_NE(p.find(model->layers[0].ssm_qkv), nullptr);
    EXPECT_GT(p.recurrent_bytes, 0u);
    EXPECT_GT(p.kv_bytes, 0u);
    EXPECT_EQ(p.n_ctx, 4096);
    EXPECT_NE(p.describe().find("4096 tokens"), std::string::npos);
}

// The decode GEMV pair (Kernels::gemv_swiglu) binds a layer's FFN gate and up matrices as one
// view: the plan keeps them in one slab, the up matrix after the gate, even where slabs split.
TEST(VulkanPlan, KeepsEachLayersGateAndUpInOneSlab) {
    dl::test::TinySpec s = q4_k_spec();
    s.n_ff = 768;
    s.n_layer = 6;
    auto model = dl::test::tiny_model(s);
    // Slabs of a few matrices each, so that slab ends fall at many places in the layers.
    for (uint32_t kib = 224; kib <= 480; kib += 32) {
        Features f = big_device();
        f.max_storage_buffer_range = kib << 10;
        auto r = plan(*model, f, Variant::scalar, {});
        ASSERT_TRUE(r.ok()) << r.reason();
        EXPECT_GT(r->slabs.size(), 2u);
        for (const Layer& L : model->layers) {
            const Placement *g = r->find(L.ffn_gate), *u = r->find(L.ffn_up);
            ASSERT_TRUE(g && u);
            EXPECT_EQ(g->slab, u->slab) << L.ffn_gate->name << ", slabs of " << kib << " KiB";
            EXPECT_GT(u->offset, g->offset) << L.ffn_gate->name;
        }
    }
}

// A mixer's input projections of one type and row length lie back to back, where the one
// before ends on the binding alignment (and, held in tiles, on a whole tile of rows), so the
// token command reads such a run in one GEMV; each still starts where it can be bound alone.
TEST(VulkanPlan, PutsAMixersInputProjectionsBackToBack) {
    dl::test::TinySpec s = q4_k_spec();
    s.q4_k_m = true;  // Q6_K qkv and attn_v in every other layer: runs broken by the type
    s.H_v = 8;        // beta and alpha rows of 8 * 144 bytes: a run past them breaks on alignment
    auto model = dl::test::tiny_model(s);
    auto r = plan(*model, big_device(), Variant::scalar, {});
    ASSERT_TRUE(r.ok()) << r.reason();
    int back_to_back = 0, apart = 0;
    for (const Layer& L : model->layers) {
        const std::vector<const Tensor*> in =
            L.ssm_qkv ? std::vector<const Tensor*>{L.ssm_qkv, L.ssm_z, L.ssm_beta, L.ssm_alpha}
                      : std::vector<const Tensor*>{L.wq, L.wk, L.wv};
        for (size_t i = 0; i + 1 < in.size(); ++i) {
            const Placement *a = r->find(in[i]), *b = r->find(in[i + 1]);
            ASSERT_TRUE(a && b);
            EXPECT_EQ(b->offset % 256, 0u) << in[i + 1]->name;
            const bool joins = in[i]->type == in[i + 1]->type &&
                               in[i]->cols() == in[i + 1]->cols() && a->bytes % 256 == 0 &&
                               (!tiled(in[i]->type) || in[i]->rows() % kTileRows == 0);
            EXPECT_EQ(a->bytes, device_bytes(in[i]->type, in[i]->cols(), in[i]->rows()));
            if (joins) {
                EXPECT_EQ(b->slab, a->slab) << in[i + 1]->name;
                EXPECT_EQ(b->offset, a->offset + a->bytes) << in[i + 1]->name;
                ++back_to_back;
            } else {
                EXPECT_TRUE(b->slab != a->slab || b->offset >= a->offset + a->bytes + 4)
                    << in[i + 1]->name;
                ++apart;
            }
        }
    }
    EXPECT_GT(back_to_back, 0);
    EXPECT_GT(apart, 0);
}

// The plan says where the window attention runs: on tensor cores only with the NV cooperative
// matrix 2 variant, its reductions, and head sizes that are multiples of 32.
TEST(VulkanPlan, SaysWhereTheWindowAttentionRuns) {
    if (!variant_built(Variant::nv_coopmat2)) GTEST_SKIP() << "no NV cooperative matrix 2 build";
    Features f = big_device();
    f.nv_coopmat2 = f.nv_coopmat2_blocks = f.nv_coopmat2_softmax = true;
    f.cm2_max_workgroup = 256;
    f.cm2_granularity_m = f.cm2_granularity_n = 32;
    f.cm2_granularity_k = 16;
    const std::string tc = "attention on tensor cores";
    dl::test::TinySpec s;
    s.arch = "qwen3";
    s.head_dim = 64;
    auto model = dl::test::tiny_model(s);
    auto r = plan(*model, f, Variant::nv_coopmat2, {});
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_TRUE(r->window_attention_tensor_cores);
    EXPECT_NE(r->describe().find(tc), std::string::npos) << r->describe();
    r = plan(*model, f, Variant::scalar, {});
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_EQ(r->describe().find(tc), std::string::npos) << r->describe();
    s.head_dim = 48;  // no tensor-core tile for it
    auto odd = dl::test::tiny_model(s);
    r = plan(*odd, f, Variant::nv_coopmat2, {});
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_FALSE(r->window_attention_tensor_cores);
    f.nv_coopmat2_softmax = false;  // no reductions: tiles
    r = plan(*model, f, Variant::nv_coopmat2, {});
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_FALSE(r->window_attention_tensor_cores);
}

TEST(VulkanPlan, ShrinksTheContextToTheBudgetOrDeclines) {
    dl::test::TinySpec s;
    auto model = dl::test::tiny_model(s);
    Features f = big_device();
    f.max_storage_buffer_range = 1u << 30;  // a million tokens' pool in one binding
    auto full = plan(*model, f, Variant::scalar, {});
    ASSERT_TRUE(full.ok()) << full.reason();
    PlanOptions o;
    o.n_ctx = 1 << 20;
    o.budget_bytes = full->total();  // room for ~4096 tokens, not a million
    auto r = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_LT(r->n_ctx, o.n_ctx);
    EXPECT_GE(r->n_ctx, 256);
    EXPECT_LE(r->total(), o.budget_bytes);
    o.shrink_context = false;
    auto d = plan(*model, f, Variant::scalar, o);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.reason().find("budget"), std::string::npos) << d.reason();
    o.budget_bytes = 1000;
    o.shrink_context = true;
    EXPECT_FALSE(plan(*model, f, Variant::scalar, o).ok());
}

// Each layer's key and value pools are one binding each: a context longer than one binding holds
// shrinks to it, or declines saying so.
TEST(VulkanPlan, KeepsEachKvPoolInOneBinding) {
    dl::test::TinySpec s;
    auto model = dl::test::tiny_model(s);
    const Features f = big_device();  // bindings of 1 MiB
    const uint64_t row = (uint64_t)s.n_head_kv * s.head_dim * 2;
    const int64_t most =
        (int64_t)((f.max_storage_buffer_range / row) / Kernels::kKvBlock * Kernels::kKvBlock);
    PlanOptions o;
    o.n_ctx = 4 * most;
    auto r = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_EQ(r->n_ctx, most);
    EXPECT_LE(r->kv_blocks * Kernels::kKvBlock * row, f.max_storage_buffer_range);
    o.shrink_context = false;
    auto d = plan(*model, f, Variant::scalar, o);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.reason().find("binding"), std::string::npos) << d.reason();
}

// The pool holds `sequences` sequences of n_ctx tokens where the budget has room for them and
// their own state, at least one, and no more than the budget.
TEST(VulkanPlan, SizesTheKvPoolForItsSequences) {
    dl::test::TinySpec s;
    auto model = dl::test::tiny_model(s);
    Features f = big_device();
    f.max_storage_buffer_range = 1u << 30;
    PlanOptions o;
    o.n_ctx = 1000;  // 16 blocks of 64
    auto one = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(one.ok()) << one.reason();
    EXPECT_EQ(one->kv_blocks, 16u);
    EXPECT_EQ(one->pool_sequences(), 1);
    o.sequences = 6;
    auto six = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(six.ok()) << six.reason();
    EXPECT_EQ(six->kv_blocks, 6 * 16u);
    EXPECT_EQ(six->pool_sequences(), 6);
    EXPECT_EQ(six->kv_bytes, 6 * one->kv_bytes);
    EXPECT_NE(six->describe().find("6 sequences of 1000 tokens at once"), std::string::npos)
        << six->describe();
    // A session's recurrent state for each sequence and a few beside them, whatever the budget.
    EXPECT_EQ(one->state_slots, 1 + PlanOptions::kSpareSessions);
    EXPECT_EQ(six->state_slots, 6 + PlanOptions::kSpareSessions);
    EXPECT_EQ(six->recurrent_bytes, six->state_slots * one->state_slot_bytes);
    // A budget with room for three more sequences' blocks and scratch than one (and the states
    // of six): four.
    o.budget_bytes = one->total() + 3 * (one->kv_bytes + one->per_sequence_bytes) +
                     (six->recurrent_bytes - one->recurrent_bytes) + 1;
    auto four = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(four.ok()) << four.reason();
    EXPECT_EQ(four->pool_sequences(), 4);
    EXPECT_LE(four->total() + 3 * four->per_sequence_bytes, o.budget_bytes);
}

// With a prefix cache on a discrete GPU, what the budget has left goes to more KV blocks (the rows
// snapshots hold) and, where layers are recurrent, to room for the snapshots' state: within the
// budget, with headroom, and all to blocks where no layer is recurrent. Where the device's memory
// is the host's, the cache takes none of it.
TEST(VulkanPlan, GivesWhatIsLeftToAPrefixCache) {
    for (const char* arch : {"qwen35", "llama"}) {
        SCOPED_TRACE(arch);
        dl::test::TinySpec s;
        s.arch = arch;
        if (s.arch == "llama") {
            s.n_layer = 2;
            s.rope_dims = s.head_dim;
            s.rope_freqs = true;
        }
        auto model = dl::test::tiny_model(s);
        Features f = big_device();
        f.max_storage_buffer_range = 1u << 30;
        f.discrete = true;
        PlanOptions o;
        o.n_ctx = 1024;
        o.sequences = 4;
        auto bare = plan(*model, f, Variant::scalar, o);
        ASSERT_TRUE(bare.ok()) << bare.reason();
        o.budget_bytes = bare->total() + 3 * bare->per_sequence_bytes + (64u << 20);
        auto without = plan(*model, f, Variant::scalar, o);
        o.prefix_cache = true;
        auto with = plan(*model, f, Variant::scalar, o);
        ASSERT_TRUE(without.ok() && with.ok());
        EXPECT_EQ(without->snapshot_bytes, 0u);
        EXPECT_EQ(without->kv_blocks, bare->kv_blocks);
        // What the plan without the cache left of the budget (its sequences' and the spare
        // sessions' own scratch counted).
        const double left =
            (double)(o.budget_bytes - without->total() -
                     (o.sequences + PlanOptions::kSpareSessions - 1) * without->per_sequence_bytes);
        const bool recurrent = s.arch == "qwen35";
        const double kv_share = recurrent
                                    ? PlanOptions::kCacheKvShare
                                    : PlanOptions::kCacheKvShare + PlanOptions::kCacheStateShare;
        const uint64_t block = bare->kv_bytes / bare->kv_blocks;
        EXPECT_EQ(with->kv_blocks - bare->kv_blocks, (uint64_t)(left * kv_share) / block);
        EXPECT_EQ(with->snapshot_bytes,
                  recurrent ? (uint64_t)(left * PlanOptions::kCacheStateShare) : 0u);
        // The blocks and snapshots together leave a tenth of what was left.
        const uint64_t taken =
            with->total() +
            (o.sequences + PlanOptions::kSpareSessions - 1) * with->per_sequence_bytes +
            with->snapshot_bytes;
        EXPECT_LE(taken, o.budget_bytes - (uint64_t)(left * 0.1));
        EXPECT_NE(with->describe().find(recurrent ? "prefix-cache snapshots up to" : "KV cache"),
                  std::string::npos)
            << with->describe();
        f.discrete = false;
        auto shared = plan(*model, f, Variant::scalar, o);
        ASSERT_TRUE(shared.ok());
        EXPECT_EQ(shared->kv_blocks, bare->kv_blocks);
        EXPECT_EQ(shared->snapshot_bytes, 0u);
    }
}

// Sessions' recurrent state past what the budget holds beside one sequence's KV cache: fewer
// sessions, not a plan past the budget.
TEST(VulkanPlan, KeepsTheRecurrentStateOfManySessionsWithinTheBudget) {
    dl::test::TinySpec s;
    auto model = dl::test::tiny_model(s);
    ASSERT_GT(model->hp.ssm_n_v_heads, 0);
    Features f = big_device();
    f.max_storage_buffer_range = 1u << 30;
    PlanOptions o;
    o.n_ctx = 1024;
    auto one = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(one.ok()) << one.reason();
    o.sequences = 1000;
    o.budget_bytes = one->total() + 10 * one->state_slot_bytes;  // room for about 14 sessions
    auto many = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(many.ok()) << many.reason();
    EXPECT_LT(many->state_slots, 1000u);
    EXPECT_GE(many->state_slots, 1u + PlanOptions::kSpareSessions);
    EXPECT_LE(many->total(), o.budget_bytes);
}

// The window gives way before the context: halved while the whole context does not fit, not
// below PlanOptions::kMinWindow, and never longer than the context.
TEST(VulkanPlan, HalvesTheWindowBeforeTheContext) {
    dl::test::TinySpec s;
    auto model = dl::test::tiny_model(s);
    const Features f = big_device();
    PlanOptions o;
    o.window = 2048;
    auto full = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(full.ok()) << full.reason();
    EXPECT_EQ(full->window, 2048);
    o.window = 1024;
    auto half = plan(*model, f, Variant::scalar, o);
    o.window = 512;
    auto least = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(half.ok() && least.ok());
    ASSERT_LT(half->total(), full->total());

    o.window = 2048;
    o.budget_bytes = (full->total() + half->total()) / 2;
    auto r = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_EQ(r->window, 1024);
    EXPECT_EQ(r->n_ctx, 4096);
    EXPECT_LE(r->total(), o.budget_bytes);

    // Short of even the shortest window's room: 512 rows, and a shorter context.
    o.budget_bytes = least->total() - 1;
    r = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_EQ(r->window, PlanOptions::kMinWindow);
    EXPECT_LT(r->n_ctx, 4096);

    // A context shorter than the window.
    o.budget_bytes = 0;
    o.n_ctx = 300;
    r = plan(*model, f, Variant::scalar, o);
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_EQ(r->window, 300);
}

// The sorted expert tiles' scratch: a window whose pairs reach PlanOptions::sorted_expert_pairs
// an expert holds the pairs' inputs as F16 rows (and a tile's more), one whose pairs reach
// expert_stacks_f16_pairs the largest layer's gate and up stacks (or its down stack) expanded,
// both in the plan's scratch; one whose pairs do not, nothing.
TEST(VulkanPlan, HoldsTheSortedExpertScratchWhereTheWindowsPairsReachIt) {
    if (!variant_built(Variant::nv_coopmat2)) GTEST_SKIP() << "no NV cooperative matrix 2 build";
    dl::test::TinySpec s = q4_k_spec();
    s.arch = "qwen3moe";
    s.n_layer = 2;
    s.q4_k_m = true;
    s.rope_dims = s.head_dim;
    s.n_ff_exp = 256;
    auto model = dl::test::tiny_model(s);
    Features f = big_device();
    f.nv_coopmat2_blocks = true;
    f.cm2_max_workgroup = 1024;
    f.cm2_granularity_m = f.cm2_granularity_n = f.cm2_granularity_k = 16;
    PlanOptions o;
    o.window = 64;  // 2 experts a row of 8: 16 pairs an expert
    auto off = plan(*model, f, Variant::nv_coopmat2, o);
    ASSERT_TRUE(off.ok()) << off.reason();
    EXPECT_EQ(off->window_experts16_bytes, 0u);
    EXPECT_EQ(off->window_pairs16_bytes, 0u);
    const uint64_t stack = align_up((uint64_t)s.n_expert * s.n_ff_exp * s.n_embd * 2, kBindAlign);
    const uint64_t pairs16 =
        align_up((2 * 64 + Kernels::kSortedTilePairs) * (uint64_t)s.n_embd * 2, kBindAlign);
    for (const auto& [pairs, held] : {std::pair{16u, true}, {4u, true}, {17u, false}}) {
        o.expert_stacks_f16_pairs = o.sorted_expert_pairs = pairs;
        auto p = plan(*model, f, Variant::nv_coopmat2, o);
        ASSERT_TRUE(p.ok()) << p.reason();
        EXPECT_EQ(p->window_experts16_bytes, held ? 2 * stack : 0u) << pairs << " pairs";
        EXPECT_EQ(p->window_pairs16_bytes, held ? pairs16 : 0u) << pairs << " pairs";
        EXPECT_EQ(p->scratch_bytes, off->scratch_bytes + (held ? 2 * stack + pairs16 : 0u))
            << pairs;
    }
}

TEST(VulkanPlan, DeclinesTypesWithoutKernels) {
    dl::test::TinySpec s;
    s.matrix_type = QType::Q3_K;
    s.n_embd = 256;
    s.n_ff = 256;
    s.head_dim = 64;
    s.d_state = 64;
    auto model = dl::test::tiny_model(s);
    auto r = plan(*model, big_device(), Variant::scalar, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.reason().find("q3_K"), std::string::npos) << r.reason();
    EXPECT_NE(r.reason().find("no device kernel"), std::string::npos) << r.reason();
}

TEST(VulkanPlan, DeclinesATensorOverTheStorageRange) {
    dl::test::TinySpec s;
    s.n_vocab = 5000;
    s.n_embd = 64;
    auto model = dl::test::tiny_model(s);
    Features f = big_device();
    f.max_storage_buffer_range = 64 << 10;  // the F32 output matrix is 1.2 MiB
    auto r = plan(*model, f, Variant::scalar, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.reason().find("storage buffer"), std::string::npos) << r.reason();
    // The matrix by its name in the file, and both sizes in bytes.
    EXPECT_NE(r.reason().find(model->output->name), std::string::npos) << r.reason();
    EXPECT_NE(r.reason().find(std::to_string(model->output->nbytes)), std::string::npos)
        << r.reason();
    EXPECT_NE(r.reason().find(std::to_string(64 << 10)), std::string::npos) << r.reason();
}

// Every area of a mixture's activations starts 16-byte aligned, at the 35B-A3B's and the
// Qwen3-30B-A3B's shapes and row counts odd and even: the expert GEMMs read their inputs as vec4s
// only there (a window's down GEMM had left the skinny GEMM's grouped form for the slower tiles
// behind the odd float of the shared expert's gate logit).
TEST(VulkanPlan, AlignsTheMixturesActivations) {
    for (const auto& [n_expert, n_ff_exp, shared] :
         {std::tuple{256, 512, 512}, std::tuple{128, 768, 0}, std::tuple{6, 40, 24}}) {
        Hparams hp;
        hp.arch = shared ? Arch::qwen35 : Arch::qwen3;
        hp.n_embd = 2048;
        hp.n_layer = 2;
        hp.n_head = 16;
        hp.n_head_kv = 2;
        hp.head_dim = 128;
        hp.n_ff = 0;
        hp.ffn_kind = FfnKind::experts;
        hp.n_expert = n_expert;
        hp.n_expert_used = 8 > n_expert ? 2 : 8;
        hp.n_ff_exp = n_ff_exp;
        hp.n_ff_shexp = shared;
        if (shared) {
            hp.ssm_d_state = 128;
            hp.ssm_n_k_heads = 16;
            hp.ssm_n_v_heads = 32;
            hp.ssm_d_inner = 32 * 128;
        }
        for (uint32_t rows : {1u, 3u, 8u, 511u, 512u}) {
            const ActLayout a = act_layout(hp, rows);
            for (const auto& [name, off] : {std::pair{"router", a.router},
                                            {"route", a.route},
                                            {"perm", a.perm},
                                            {"gate_e", a.gate_e},
                                            {"up_e", a.up_e},
                                            {"ffn_e", a.ffn_e},
                                            {"down_e", a.down_e},
                                            {"shared", a.shared},
                                            {"xn_rounded", a.xn_rounded},
                                            {"ffn_e_rounded", a.ffn_e_rounded}})
                EXPECT_EQ(off % 4, 0u)
                    << name << " at " << rows << " rows, " << n_expert << " experts";
            // In order, none overlapping the next.
            EXPECT_GE(a.route, a.router + (uint32_t)n_expert * rows + 1);
            EXPECT_GE(a.perm, a.route + 2 * (uint32_t)hp.n_expert_used * rows);
            EXPECT_GE(a.gate_e, a.perm + (uint32_t)hp.n_expert_used * rows);
            const uint32_t slots = (uint32_t)(hp.n_expert_used * n_ff_exp) * rows;
            EXPECT_GE(a.up_e, a.gate_e + slots);
            EXPECT_GE(a.ffn_e, a.up_e + slots);
            EXPECT_GE(a.down_e, a.ffn_e + slots);
            EXPECT_GE(a.shared, a.down_e + (uint32_t)hp.n_expert_used * 2048 * rows);
        }
    }
}

}  // namespace
}  // namespace dl::vk
