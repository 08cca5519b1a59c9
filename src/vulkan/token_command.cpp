// The decode token command's plan: one token's whole forward pass as stages of dispatches, with
// the fusions of Fusions applied where the shapes allow (token_record.cpp records it once a
// session; it is replayed per token).
#include "vulkan/driver.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "vulkan/chain.h"
#include "vulkan/driver_state.h"

namespace dl::vk {

// The plan of a session's decode token command: the whole forward pass of one token at tok[0]
// (id tok[1]), then either the head into the device logits and the choice of the next token from
// them (tok[2]; parameters at tok[kSampleParams..]) or, when asked, the head into the host's
// logits. short_attn: the attention in its short-context form (positions below s.short_until).
TokenPlan ResidentDriver::plan_token(const Session& s, bool host_logits, bool short_attn) const {
    const Hparams& hp = model_->hp;
    Kernels& K = *w_->kernels;
    const Weights& W = *w_;
    const ActLayout A = act_layout(hp, 1);
    Kernels::Attention at = attention_args(hp, A, W.freq_off, (uint32_t)s.n_ctx);
    if (short_attn) {  // its splits sized for the positions it runs at
        at.n_ctx = (uint32_t)s.short_until;
        at.heads_a_group = 1;
    }
    using Kind = TokenDispatch::Kind;
    TokenPlan p;
    p.stages.emplace_back();  // the stage being planned
    auto add = [&](TokenDispatch d) { p.stages.back().dispatches.push_back(std::move(d)); };
    auto stage = [&](const char* role, bool to_host = false) {
        p.stages.back().role = role;
        p.stages.back().to_host = to_host;
        p.stages.emplace_back();
    };
    auto matrix = [&](const Tensor* t) {
        const Placement* pl = plan_.find(t);
        DL_ASSERT(pl);
        return PlannedMatrix{
            t, t->type, pl->slab, pl->offset, pl->bytes, (uint32_t)t->rows(), (uint32_t)t->cols()};
    };
    // A gate and up pair as one GEMV with the SwiGLU as its epilogue (x and y left to the
    // caller), where the plan keeps them in one slab with the same type and shape.
    auto swiglu_pair = [&](const Tensor* gate, const Tensor* up) -> std::optional<TokenDispatch> {
        const Placement *g = plan_.find(gate), *u = plan_.find(up);
        if (gate->type != up->type || g->slab != u->slab || gate->ne != up->ne) return {};
        const uint64_t lo = std::min(g->offset, u->offset);
        const uint64_t hi = std::max(g->offset + g->bytes, u->offset + u->bytes);
        TokenDispatch d;
        d.kind = Kind::gemv_swiglu;
        d.m = PlannedMatrix{
            gate, gate->type, g->slab, lo, hi - lo, (uint32_t)gate->rows(), (uint32_t)gate->cols()};
        d.g_off = g->offset - lo;
        d.u_off = u->offset - lo;
        return d;
    };
    auto gemv = [&](const Tensor* t, uint32_t x_off, uint32_t y_off, bool acc,
                    std::optional<PlannedQ8> q8 = {}) {
        TokenDispatch d;
        d.kind = Kind::gemv;
        d.m = matrix(t);
        d.x_off = x_off;
        d.y_off = y_off;
        d.accumulate = acc;
        d.q8 = q8;
        add(d);
    };
    auto swiglu = [&](uint32_t gate, uint32_t up, uint32_t out, uint32_t n) {
        TokenDispatch d;
        d.kind = Kind::swiglu;
        d.g_off = gate;
        d.u_off = up;
        d.y_off = out;
        d.n = n;
        add(d);
    };
    auto norm = [&](const Tensor* w, uint32_t x_off, uint32_t y_off) {
        TokenDispatch d;
        d.kind = Kind::rms_norm;
        d.norm = w;
        d.x_off = x_off;
        d.y_off = y_off;
        add(d);
    };
    // Norms the GEMVs after them take (Kernels::gemv_normed): where every GEMV that reads a
    // norm's output takes x as int8, each normalizes h itself as it quantizes it, so the GEMV
    // before the norm ends with no epilogue (no workgroup waits for all the others, no serial
    // tail) and the first norm takes no stage.
    const auto readers = norm_readers(*model_);
    auto normed_by_readers = [&](const Tensor* norm_w) {
        if (!fusions_.norm_epilogue || !fusions_.norm_in_readers) return false;
        for (const Tensor* t : readers.at(norm_w))
            if (K.gemv_x_for(t->type, (uint32_t)t->cols()) != Kernels::GemvX::bytes) return false;
        return true;
    };
    // The norm the GEMVs reading xn apply to h themselves (none: xn holds the normalized h).
    const Tensor* pending = nullptr;
    // h quantized to int8 times the pending norm's weights at A.h_bytes by the GEMV that wrote
    // it, for its readers (Kernels::GemvRounding::out_norm): where that GEMV and every reader of
    // the norm run on the tiled GEMV (fusions_.residual_q8_out).
    bool h_rounded = false;
    auto rounds_h = [&](const Tensor* writer, const Tensor* norm_w) {
        if (!fusions_.residual_q8_out || !norm_w || writer->rows() % 16 ||
            writer->rows() < (int64_t)fusions_.residual_q8_out_min ||
            !K.gemv_tiled_for(writer->type, (uint32_t)writer->cols()))
            return false;
        for (const Tensor* t : readers.at(norm_w))
            if (!K.gemv_tiled_for(t->type, (uint32_t)t->cols())) return false;
        return true;
    };
    // The FFN activations quantized to int8 at A.ffn_bytes by the pair that wrote them, for the
    // down projection (fusions_.ffn_q8_out).
    bool ffn_rounded = false;
    // The gated RMSNorm of the DeltaNet layer just planned, for its output projection to apply
    // (fusions_.gated_norm_in_output; none: the step applied it); or, after an attention layer,
    // that form with no factor (fusions_.shared_output_pipeline).
    std::optional<Kernels::GemvGatedIn> gated;
    // Where the mixer just planned left its output quantized to int8 for its output projection,
    // and the count of such projections that one adds to: the DeltaNet step at A.y_bytes
    // (fusions_.deltanet_q8_out), the attention at A.o_bytes (fusions_.attention_q8_out); kNone:
    // the projection quantizes the floats.
    uint32_t mixer_q8 = Kernels::kNone;
    uint32_t* mixer_count = nullptr;
    // The form of a DeltaNet layer's output projection over the step's int8 output (its
    // weights' type and row length, its gated norm's shape), which a later attention layer's
    // output projection of the same type and length takes with no factor
    // (fusions_.shared_output_pipeline).
    struct DeltaNetOutputForm {
        QType t;
        int64_t cols;
        Kernels::GemvGatedIn in;
    };
    std::optional<DeltaNetOutputForm> deltanet_output;  // the last DeltaNet layer's, if any
    // W · xn into y[y_off ..]; share: its part of its stage's weight bytes (Kernels::gemv).
    auto gemv_xn = [&](const PlannedMatrix& m, TokenOutput y, uint32_t y_off, float share = 1.f) {
        TokenDispatch d;
        d.m = m;
        d.y = y;
        d.y_off = y_off;
        d.share = share;
        if (!pending) {
            d.kind = Kind::gemv;
            d.x_off = A.xn;
        } else {
            d.kind = Kind::gemv_normed;
            d.norm = pending;
            d.x_off = h_rounded ? A.h_bytes : A.h;
            if (h_rounded) d.q8 = PlannedQ8{true};
        }
        add(d);
    };
    // A mixer's input projections wait for the end of their stage, where each run of them that
    // lies back to back in one slab (plan()) and writes back to back in act is one GEMV over all
    // their rows (fusions_.merged_input_projections): x is quantized once for the run and the
    // small ones (a DeltaNet layer's beta and alpha) do not wait behind the large ones'
    // workgroups in a grid of their own.
    struct InProj {
        const Tensor* t;
        uint32_t y_off;
    };
    std::vector<InProj> in_proj;
    auto flush_in = [&] {
        std::vector<std::pair<PlannedMatrix, uint32_t>> runs;  // each run and where it writes
        for (size_t i = 0; i < in_proj.size();) {
            PlannedMatrix m = matrix(in_proj[i].t);
            size_t j = i + 1;
            for (; fusions_.merged_input_projections && j < in_proj.size(); ++j) {
                const Tensor* u = in_proj[j].t;
                const Placement* pl = plan_.find(u);
                if (u->type != m.type || u->cols() != m.cols || pl->slab != m.slab ||
                    pl->offset != m.offset + m.bytes ||
                    in_proj[j].y_off != in_proj[i].y_off + m.rows)
                    break;
                m.bytes += pl->bytes;
                m.rows += (uint32_t)u->rows();
            }
            runs.push_back({m, in_proj[i].y_off});
            i = j;
        }
        // The smallest first: a GEMV recorded after a large one starts only as the large one's
        // workgroups leave, and its own latencies then lengthen the stage past the large one's
        // tail (Qwen3-8B's v after its q and k: tg128 +3 % on an H200, docs/perf/history.md).
        std::stable_sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
            return a.first.bytes < b.first.bytes;
        });
        uint64_t total = 0;
        for (const auto& r : runs) total += r.first.bytes;
        for (const auto& [m, y_off] : runs)
            gemv_xn(m, TokenOutput::act, y_off,
                    runs.size() > 1 ? (float)((double)m.bytes / (double)total) : 1.f);
        in_proj.clear();
    };
    auto add_norm = [&](const Tensor* t, Act in, uint32_t x_off, int64_t, const Tensor* norm_w) {
        const char* role = in == Act::ffn ? "gemv down" : "gemv out";
        pending = normed_by_readers(norm_w) ? norm_w : nullptr;
        // The FFN pair quantized its rows for this GEMV only where it reads them that way.
        PlannedQ8 q8;
        q8.x_q8 = in == Act::ffn && ffn_rounded;
        ffn_rounded = false;
        if (q8.x_q8) {
            x_off = A.ffn_bytes;
            ++p.ffn_q8_reads;
        }
        // The new h quantized for the readers of the next norm.
        h_rounded = pending && rounds_h(t, pending);
        if (h_rounded) {
            q8.out_off = A.h_bytes;
            q8.out_norm = pending;
            ++p.residual_q8_writes;
        }
        if (mixer_q8 != Kernels::kNone) {  // (chain.deltanet, chain.attention)
            DL_ASSERT(x_off == A.y || x_off == A.o);
            q8.x_q8 = true;
            x_off = mixer_q8;
            ++*mixer_count;
            mixer_q8 = Kernels::kNone;
        }
        const bool with_q8 = q8.x_q8 || h_rounded;
        TokenDispatch d;
        d.m = matrix(t);
        d.x_off = x_off;
        d.y_off = A.h;
        d.accumulate = true;
        if (gated) {  // where the next norm is its readers' (chain.deltanet, chain.attention)
            DL_ASSERT(pending);
            d.kind = Kind::gemv_gated;
            d.gated = *gated;
            if (with_q8) d.q8 = q8;
            add(d);
            ++(gated->ss_off != Kernels::kNone ? p.gated_norm_reads : p.shared_output_pipeline);
            gated.reset();
            stage(role);
            return;
        }
        if (pending || !fusions_.norm_epilogue) {
            gemv(t, x_off, A.h, true, with_q8 ? std::optional(q8) : std::nullopt);
            stage(role);
            if (pending) return;
            norm(norm_w, A.h, A.xn);
            stage("norm");
            return;
        }
        d.kind = Kind::gemv_fused;
        d.norm = norm_w;
        if (q8.x_q8) d.q8 = q8;
        add(d);
        stage(role);
    };
    LayerChain chain;
    chain.stage = [&](const char* role) {
        flush_in();
        stage(role);
    };
    chain.project_role = "gemv in";
    chain.project = [&](const Tensor* t, uint32_t x_off, uint32_t y_off) {
        if (x_off == A.xn) return in_proj.push_back({t, y_off});
        gemv(t, x_off, y_off, false);
    };
    chain.inputs = [](uint32_t, int64_t) {};
    chain.deltanet = [&](int64_t il, const Layer& L) {
        Kernels::DeltaNetStep a = deltanet_args(A, L);
        // Where the output projection reads x as int8 and the FFN's norm is its readers' (the
        // projection then needs no epilogue of its own).
        if (fusions_.gated_norm_in_output && normed_by_readers(L.ffn_norm) &&
            K.gemv_gates(L.ssm_out->type, (uint32_t)L.ssm_out->cols()) && a.d_v % 16 == 0) {
            a.ss_off = A.y_ss;
            const uint32_t groups = K.deltanet_groups(a.d_v, true);
            gated = Kernels::GemvGatedIn{A.y_ss, a.d_v, groups, a.eps};
            if (fusions_.deltanet_q8_out && (a.d_v / groups) % 16 == 0 &&
                K.gemv_tiled_for(L.ssm_out->type, (uint32_t)L.ssm_out->cols())) {
                a.round_y = true;
                a.y_off = mixer_q8 = A.y_bytes;
                mixer_count = &p.deltanet_q8_reads;
                if (fusions_.shared_output_pipeline)
                    deltanet_output = DeltaNetOutputForm{
                        L.ssm_out->type, L.ssm_out->cols(),
                        Kernels::GemvGatedIn{Kernels::kNone, a.d_v, groups, a.eps}};
            }
        }
        TokenDispatch d;
        d.kind = Kind::deltanet_step;
        d.layer = il;
        d.deltanet = a;
        add(d);
    };
    chain.attention = [&](int64_t il, const Layer& L) {
        Kernels::Attention a = at;
        W.set_qk_norms(a, L);
        if (fusions_.attention_q8_out && a.head_dim % 16 == 0 &&
            K.gemv_tiled_for(L.wo->type, (uint32_t)L.wo->cols())) {
            a.round_off = mixer_q8 = A.o_bytes;
            mixer_count = &p.attention_q8_reads;
            if (deltanet_output && L.wo->type == deltanet_output->t &&
                L.wo->cols() == deltanet_output->cols && normed_by_readers(L.ffn_norm))
                gated = deltanet_output->in;
        }
        TokenDispatch d;
        d.kind = Kind::attention;
        d.layer = il;
        d.attention = a;
        // The short-context form's pipeline created right after this one, where a command in
        // that form follows: created when that command was recorded, after all of this one's,
        // the 9B's tokens in it ran 0.8 % slower on an H200 (docs/perf/history.md 2026-12-04
        // (05:30)).
        if (!short_attn && s.short_until > 0) {
            Kernels::Attention one = a;
            one.n_ctx = (uint32_t)s.short_until;
            one.heads_a_group = 1;
            d.prepare_after = one;
        }
        add(d);
    };
    chain.ffn_in = [&](const Layer& L, const Tensor* next_norm) {
        // Fused: one GEMV dispatch for both matrices with the SwiGLU as its epilogue.
        std::optional<TokenDispatch> pair = swiglu_pair(L.ffn_gate, L.ffn_up);
        if (fusions_.norm_epilogue && pair) {
            const uint32_t rows = pair->m.rows, cols = pair->m.cols;
            // The pair quantizes its rows to int8 for the down projection where that reads them
            // so (as a fused GEMV where the norm after it is its epilogue).
            const Tensor* down = L.ffn_down;
            ffn_rounded =
                fusions_.ffn_q8_out && K.gemv_rounds(L.ffn_gate->type, rows, cols, true, pending) &&
                K.gemv_path(down->type, (uint32_t)down->rows(), (uint32_t)down->cols(), false,
                            false, !normed_by_readers(next_norm)) == Kernels::GemvX::bytes;
            PlannedQ8 q8;
            if (ffn_rounded) q8.out_off = A.ffn_bytes;
            q8.x_q8 = pending && h_rounded;
            TokenDispatch& d = *pair;
            d.x_off = !pending ? A.xn : h_rounded ? A.h_bytes : A.h;
            d.y_off = A.ffn;
            d.norm = pending;
            if (ffn_rounded || q8.x_q8) d.q8 = q8;
            add(d);
            stage("gemv ffn");
            return;
        }
        gemv_xn(matrix(L.ffn_gate), TokenOutput::act, A.gate);
        gemv_xn(matrix(L.ffn_up), TokenOutput::act, A.up);
        stage("gemv ffn");
        swiglu(A.gate, A.up, A.ffn, (uint32_t)hp.n_ff);
        stage("swiglu");
    };
    chain.experts = [&](const Layer& L, const Tensor* next_norm) {
        // The router and the shared expert read xn itself.
        if (pending) {
            norm(pending, A.h, A.xn);
            stage("norm");
            pending = nullptr;
        }
        h_rounded = false;
        const uint32_t n_ff = (uint32_t)hp.n_ff_exp;
        // The shared expert's gate and up as one GEMV with the SwiGLU as its epilogue.
        std::optional<TokenDispatch> shared_pair;
        if (L.ffn_gate_shexp) shared_pair = swiglu_pair(L.ffn_gate_shexp, L.ffn_up_shexp);
        if (shared_pair) {
            shared_pair->x_off = A.xn;
            shared_pair->y_off = A.ffn;
        }
        // The router's choice in its GEMV's last workgroup (Fusions::router_top_k), where the
        // shared expert needs no SwiGLU stage of its own either.
        const bool fused_router = fusions_.router_top_k && L.ffn_gate_inp->type == QType::F32 &&
                                  (!L.ffn_gate_shexp || shared_pair);
        // The shared expert joins h in the experts' weighted sum, its gate's logit a row of the
        // router's dispatch (Fusions::experts_sum_epilogue).
        const bool shared_in_sum =
            L.ffn_gate_shexp && fused_router && fusions_.experts_sum_epilogue;
        if (fused_router) {
            TokenDispatch r;
            r.kind = Kind::moe_router;
            r.m = matrix(L.ffn_gate_inp);
            r.x_off = A.xn;
            r.u_off = A.router;
            r.y_off = A.route;
            if (shared_in_sum) r.norm = L.ffn_gate_inp_shexp;
            add(r);
            if (shared_pair) add(*shared_pair);
            stage("router");
        } else {
            gemv(L.ffn_gate_inp, A.xn, A.router, false);
            if (L.ffn_gate_shexp) {
                gemv(L.ffn_gate_shexp, A.xn, A.gate, false);
                gemv(L.ffn_up_shexp, A.xn, A.up, false);
            }
            stage("gemv router");
            TokenDispatch r;
            r.kind = Kind::moe_route;
            r.x_off = A.router;
            r.y_off = A.route;
            add(r);
            if (L.ffn_gate_shexp) swiglu(A.gate, A.up, A.ffn, (uint32_t)hp.n_ff_shexp);
            stage("route");
        }
        // Each chosen expert's gate and up rows (from the fused stack, gate rows first, where
        // the file has one), its SwiGLU, then its down rows weighted and summed into h.
        auto experts = [&](const Tensor* t, uint32_t rows, uint32_t first, uint32_t x_off,
                           uint32_t y_off, bool sum, uint32_t up_off = Kernels::kNone) {
            TokenDispatch d;
            d.kind = Kind::gemv_experts;
            d.layer = -1;
            d.m = matrix(t);
            d.experts = expert_args(hp, A, t, rows, first, x_off, sum, y_off, sum, 1);
            d.experts.up_off = up_off;
            if (sum && shared_in_sum) {
                d.experts.shared_off = A.shared;
                d.experts.gate_off = A.router + (uint32_t)hp.n_expert;
            }
            add(d);
        };
        if (L.ffn_gate_up_exps) {
            experts(L.ffn_gate_up_exps, n_ff, 0, A.xn, A.gate_e, false);
            experts(L.ffn_gate_up_exps, n_ff, n_ff, A.xn, A.up_e, false);
        } else {
            experts(L.ffn_gate_exps, n_ff, 0, A.xn, A.gate_e, false);
            experts(L.ffn_up_exps, n_ff, 0, A.xn, A.up_e, false);
        }
        if (L.ffn_gate_shexp) gemv(L.ffn_down_shexp, A.ffn, A.shared, false);
        stage("gemv experts");
        // The down projection forms each slot's SwiGLU as it reads the gates and ups.
        experts(L.ffn_down_exps, (uint32_t)hp.n_embd, 0, A.gate_e, A.h, true, A.up_e);
        stage("gemv experts down");
        if (L.ffn_gate_shexp && !shared_in_sum) {  // with the next norm of h into xn
            TokenDispatch d;
            d.kind = Kind::shared_expert_add;
            d.norm = L.ffn_gate_inp_shexp;
            d.x_off = A.xn;
            d.u_off = A.shared;
            d.y_off = A.h;
            d.n = (uint32_t)hp.n_embd;
            d.next_norm = next_norm;
            add(d);
            stage("shared expert");
            return;
        }
        // The next norm by the GEMVs that read it, where they norm x themselves.
        if (fusions_.experts_sum_epilogue && normed_by_readers(next_norm)) {
            pending = next_norm;
            return;
        }
        norm(next_norm, A.h, A.xn);
        stage("norm");
    };
    chain.add_norm = add_norm;

    TokenDispatch embed;
    embed.kind = Kind::embed;
    embed.m = matrix(model_->tok_embd);
    add(embed);
    stage("embed");
    // The first attn_norm; every later norm ends the GEMV before it or is taken by the GEMVs
    // after it.
    if (normed_by_readers(model_->layers[0].attn_norm)) {
        pending = model_->layers[0].attn_norm;
    } else {
        norm(model_->layers[0].attn_norm, A.h, A.xn);
        stage("norm");
    }
    record_layers(*model_, A, chain);
    // The logits for the host, written by the head into host memory (as the window command's
    // last row is): a copy after the head took a stage of its own, tg128 -2 % on an H200
    // (docs/perf/history.md, 2026-12-03 night). Or the token's choice from them on the device:
    // whoever asks for the logits chooses from them itself (decode), so that command does not also
    // sample.
    gemv_xn(matrix(model_->output),
            host_logits ? TokenOutput::host_logits : TokenOutput::device_logits, 0);
    if (host_logits) {
        stage("head", true);
    } else {
        stage("head");
        TokenDispatch d;
        d.kind = Kind::sample;
        add(d);
        stage("sample", true);
    }
    p.stages.pop_back();  // the empty stage after the last
    return p;
}

}  // namespace dl::vk
