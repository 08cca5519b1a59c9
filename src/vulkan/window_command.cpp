// A prefill window's command: the layer chain over up to plan.window rows with GEMM tiles, the
// attention and the DeltaNet scan over the rows, as a plan (plan_window); recorded on a session's
// first window of a size (its recording: window_record.cpp).
#include "vulkan/driver.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "core/error.h"
#include "core/log.h"
#include "vulkan/chain.h"
#include "vulkan/driver_state.h"
#include "vulkan/window_plan.h"

namespace dl::vk {

// The plan of one prefill window of m rows at positions tok[0] .. tok[0]+m-1, token ids in the
// window id buffer: the same chain as the token command with GEMM tiles in place of GEMVs and
// the row kernels of attention and DeltaNet. Logits of the last row go to the session's logits
// buffer, or of every row to the window logits buffer when `all`. A step's plan (`step`): its
// first decode_rows rows are decode tokens of as many sequences, the rest prompt chunks of one
// session each (segment j: chunk j, recorded with that session); the head then runs over the
// decode rows and each chunk's last row, copied in after them, and samples every such row.
WindowPlan ResidentDriver::plan_window(int64_t n_ctx, uint32_t m, bool all, const StepRows* step,
                                       bool host_logits) const {
    const bool batch = step != nullptr;
    if (batch && !all) fail("a batch plans every row's logits");
    const uint32_t batch_rows = batch ? step->decode_rows : 0;
    // The prompt chunks: their first rows and lengths, the session's n_ctx of each.
    std::vector<StepRows::Chunk> chunks;
    if (batch)
        chunks = step->chunks;
    else
        chunks.push_back({m, n_ctx});
    uint32_t rows_planned = batch_rows;
    for (const StepRows::Chunk& c : chunks) rows_planned += c.rows;
    if (rows_planned != m) fail("a window of {} rows planned as {}", m, rows_planned);
    const uint32_t head_rows = batch ? batch_rows + (uint32_t)chunks.size() : m;
    const Hparams& hp = model_->hp;
    Kernels& K = *w_->kernels;
    const Weights& W = *w_;
    const Variant var = plan_.variant;
    const Variant attn_var =
        Kernels::attention_variant(dev_->features(), var, (uint32_t)hp.head_dim);
    const ActLayout A = act_layout(hp, (uint32_t)plan_.window);
    using Kind = WindowItem::Kind;
    WindowPlan p;
    p.batch = batch;
    uint32_t barriers = 0;  // barriers planned so far (every kind of stage end counts)
    // The split scratch (its counters, then the parts' sums) in use by GEMMs since the last
    // barrier: each needs its own.
    const uint64_t split_counters = plan_.window_split_counters;
    uint64_t counters_used = 0, parts_used = 0;
    // Scratch of its own for a split dispatch of this stage, or none (it runs unsplit) where
    // what is left is too little.
    auto take_split = [&](const Kernels::SplitNeed& need) -> Kernels::SplitScratch {
        if (need.parts == 0 || !W.win_split || counters_used + need.counters > split_counters ||
            split_counters + parts_used + need.parts > W.win_split.size())
            return {};
        Kernels::SplitScratch s{view(W.win_split, counters_used, need.counters),
                                view(W.win_split, split_counters + parts_used, need.parts)};
        counters_used += align_up(need.counters, kBindAlign);
        parts_used += align_up(need.parts, kBindAlign);
        return s;
    };
    auto add = [&](WindowItem it) {
        if (it.kind == Kind::barrier || it.kind == Kind::stage_end || it.kind == Kind::mark_end ||
            it.kind == Kind::host_end) {
            ++barriers;
            counters_used = parts_used = 0;
        }
        p.items.push_back(std::move(it));
    };
    auto end_stage = [&](Kind kind, const char* role) {
        WindowItem it;
        it.kind = kind;
        it.role = role;
        add(it);
    };
    auto stage = [&](const char* role) { end_stage(Kind::stage_end, role); };
    auto barrier = [&] { end_stage(Kind::barrier, ""); };
    // The GEMMs of one stage (gemm_groups) run together, their matrices expanded to F16 for the
    // NV tiles one after another in one slot. The expansions run one group ahead: group g + 1's
    // matrices are expanded into one slot (bandwidth-bound passes) beside group g's GEMMs over
    // the other (tensor-bound). The barrier that group g + 1 needs after its expansions also
    // orders group g's GEMMs before group g + 2 is expanded into their slot. Without gemm_groups_
    // each GEMM is a group of its own.
    std::vector<std::vector<const Tensor*>> groups;
    for (auto& g : gemm_groups(*model_, all)) {
        if (gemm_groups_) {
            groups.push_back(std::move(g));
            continue;
        }
        for (const Tensor* t : g) groups.push_back({t});
    }
    View slot[2];
    if (W.win_w16) {
        const uint64_t half = W.win_w16.size() / 2 / kBindAlign * kBindAlign;
        slot[0] = view(W.win_w16, 0, half);
        slot[1] = view(W.win_w16, half, half);
    }
    // Where each GEMM's expansion goes: a part of its group's slot, or none (not expanded).
    std::vector<std::vector<View>> w16(groups.size());
    std::vector<uint32_t> stage_rows(groups.size());  // weight rows of each group's GEMMs
    // The rows each group multiplies: the head's, head_rows (the last group, when all).
    auto group_rows = [&](size_t g) { return all && g + 1 == groups.size() ? head_rows : m; };
    for (size_t g = 0; g < groups.size(); ++g) {
        uint64_t used = 0;
        for (const Tensor* t : groups[g]) {
            stage_rows[g] += (uint32_t)t->rows();
            View part{};
            if (slot[g % 2].range > used) {
                part = slot[g % 2];
                part.offset += used;
                part.range -= used;
            }
            const uint64_t bytes = (uint64_t)t->rows() * t->cols() * 2;
            if (K.gemm_expands(var, t->type, (uint32_t)t->rows(), (uint32_t)t->cols(),
                               group_rows(g), part)) {
                part.range = bytes;
                used += align_up(bytes, kBindAlign);
            } else {
                part = View{};
            }
            w16[g].push_back(part);
        }
    }
    auto any_expands = [&](size_t g) {
        return std::any_of(w16[g].begin(), w16[g].end(), [](const View& v) { return v.range > 0; });
    };
    size_t group = 0, member = 0;        // the next GEMM planned: groups[group][member]
    size_t expanded = groups.size();     // the group whose matrices were expanded ahead, if any
    uint32_t barriers_at_expansion = 0;  // barriers planned before that expansion
    auto expand = [&](size_t g) {
        for (size_t j = 0; j < groups[g].size(); ++j) {
            if (w16[g][j].range == 0) continue;
            WindowItem it;
            it.kind = Kind::expand;
            it.t = groups[g][j];
            it.w16 = w16[g][j];
            add(it);
        }
        expanded = g;
        barriers_at_expansion = barriers;
    };
    auto gemm = [&](const Tensor* t, uint32_t x_off, bool to_logits, uint32_t y_off, bool acc) {
        if (group >= groups.size() || groups[group][member] != t)
            fail("window GEMM {} ({}) out of the planned order", group, t->name);
        const size_t g = group, j = member;
        if (j == 0 && any_expands(g)) {
            if (expanded != g) {  // not expanded ahead: the slot may still be read
                barrier();
                expand(g);
            }
            if (barriers == barriers_at_expansion) barrier();
        }
        WindowItem it;
        it.kind = Kind::gemm;
        it.t = t;
        it.x_off = x_off;
        it.to_logits = to_logits;
        it.y_off = y_off;
        it.accumulate = acc;
        it.w16 = w16[g][j];
        it.expanded = w16[g][j].range > 0;
        it.stage_rows = stage_rows[g];
        it.rows = group_rows(g) == m ? 0 : group_rows(g);
        it.split = take_split(K.gemm_split_need(var, t->type, (uint32_t)t->rows(),
                                                (uint32_t)t->cols(), group_rows(g), stage_rows[g]));
        add(it);
        if (++member < groups[g].size()) return;
        member = 0;
        ++group;
        if (expand_ahead_ && group < groups.size() && any_expands(group)) expand(group);
    };
    // `rows` rows (0: the window's) of cols values at act[x_off] rounded to bytes, into the F16
    // copy's buffer (y_off kNone) or act[y_off].
    auto round_rows = [&](uint32_t x_off, uint32_t cols, uint32_t rows, uint32_t y_off) {
        WindowItem it;
        it.kind = Kind::round_rows;
        it.x_off = x_off;
        it.y_off = y_off;
        it.n = cols;
        it.rows = rows;
        it.u_off = Kernels::kNone;
        add(it);
    };
    // The F16 copy of the rows the next GEMMs read, when their tiles take F16 (one per input);
    // or the rows rounded to bytes, when they run as the batched GEMV over bytes. (The first
    // `rows` rows: the head's may be fewer than the window's.)
    auto to_f16 = [&](uint32_t x_off, int64_t cols, uint32_t rows) {
        if (K.gemv_batch_reads_bytes((uint32_t)cols, rows)) {
            round_rows(x_off, (uint32_t)cols, rows == m ? 0 : rows, Kernels::kNone);
            end_stage(Kind::mark_end, "round rows");
            return;
        }
        if (!K.gemm_reads_f16(var, (uint32_t)cols)) return;
        // Rows the stage just ended wrote whole (a norm's, a SwiGLU's): that kernel writes the
        // copy too, a stage fewer (a batched step of the 9B had about 100 such stages).
        if (f16_by_writer_ && p.items.size() >= 2 && p.items.back().kind == Kind::stage_end) {
            WindowItem& w = p.items[p.items.size() - 2];
            const bool norm_rows = w.kind == Kind::rms_norm && rows == m && cols == hp.n_embd;
            const bool swiglu_rows = w.kind == Kind::swiglu && w.n == rows * (uint32_t)cols;
            if ((norm_rows || swiglu_rows) && w.y_off == x_off) {
                w.f16_out = true;
                return;
            }
        }
        WindowItem it;
        it.kind = Kind::f16_copy;
        it.x_off = x_off;
        it.n = rows * (uint32_t)cols;
        add(it);
        end_stage(Kind::mark_end, "f16 copy");
    };
    auto norm = [&](const Tensor* w, uint32_t x_off, uint32_t y_off) {
        WindowItem it;
        it.kind = Kind::rms_norm;
        it.t = w;
        it.x_off = x_off;
        it.y_off = y_off;
        add(it);
    };
    Kernels::AttentionRows ar{attention_args(hp, A, W.freq_off, (uint32_t)n_ctx), 0, 0, 0, 0};
    ar.q_row = (uint32_t)hp.n_head * ar.a.q_stride;
    ar.kv_row = (uint32_t)(hp.n_head_kv * hp.head_dim);
    ar.o_row = (uint32_t)(hp.n_head * hp.head_dim);
    ar.gate_row = ar.q_row;

    LayerChain chain;
    chain.stage = stage;
    chain.project_role = "gemm in";
    chain.project = [&](const Tensor* t, uint32_t x_off, uint32_t y_off) {
        gemm(t, x_off, false, y_off, false);
    };
    chain.inputs = [&](uint32_t x_off, int64_t cols) { to_f16(x_off, cols, m); };
    // A batch's rows are sequences of their own: the decode kernels run each row's mixer on its
    // session's state, with the row's activations (row b of each activation) as their input. Each
    // prompt chunk after them runs the window's kernels on its session's state, from its first
    // row (act_layout_from); all in one stage.
    chain.deltanet = [&](int64_t il, const Layer& L) {
        if (batch_rows > 0) {
            WindowItem it;
            it.kind = Kind::deltanet_batch;
            it.layer = il;
            it.deltanet = deltanet_args(A, L);
            it.deltanet.wy_off = Kernels::kNone;
            it.deltanet.state_in_tok = true;  // each row's session's, found through its words
            it.deltanet.rows = batch_rows;
            add(it);
        }
        uint32_t first = batch_rows;
        for (size_t j = 0; j < chunks.size(); ++j) {
            WindowItem it;
            it.kind = Kind::deltanet_rows;
            it.layer = il;
            it.segment = (uint32_t)j;
            it.first_row = first;
            it.rows = chunks[j].rows == m ? 0 : chunks[j].rows;
            add(it);
            first += chunks[j].rows;
        }
    };
    chain.attention = [&](int64_t il, const Layer& L) {
        if (batch_rows > 0) {
            WindowItem it;
            it.kind = Kind::attention_batch;
            it.layer = il;
            Kernels::Attention& a = it.attention.a;
            a = attention_args(hp, A, W.freq_off, (uint32_t)plan_.n_ctx);  // (any session's)
            W.set_qk_norms(a, L);
            a.rows = batch_rows;
            a.q_row = ar.q_row;
            a.k_row = ar.kv_row;
            a.o_row = ar.o_row;
            add(it);
        }
        uint32_t first = batch_rows;
        for (size_t j = 0; j < chunks.size(); ++j) {
            WindowItem it;
            it.kind = Kind::attention_rows;
            it.layer = il;
            it.attention = ar;
            it.attention.a = attention_args(hp, act_layout_from(hp, (uint32_t)plan_.window, first),
                                            W.freq_off, (uint32_t)chunks[j].n_ctx);
            it.segment = (uint32_t)j;
            it.first_row = first;
            it.rows = chunks[j].rows == m ? 0 : chunks[j].rows;
            W.set_qk_norms(it.attention.a, L);
            const Kernels::AttentionSplit split = Kernels::attention_rows_split(
                dev_->features(), K.tuning, it.attention.a, chunks[j].rows, attn_var, 0);
            if (split.parts > 1) it.split = take_split(split.need);
            add(it);
            first += chunks[j].rows;
        }
    };
    auto swiglu = [&](uint32_t gate, uint32_t up, uint32_t out, uint32_t n) {
        WindowItem it;
        it.kind = Kind::swiglu;
        it.x_off = gate;
        it.u_off = up;
        it.y_off = out;
        it.n = n;
        add(it);
    };
    chain.ffn_in = [&](const Layer& L, const Tensor*) {
        gemm(L.ffn_gate, A.xn, false, A.gate, false);
        gemm(L.ffn_up, A.xn, false, A.up, false);
        stage("gemm ffn");
        swiglu(A.gate, A.up, A.ffn, (uint32_t)hp.n_ff * m);
        stage("swiglu");
    };
    // The shared expert's gated add into h (first the experts' weighted sum of the slots' outputs
    // at sum_off, unless kNone), then the next norm of h into xn, in the same workgroups.
    auto shared_expert_add = [&](const Layer& L, const Tensor* next_norm, uint32_t sum_off) {
        WindowItem sh;
        sh.kind = Kind::shared_expert_add;
        sh.t = L.ffn_gate_inp_shexp;
        sh.x_off = A.xn;
        sh.u_off = A.shared;
        sh.y_off = A.h;
        sh.n = m;
        sh.sum_off = sum_off;
        sh.next_norm = next_norm;
        add(sh);
        stage("experts sum");
    };
    // A mixture of experts over the rows: the router (and the shared expert's gate and up) as
    // GEMMs; each row's choice, the (row, slot) pairs grouped by expert, so that the expert GEMVs
    // over them find runs of vectors reading one expert's rows; each pair's down projection,
    // then each row's weighted sum, and the shared expert's gated add. Where the pairs are fewer
    // than one an expert, the token's form over the rows instead (in_row_order).
    chain.experts = [&](const Layer& L, const Tensor* next_norm) {
        const uint32_t k = (uint32_t)hp.n_expert_used, n_ff = (uint32_t)hp.n_ff_exp;
        const uint32_t E = (uint32_t)hp.n_embd, n_sh = (uint32_t)hp.n_ff_shexp;
        // Over bytes (Kernels::experts_read_bytes), each expert GEMV reads its input's rows
        // rounded once: xn's beside the router (which reads the same xn), ffn_e's after the
        // SwiGLU.
        // Where the pairs are many per expert (Kernels::experts_use_tiles), the expert GEMMs run
        // as grouped GEMM tiles over F32 rows instead, from a table of tiles the sort writes.
        const Tensor* gate = L.ffn_gate_up_exps ? L.ffn_gate_up_exps : L.ffn_gate_exps;
        const Tensor* up = L.ffn_gate_up_exps ? L.ffn_gate_up_exps : L.ffn_up_exps;
        auto tiles = [&](const Tensor* t) {
            return m > 1 &&
                   K.experts_use_tiles(t->type, (uint32_t)t->cols(), k * m, (uint32_t)hp.n_expert);
        };
        auto bytes = [&](const Tensor* t) {
            return !tiles(t) && K.experts_read_bytes(t->type, (uint32_t)t->cols());
        };
        const bool gate_bytes = bytes(gate) || bytes(up);
        const bool down_bytes = bytes(L.ffn_down_exps);
        // Few pairs an expert (Tuning::expert_sort_pairs; a batched step's decode rows): the
        // pairs in the rows' order, unsorted, and the down projection's SwiGLU and weighted sum
        // in its own GEMV, as the token's decode runs them.
        const bool in_row_order =
            m > 1 && !tiles(gate) && !tiles(up) && !tiles(L.ffn_down_exps) &&
            (uint64_t)k * m < (uint64_t)K.tuning.expert_sort_pairs * hp.n_expert;
        // Many pairs an expert on the NV tiles (Kernels::experts_sorted_cm2, for all three
        // stacks): the pairs' inputs gathered in the experts' order as F16 rows, each expert
        // GEMM writing its outputs in that order too (so its tiles load and store whole
        // matrices), the SwiGLU's F16 copy the down projection's input, and the weighted sums
        // finding each slot's output through its position.
        auto sorted_cm2 = [&](const Tensor* t, uint32_t rows, uint32_t first) {
            return tiles(t) && W.win_pairs16 && (W.win_experts16 || K.tuning.expert_cm2_blocks) &&
                   K.experts_sorted_cm2(var, t->type, (uint32_t)t->cols(), rows,
                                        (uint32_t)t->rows(), first, k * m, (uint32_t)hp.n_expert);
        };
        const bool sorted = m > 1 && sorted_cm2(gate, n_ff, 0) &&
                            sorted_cm2(up, n_ff, L.ffn_gate_up_exps ? n_ff : 0) &&
                            sorted_cm2(L.ffn_down_exps, E, 0);
        // The stacks the tiles read expanded to F16 (Tuning::expert_expand; for the sorted tiles
        // unless Tuning::expert_cm2_blocks has them decode the blocks in their loads): the gate and
        // up stacks beside the router's GEMM, the down stack beside the SwiGLU (the gate and up
        // tiles are done by then), each pass bandwidth-bound where the tiles then decode nothing.
        std::map<const Tensor*, View> expanded;
        uint64_t expand_at = 0;
        auto expand_stack = [&](const Tensor* t) {
            const uint64_t n = (uint64_t)t->rows() * t->cols() * t->ne[2] * 2;
            const bool wanted = sorted ? !K.tuning.expert_cm2_blocks : K.tuning.expert_expand;
            if (!wanted || !W.win_experts16 || !tiles(t) || expanded.count(t) ||
                expand_at + n > W.win_experts16.size())
                return;
            WindowItem it;
            it.kind = Kind::expand;
            it.t = t;
            it.w16 = view(W.win_experts16, expand_at, n);
            add(it);
            expanded[t] = it.w16;
            expand_at += align_up(n, kBindAlign);
        };
        expand_stack(gate);
        expand_stack(up);
        gemm(L.ffn_gate_inp, A.xn, false, A.router, false);
        if (L.ffn_gate_shexp) {
            gemm(L.ffn_gate_shexp, A.xn, false, A.gate, false);
            gemm(L.ffn_up_shexp, A.xn, false, A.up, false);
        }
        if (gate_bytes) round_rows(A.xn, E, m, A.xn_rounded);
        stage("gemm ffn");
        // The choice, the pairs' grouping and the weighted sums: each a kernel over the m rows.
        auto over_rows = [&](Kind kind, uint32_t x_off, uint32_t y_off) {
            WindowItem it;
            it.kind = kind;
            it.x_off = x_off;
            it.y_off = y_off;
            it.n = m;
            add(it);
        };
        over_rows(Kind::moe_route, A.router, A.route);
        if (L.ffn_gate_shexp) swiglu(A.gate, A.up, A.ffn, n_sh * m);
        stage("route");
        if (in_row_order) {
            if (L.ffn_gate_shexp) to_f16(A.ffn, n_sh, m);
        } else {
            over_rows(Kind::moe_sort, A.route, A.perm);
            p.items.back().u_off = tiles(gate) || tiles(up) || tiles(L.ffn_down_exps)
                                       ? A.expert_tiles
                                       : Kernels::kNone;
            if (sorted) {  // (the positions, and a table cut at the sorted tiles' pairs)
                p.items.back().inv_off = A.inv;
                p.items.back().rows = Kernels::kSortedTilePairs;
            }
            if (L.ffn_gate_shexp) to_f16(A.ffn, n_sh, m);
            stage("sort");
            if (sorted) {
                WindowItem it;
                it.kind = Kind::moe_gather;
                it.x_off = A.xn;
                it.u_off = A.perm;
                it.n = E;
                add(it);
                stage("gather");
            }
        }
        auto experts = [&](const Tensor* t, uint32_t rows, uint32_t first, uint32_t x_off,
                           bool per_slot, uint32_t y_off, uint32_t rounded) {
            WindowItem it;
            it.kind = Kind::gemv_experts;
            it.t = t;
            it.experts = expert_args(hp, A, t, rows, first, x_off, per_slot, y_off, false, m);
            if (in_row_order) it.experts.perm_off = Kernels::kNone;
            if (sorted) {
                it.kind = Kind::gemm_experts_sorted;
                it.u_off = A.expert_tiles;
                it.experts.x_off = 0;  // (halves of the pairs' buffer)
                if (auto e = expanded.find(t); e != expanded.end()) {
                    it.w16 = e->second;
                    it.experts.type = QType::F16;
                }
            } else if (tiles(t)) {
                it.kind = Kind::gemm_experts;
                it.u_off = A.expert_tiles;
                if (auto e = expanded.find(t); e != expanded.end()) {
                    it.w16 = e->second;
                    it.experts.type = QType::F16;
                }
            } else if (bytes(t)) {
                it.experts.x_bytes = true;
                it.experts.x_off = rounded;
            }
            add(it);
        };
        experts(gate, n_ff, 0, A.xn, false, A.gate_e, A.xn_rounded);
        experts(up, n_ff, L.ffn_gate_up_exps ? n_ff : 0, A.xn, false, A.up_e, A.xn_rounded);
        if (L.ffn_gate_shexp) gemm(L.ffn_down_shexp, A.ffn, false, A.shared, false);
        stage("experts");
        if (in_row_order) {
            // The down projection adds the row's weighted sum into h, forming each slot's SwiGLU
            // as it reads the gates and ups, or over it rounded to bytes once
            // (Tuning::expert_down_rounded_rows).
            WindowItem down;
            down.kind = Kind::gemv_experts;
            down.t = L.ffn_down_exps;
            const uint32_t rounded_from = K.tuning.expert_down_rounded_rows;
            if (down_bytes && rounded_from && m >= rounded_from) {
                round_rows(A.gate_e, n_ff, k * m, A.ffn_e_rounded);
                p.items.back().u_off = A.up_e;
                stage("round rows");
                down.experts =
                    expert_args(hp, A, down.t, E, 0, A.ffn_e_rounded, true, A.h, true, m);
                down.experts.x_bytes = true;
            } else {
                down.experts = expert_args(hp, A, down.t, E, 0, A.gate_e, true, A.h, true, m);
                down.experts.up_off = A.up_e;
            }
            add(down);
        } else {
            swiglu(A.gate_e, A.up_e, A.ffn_e, k * n_ff * m);
            if (sorted) p.items.back().f16_out = p.items.back().to_pairs16 = true;
            // The gate and up stacks are read: the down stack goes in their place.
            expanded.clear();
            expand_at = 0;
            expand_stack(L.ffn_down_exps);
            stage("swiglu");
            if (down_bytes) {
                round_rows(A.ffn_e, n_ff, k * m, A.ffn_e_rounded);
                stage("round rows");
            }
            experts(L.ffn_down_exps, E, 0, A.ffn_e, true, A.down_e, A.ffn_e_rounded);
        }
        stage("experts down");
        // The experts' sum (unless the down projection added it), the shared expert and the next
        // norm at once.
        if (L.ffn_gate_shexp) {
            shared_expert_add(L, next_norm, in_row_order ? Kernels::kNone : A.down_e);
            if (sorted) p.items[p.items.size() - 2].inv_off = A.inv;
            return;
        }
        if (!in_row_order) {
            over_rows(Kind::moe_sum, A.down_e, A.h);
            if (sorted) p.items.back().inv_off = A.inv;
            stage("experts sum");
        }
        norm(next_norm, A.h, A.xn);
        stage("norm");
    };
    chain.add_norm = [&](const Tensor* t, Act, uint32_t x_off, int64_t cols, const Tensor* norm_w) {
        to_f16(x_off, cols, m);
        gemm(t, x_off, false, A.h, true);
        stage("gemm out");
        norm(norm_w, A.h, A.xn);
        stage("norm");
    };

    if (expand_ahead_ && !groups.empty() && any_expands(0)) expand(0);  // beside the embedding
    WindowItem embed;
    embed.kind = Kind::embed;
    embed.t = model_->tok_embd;
    add(embed);
    stage("embed");
    norm(model_->layers[0].attn_norm, A.h, A.xn);
    stage("norm");
    record_layers(*model_, A, chain);
    // xn holds the output norm of every row.
    if (all) {
        // Each chunk's last row after the decode rows: the head's rows (in order, so no copy
        // overwrites a row still to be copied: chunk j's last row lies past row batch_rows + j).
        uint32_t end = batch_rows;
        for (size_t j = 0; batch && j < chunks.size(); ++j) {
            end += chunks[j].rows;
            if (end - 1 == batch_rows + j) continue;  // already in place
            WindowItem it;
            it.kind = Kind::copy_row;
            it.x_off = A.xn + (end - 1) * (uint32_t)hp.n_embd;
            it.y_off = A.xn + (batch_rows + (uint32_t)j) * (uint32_t)hp.n_embd;
            it.n = (uint32_t)hp.n_embd;
            add(it);
        }
        to_f16(A.xn, hp.n_embd, head_rows);
        gemm(model_->output, A.xn, true, 0, false);
        if (batch) {  // each row's next token, and its logits when asked
            stage("head");
            WindowItem sample;
            sample.kind = Kind::sample_batch;
            sample.n = head_rows;
            add(sample);
            if (host_logits) {
                WindowItem it;
                it.kind = Kind::logits_to_host;
                it.n = head_rows;
                add(it);
            }
        }
    } else {  // only the last row: one GEMV
        WindowItem it;
        it.kind = Kind::head_gemv;
        it.t = model_->output;
        it.x_off = A.xn + (m - 1) * (uint32_t)hp.n_embd;
        add(it);
    }
    end_stage(Kind::host_end, "head");
    if (group != groups.size())
        fail("the window planned {} of its {} GEMM groups", group, groups.size());
    return p;
}

// The command of a prefill window of m rows (plan_window), recorded once a session and size.
CommandList& ResidentDriver::window_command(Session& s, uint32_t m, bool all, bool queue) {
    auto key = std::make_pair(m, all);
    auto it = s.window_cmds.find(key);
    if (it != s.window_cmds.end()) return *it->second;
    const auto t0 = std::chrono::steady_clock::now();
    auto cmd = std::make_unique<CommandList>(*dev_);
    Session* sessions[] = {&s};
    record_window(*cmd, plan_window(s.n_ctx, m, all), sessions, m, queue);
    log::debug(
        "vulkan: the window command of {} rows recorded in {:.3f} ms", m,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return *s.window_cmds.emplace(key, std::move(cmd)).first->second;
}

}  // namespace dl::vk
