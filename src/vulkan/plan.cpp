// The residency plan (see plan.h): checks every tensor against the kernels the device has and
// sums the memory before anything is uploaded.
#include "vulkan/plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/bytes.h"
#include "core/env.h"
#include "quant/quant.h"
#include "vulkan/chain.h"
#include "vulkan/kernels.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {

int64_t PlanOptions::window_from_env() {
    const int64_t w = env::get_int("DELTALLM_VK_WINDOW");
    if (w < 0 || w > 65536) fail("DELTALLM_VK_WINDOW={}: use 0 (no windows) to 65536 rows", w);
    return w;
}

namespace {

constexpr uint64_t kAlign = kBindAlign;

std::string gib(uint64_t b) {
    return fmt::format("{:.2f} GiB", b / double(1ull << 30));
}

}  // namespace

int64_t device_rows(const Tensor& t) {
    int64_t rows = t.rows();
    for (size_t i = 2; i < t.ne.size(); ++i) rows *= t.ne[i];
    return rows;
}

const Placement* Plan::find(const Tensor* t) const {
    for (const Placement& p : matrices)
        if (p.tensor == t) return &p;
    return nullptr;
}

int64_t Plan::pool_sequences() const {
    const uint64_t one = Kernels::kv_blocks((uint64_t)std::max<int64_t>(n_ctx, 1));
    return kv_blocks > 0 ? (int64_t)(kv_blocks / one) : 1;
}

std::string Plan::describe() const {
    // Each further sequence needs its own blocks of n_ctx tokens and its own state; the rest is
    // shared.
    const uint64_t blocks_one = Kernels::kv_blocks((uint64_t)std::max<int64_t>(n_ctx, 1));
    const uint64_t seq_kv = kv_blocks > 0 ? kv_bytes / kv_blocks * blocks_one : 0;
    const uint64_t shared = total() - kv_bytes - recurrent_bytes;
    const uint64_t per_seq = seq_kv + per_sequence_bytes + state_slot_bytes;
    const uint64_t fit =
        budget_bytes > shared && per_seq > 0 ? (budget_bytes - shared) / per_seq : 0;
    const std::string kv =
        kv_blocks > 0 ? fmt::format(
                            "KV cache {} (a pool of {} tokens in blocks of {}: {} "
                            "sequence{} of {} tokens at once)",
                            gib(kv_bytes), kv_blocks * Kernels::kKvBlock, Kernels::kKvBlock,
                            pool_sequences(), pool_sequences() == 1 ? "" : "s", n_ctx)
                      : std::string("no KV cache");
    return fmt::format(
        "weights {} in {} slab{}, parameters {}, {}, recurrent state {}{}, scratch {}: "
        "total {} of {} budget (the budget holds {} sequence{} of {} tokens){}; kernels {}; {}",
        gib(weight_bytes), slabs.size(), slabs.size() == 1 ? "" : "s", gib(param_bytes), kv,
        gib(recurrent_bytes),
        state_slots > 0 ? fmt::format(" ({} sessions)", state_slots) : std::string(),
        gib(scratch_bytes), gib(total()), gib(budget_bytes), fit, fit == 1 ? "" : "s", n_ctx,
        snapshot_bytes > 0
            ? fmt::format("; prefix-cache snapshots up to {} besides", gib(snapshot_bytes))
            : std::string(),
        variant_name(variant),
        window > 0 ? fmt::format("prefill in windows of {} rows{}", window,
                                 window_attention_tensor_cores ? ", attention on tensor cores" : "")
                   : "prefill token by token: " + window_decline);
}

Result<Plan> plan(const Model& model, const Features& f, Variant variant, const PlanOptions& opts) {
    const Hparams& hp = model.hp;
    Plan p;
    p.variant = variant;
    if (std::string why = unsupported_steps(model); !why.empty()) return Decline{why};

    // Matrices: every one needs a GEMV kernel for its type and must fit one storage binding.
    const uint64_t slab_limit =
        std::min<uint64_t>(f.max_storage_buffer_range, f.max_buffer_size) / kAlign * kAlign;
    struct Mat {
        std::string what;
        const Tensor* t;
        int64_t mixer_in;  // the mixer whose input projections this is one of, else -1
    };
    std::vector<Mat> mats;
    for (size_t il = 0; il < model.layers.size(); ++il) {
        const Layer& L = model.layers[il];
        auto add = [&](const char* what, const Tensor* t, bool in = false) {
            if (t)
                mats.push_back({fmt::format("layer {}: {}", il, what), t, in ? (int64_t)il : -1});
        };
        add("ffn_gate", L.ffn_gate);
        add("ffn_up", L.ffn_up);
        add("ffn_down", L.ffn_down);
        add("ffn_gate_inp", L.ffn_gate_inp);
        add("ffn_gate_exps", L.ffn_gate_exps);
        add("ffn_up_exps", L.ffn_up_exps);
        add("ffn_gate_up_exps", L.ffn_gate_up_exps);
        add("ffn_down_exps", L.ffn_down_exps);
        add("ffn_gate_shexp", L.ffn_gate_shexp);
        add("ffn_up_shexp", L.ffn_up_shexp);
        add("ffn_down_shexp", L.ffn_down_shexp);
        // A mixer's input projections in the order the layer chain records them (chain.cpp).
        add("attn_q", L.wq, true);
        add("attn_k", L.wk, true);
        add("attn_v", L.wv, true);
        add("attn_output", L.wo);
        add("attn_qkv", L.ssm_qkv, true);
        add("attn_gate", L.ssm_z, true);
        add("ssm_beta", L.ssm_beta, true);
        add("ssm_alpha", L.ssm_alpha, true);
        add("ssm_out", L.ssm_out);
    }
    mats.push_back({"output", model.output, -1});
    // What a matrix takes on the device (weight_layout.h: tiles are padded to whole tiles).
    auto bytes_of = [](const Tensor* t) {
        return device_bytes(t->type, t->cols(), device_rows(*t));
    };
    for (const auto& [what, t, in] : mats) {
        if (!Kernels::gemv_supports(t->type))
            return Decline{fmt::format("{} in {} has no device kernel", what, qtype_name(t->type))};
        if (bytes_of(t) > slab_limit)
            return Decline{fmt::format(
                "{} ({}) holds {}, more than one storage buffer of this device can span ({}; {} "
                "> {} bytes)",
                what, t->name, human_bytes(bytes_of(t)), human_bytes(slab_limit), bytes_of(t),
                slab_limit)};
        if (t->cols() > (1 << 24) || device_rows(*t) > (1 << 30))
            return Decline{
                fmt::format("{} of {} x {} is too large for the kernels' 32-bit indexing", what,
                            t->rows(), t->cols())};
    }
    if (!Kernels::gemv_supports(model.tok_embd->type))
        return Decline{
            fmt::format("token_embd in {} has no device kernel", qtype_name(model.tok_embd->type))};
    if (model.tok_embd != model.output) mats.push_back({"token_embd", model.tok_embd, -1});

    // Pack the matrices into slabs, in order (first fit into the current slab, else a new one).
    // A layer's FFN gate goes where its up matrix fits after it, so the decode GEMV that reads
    // both (Kernels::gemv_swiglu) finds them in one binding. A mixer's input projection of the
    // same type and row length as the one before it goes right after it, with no gap, where that
    // one's bytes end on the binding alignment: each still starts where it can be bound alone,
    // and together they are one matrix of their rows, which the token command reads in one GEMV
    // (ResidentDriver::record_token). Rows held in tiles join only after whole tiles.
    for (size_t i = 0; i < mats.size(); ++i) {
        const Tensor* t = mats[i].t;
        const uint64_t tb = bytes_of(t);
        if (p.find(t)) continue;
        if (i > 0 && mats[i].mixer_in >= 0 && mats[i - 1].mixer_in == mats[i].mixer_in) {
            const Tensor* prev = mats[i - 1].t;
            const Placement& pp = p.matrices.back();
            if (pp.tensor == prev && prev->type == t->type && prev->cols() == t->cols() &&
                (!tiled(t->type) || prev->rows() % kTileRows == 0) && pp.bytes % kAlign == 0 &&
                pp.slab + 1 == p.slabs.size() && pp.offset + pp.bytes + tb + 4 <= slab_limit) {
                const uint64_t off = pp.offset + pp.bytes;
                p.matrices.push_back({t, pp.slab, off, tb});
                p.slabs.back() = off + tb + 4;
                continue;
            }
        }
        uint64_t need = tb;
        if (mats[i].what.ends_with("ffn_gate") && i + 1 < mats.size() &&
            mats[i + 1].what.ends_with("ffn_up"))
            need = align_up(tb + 4, kAlign) + bytes_of(mats[i + 1].t);
        if (need > slab_limit) need = tb;
        if (p.slabs.empty() || align_up(p.slabs.back(), kAlign) + need > slab_limit)
            p.slabs.push_back(0);
        uint64_t off = align_up(p.slabs.back(), kAlign);
        p.matrices.push_back({t, (uint32_t)(p.slabs.size() - 1), off, tb});
        // Blocks of 18 or 34 bytes are read as 32-bit words: keep 4 spare bytes after each.
        p.slabs.back() = off + tb + 4;
    }
    for (uint64_t& s : p.slabs) s = align_up(s, kAlign);
    for (uint64_t s : p.slabs) p.weight_bytes += s;

    // Small per-channel parameters become F32 (they must be dequantizable on the host).
    uint64_t params = 0;
    for (const Tensor& t : model.tensors()) {
        if (t.ne.size() > 1 && t.name.find("ssm_conv1d") == std::string::npos) continue;
        if (!quant::can_dequantize(t.type))
            return Decline{
                fmt::format("tensor {} in {} cannot be read", t.name, qtype_name(t.type))};
        params += align_up((uint64_t)t.n_elements() * 4, kAlign);
    }
    // Rope inverse frequencies, one table.
    params += align_up((uint64_t)std::max<int64_t>(hp.rope_dims, 2) * 4, kAlign);
    p.param_bytes = params;

    // Kernel shapes.
    int64_t n_attn = 0, n_gdn = 0;
    for (int64_t il = 0; il < hp.n_layer; ++il) (hp.is_recurrent(il) ? n_gdn : n_attn)++;
    if (n_attn > 0) {
        if (hp.head_dim != hp.value_dim && hp.value_dim != 0)
            return Decline{fmt::format("attention key size {} differs from value size {}",
                                       hp.head_dim, hp.value_dim)};
        if (auto d = Kernels::attention_supported(f, (uint32_t)hp.head_dim, (uint32_t)hp.n_head,
                                                  (uint32_t)hp.n_head_kv))
            return *d;
    }
    if (n_gdn > 0) {
        if (auto d = Kernels::deltanet_step_supported(f, (uint32_t)hp.ssm_d_state,
                                                      (uint32_t)(hp.ssm_d_inner / hp.ssm_n_v_heads),
                                                      (uint32_t)hp.ssm_conv_kernel))
            return *d;
    }

    // Recurrent state: S (F32) and the conv ring of K rows per GDN layer, in a pool of slots for
    // each layer (one binding each), a slot for each session open at once.
    if (n_gdn > 0) {
        const uint64_t state_layer = deltanet_state_bytes(hp), ring_layer = conv_ring_bytes(hp);
        const uint64_t most = slab_limit / std::max(state_layer, ring_layer);
        p.state_slots = std::min<uint64_t>(
            (uint64_t)std::max<int64_t>(opts.sequences, 1) + PlanOptions::kSpareSessions, most);
        if (p.state_slots == 0)
            return Decline{
                fmt::format("one DeltaNet layer's state ({}) is more than a binding of "
                            "the device holds ({})",
                            human_bytes(state_layer), human_bytes(slab_limit))};
        p.state_slot_bytes = n_gdn * (state_layer + ring_layer);
        p.recurrent_bytes = p.state_slots * p.state_slot_bytes;
    }

    // Scratch for one decode token: a few activation rows of the widest projection, plus logits.
    uint64_t widest =
        std::max<uint64_t>({(uint64_t)hp.n_embd, (uint64_t)hp.n_ff,
                            (uint64_t)hp.n_head * hp.head_dim * 2, (uint64_t)hp.conv_dim()});
    uint64_t scratch = 8 * widest * 4 + (uint64_t)hp.n_vocab * 4 +
                       Kernels::sample_scratch_bytes((uint32_t)hp.n_vocab);

    // Prefill windows: every matrix needs a GEMM tile kernel, the DeltaNet layers the windowed
    // scan. Otherwise prefill replays the token command (slower, still right).
    p.window = std::max<int64_t>(opts.window, 0);
    auto no_window = [&](std::string why) {
        if (p.window > 0) p.window_decline = std::move(why);
        p.window = 0;
    };
    if (p.window == 0) p.window_decline = "windows are turned off";
    // A window groups its rows' experts in one workgroup (Kernels::moe_sort).
    if (hp.ffn_kind == FfnKind::experts && hp.n_expert > Kernels::kMaxSortExperts)
        no_window(fmt::format("{} experts: a window groups up to {}", hp.n_expert,
                              Kernels::kMaxSortExperts));
    if (hp.ffn_kind == FfnKind::experts) {
        if (hp.n_expert_used > Kernels::kMaxUsed)
            return Decline{fmt::format("{} experts a token: the device kernels take up to {}",
                                       hp.n_expert_used, Kernels::kMaxUsed)};
        for (const auto& [what, t, in] : mats)
            if (t->ne.size() > 2 && !Kernels::experts_supported(t->type, (uint32_t)t->cols()))
                return Decline{fmt::format("{}: no expert GEMV over {} rows of {} values", what,
                                           qtype_name(t->type), t->cols())};
    }
    for (const auto& [what, t, in] : mats)
        if (auto d = Kernels::gemm_supported(f, t->type)) no_window(what + ": " + d->reason);
    if (n_gdn > 0)
        if (auto d = Kernels::deltanet_rows_supported(f, (uint32_t)hp.ssm_d_state,
                                                      (uint32_t)(hp.ssm_d_inner / hp.ssm_n_v_heads),
                                                      (uint32_t)hp.ssm_conv_kernel))
            no_window(d->reason);
    // A window longer than the context would only hold unused rows.
    p.window = std::min<int64_t>(p.window, std::max<int64_t>(opts.n_ctx, 1));
    // The window's scratch: its activation rows, their F16 copy for the cooperative-matrix
    // tiles, and two slots of the F16 expansion of the largest matrix for the NV tiles (one
    // matrix is expanded while the GEMM over the other runs).
    const uint64_t token_scratch = scratch;
    auto plan_window = [&](int64_t w) {
        p.window = w;
        p.window_x16_bytes = p.window_w16_bytes = p.window_split_bytes = p.window_split_counters =
            p.window_pairs16_bytes = p.window_experts16_bytes = 0;
        scratch = token_scratch;
        if (w == 0) return;
        // The scratch of the GEMMs of a stage that split their columns (windows of few rows).
        size_t stage_gemms = 0;
        for (const auto& group : gemm_groups(model, true))
            stage_gemms = std::max(stage_gemms, group.size());
        const Kernels::SplitNeed split = Kernels::gemm_split_scratch(f, (uint32_t)stage_gemms);
        p.window_split_counters = split.counters;
        p.window_split_bytes = split.counters + split.parts;
        scratch += p.window_split_bytes;
        scratch += (uint64_t)act_layout(hp, (uint32_t)w).total * 4;
        int64_t widest_in = 0;
        for (const auto& [what, t, in] : mats) widest_in = std::max(widest_in, t->cols());
        if (Kernels::gemm_uses_coopmat(f, variant))
            p.window_x16_bytes = align_up((uint64_t)w * widest_in * 2, kAlign);
        // The batched GEMV's rows rounded to bytes (at most 64 rows: DELTALLM_VK_GEMM_GEMV_ROWS)
        // share the buffer: 1.5 bytes a value.
        if (f.integer_dot)
            p.window_x16_bytes = std::max<uint64_t>(
                p.window_x16_bytes, align_up((uint64_t)std::min<int64_t>(w, 64) *
                                                 Kernels::rounding_floats((uint32_t)widest_in) * 4,
                                             kAlign));
        scratch += p.window_x16_bytes;
        // (a window reaches `pairs` an expert on average)
        auto reaches = [&](uint32_t pairs) {
            return hp.ffn_kind == FfnKind::experts && pairs > 0 &&
                   hp.n_expert_used * w >= (int64_t)pairs * hp.n_expert;
        };
        if (reaches(opts.sorted_expert_pairs) && Kernels::gemm_uses_cm2(f, variant)) {
            const uint64_t cols = std::max(hp.n_embd, hp.n_ff_exp);
            p.window_pairs16_bytes = align_up(
                ((uint64_t)hp.n_expert_used * w + Kernels::kSortedTilePairs) * cols * 2, kAlign);
            scratch += p.window_pairs16_bytes;
        }
        if (reaches(opts.expert_stacks_f16_pairs)) {
            auto bytes = [](const Tensor* t) {
                return t ? align_up((uint64_t)t->rows() * t->cols() * t->ne[2] * 2, kAlign) : 0;
            };
            for (const Layer& L : model.layers)
                p.window_experts16_bytes = std::max(
                    {p.window_experts16_bytes,
                     bytes(L.ffn_gate_up_exps) + bytes(L.ffn_gate_exps) + bytes(L.ffn_up_exps),
                     bytes(L.ffn_down_exps)});
            scratch += p.window_experts16_bytes;
        }
        if (Kernels::gemm_uses_cm2(f, variant) && w >= Kernels::kGemmExpandRows) {
            uint64_t largest = 0;
            for (const auto& group : gemm_groups(model, false)) {
                uint64_t bytes = 0;
                for (const Tensor* t : group)
                    if (t->type != QType::F16)
                        bytes += align_up((uint64_t)t->rows() * t->cols() * 2, kAlign);
                largest = std::max(largest, bytes);
            }
            p.window_w16_bytes = 2 * largest;
            scratch += p.window_w16_bytes;
        }
    };
    plan_window(p.window);

    const uint64_t budget =
        opts.budget_bytes ? opts.budget_bytes : (uint64_t)(f.device_local_bytes * 0.9);
    p.budget_bytes = budget;
    auto kv_for = [&](int64_t n_ctx) {
        return (uint64_t)n_attn * 2 *
               align_up(Kernels::attention_cache_bytes(n_ctx, hp.n_head_kv, hp.head_dim), kAlign);
    };
    auto partials_for = [&](int64_t n_ctx) {
        uint64_t splits = Kernels::attention_splits((uint32_t)std::min<int64_t>(n_ctx, 1 << 30));
        return n_attn ? (uint64_t)hp.n_head * splits * (hp.head_dim + 2) * 4 : 0;
    };
    int64_t n_ctx = std::max<int64_t>(opts.n_ctx, 1);
    // Each layer's key and value pools are one binding each: a context longer than a binding
    // holds shrinks to it (or declines).
    const uint64_t layer_block = Kernels::kv_block_bytes(hp.n_head_kv, hp.head_dim);
    const int64_t binding_rows =
        n_attn > 0 ? (int64_t)(slab_limit / layer_block) * Kernels::kKvBlock : n_ctx;
    if (n_ctx > binding_rows) {
        if (!opts.shrink_context || binding_rows < 256)
            return Decline{fmt::format(
                "a KV cache of {} tokens is more than one binding of the device holds ({} tokens "
                "in {})",
                n_ctx, binding_rows, gib(slab_limit))};
        n_ctx = binding_rows;
    }
    // Where the whole context does not fit, the window halves first (down to kMinWindow rows: a
    // longer window only makes long prompts faster), then the context shrinks.
    auto fixed_bytes = [&] { return p.weight_bytes + p.param_bytes + p.recurrent_bytes + scratch; };
    while (p.window > PlanOptions::kMinWindow &&
           fixed_bytes() + kv_for(n_ctx) + partials_for(n_ctx) > budget)
        plan_window(std::max<int64_t>(p.window / 2, PlanOptions::kMinWindow));
    // The recurrent state of every session at once must leave room for one sequence's KV cache
    // of the shortest context the plan would shrink to: where it does not, fewer sessions (those
    // past them are refused, naming --parallel). Short of that, the window gave way first
    // (above), and the context does next (below).
    if (p.state_slots > 1) {
        const int64_t some = std::min<int64_t>(n_ctx, 256);
        const uint64_t others =
            fixed_bytes() - p.recurrent_bytes + kv_for(some) + partials_for(some);
        if (others + p.recurrent_bytes > budget) {
            const uint64_t room = budget > others ? (budget - others) / p.state_slot_bytes : 0;
            p.state_slots = std::max<uint64_t>(1, std::min(p.state_slots, room));
            p.recurrent_bytes = p.state_slots * p.state_slot_bytes;
        }
    }
    const uint64_t fixed = fixed_bytes();
    if (fixed + kv_for(n_ctx) + partials_for(n_ctx) > budget) {
        if (!opts.shrink_context || n_attn == 0 || fixed + kv_for(256) + partials_for(256) > budget)
            return Decline{fmt::format(
                "the model needs {} (weights {}, KV cache {} for {} tokens, state and scratch "
                "{}) but the device budget is {}",
                gib(fixed + kv_for(n_ctx) + partials_for(n_ctx)), gib(p.weight_bytes),
                gib(kv_for(n_ctx)), n_ctx, gib(p.param_bytes + p.recurrent_bytes + scratch),
                gib(budget))};
        uint64_t per_token = kv_for(1024) / 1024 + partials_for(1024) / 1024 + 1;
        n_ctx = (int64_t)((budget - fixed) / per_token) / 256 * 256;
        while (n_ctx > 256 && fixed + kv_for(n_ctx) + partials_for(n_ctx) > budget) n_ctx -= 256;
    }
    p.n_ctx = n_ctx;
    p.scratch_bytes = scratch + partials_for(n_ctx);
    p.per_sequence_bytes =
        token_scratch + partials_for(n_ctx) + Kernels::tok_bytes((uint64_t)n_ctx);
    // The paged KV cache's pool: blocks for opts.sequences sequences of n_ctx tokens where the
    // budget holds them and their own state beside it; at least one sequence's. Sequences share
    // the pool, so more of them fit where most are shorter than n_ctx.
    const uint64_t block_bytes =
        (uint64_t)n_attn * 2 * Kernels::kv_block_bytes(hp.n_head_kv, hp.head_dim);
    const uint64_t most_blocks = (uint64_t)binding_rows / Kernels::kKvBlock;
    if (n_attn > 0) {
        const uint64_t one = Kernels::kv_blocks((uint64_t)n_ctx);
        uint64_t blocks = one;
        for (int64_t seq = 2; seq <= opts.sequences; ++seq) {
            const uint64_t more = fixed + (blocks + one) * block_bytes +
                                  (uint64_t)(seq - 1) * p.per_sequence_bytes + partials_for(n_ctx);
            if (more > budget) break;
            blocks += one;
        }
        p.kv_blocks = std::min(blocks, most_blocks);
        p.kv_bytes = p.kv_blocks * block_bytes;
    }
    // A prefix cache's share of what the budget has left: more KV blocks for the rows its
    // snapshots hold, and room for their copies of the recurrent state. Only on a discrete GPU:
    // elsewhere the device's memory is the host's, which the plan does not take for a cache.
    if (opts.prefix_cache && f.discrete) {
        const uint64_t used =
            fixed + partials_for(n_ctx) + p.kv_bytes +
            (uint64_t)(opts.sequences + PlanOptions::kSpareSessions - 1) * p.per_sequence_bytes;
        const double left = budget > used ? (double)(budget - used) : 0.0;
        const bool recurrent = p.state_slot_bytes > 0;
        if (n_attn > 0) {
            const double share = recurrent
                                     ? PlanOptions::kCacheKvShare
                                     : PlanOptions::kCacheKvShare + PlanOptions::kCacheStateShare;
            const uint64_t more = (uint64_t)(left * share) / block_bytes;
            p.kv_blocks = std::min(p.kv_blocks + more, most_blocks);
            p.kv_bytes = p.kv_blocks * block_bytes;
        }
        if (recurrent) p.snapshot_bytes = (uint64_t)(left * PlanOptions::kCacheStateShare);
    }
    // As Kernels::attention_rows decides it: the kernel for this device and head size, and the
    // window's queries, gate and output at 16-byte aligned offsets.
    if (p.window > 0 && n_attn > 0) {
        const ActLayout a = act_layout(hp, (uint32_t)p.window);
        Kernels::Attention at{};
        at.qo_off = a.qo;
        at.o_off = a.o;
        at.gate_off = hp.attn_output_gate ? a.q + (uint32_t)hp.head_dim : Kernels::kNone;
        at.head_dim = (uint32_t)hp.head_dim;
        at.n_head = (uint32_t)hp.n_head;
        at.n_kv = (uint32_t)hp.n_head_kv;
        // The caches are buffers of their own, so they start aligned.
        p.window_attention_tensor_cores =
            Kernels::attention_kernel(f, Kernels::attention_variant(f, variant, at.head_dim), at, 0,
                                      true) != Kernels::WindowAttentionKernel::tiles;
    }
    return p;
}

}  // namespace dl::vk
