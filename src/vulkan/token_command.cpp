// The decode token command: one token's whole forward pass, recorded once a session and replayed
// per token, with the fusions of Fusions applied where the shapes allow.
#include "vulkan/driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <utility>

#include "core/bytes.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "executor/device_driver.h"
#include "model/rope.h"
#include "quant/quant.h"
#include "vulkan/chain.h"
#include "vulkan/driver_state.h"
#include "vulkan/kernels.h"
#include "vulkan/pipeline.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {

// The decode token command of a session: the whole forward pass of one token at tok[0] (id
// tok[1]), then either the head into the device logits and the choice of the next token from
// them (tok[2]; parameters at tok[kSampleParams..]) or, when asked, the head into the host's
// logits.
void ResidentDriver::record_token(Session& session, CommandList& cl, bool host_logits,
                                  bool timed_whole, bool short_attn) {
    Session* s = &session;
    const Hparams& hp = model_->hp;
    Kernels& K = *w_->kernels;
    const Weights& W = *w_;
    const ActLayout A = act_layout(hp, 1);
    Kernels::Attention at = attention_args(hp, A, W.freq_off, (uint32_t)s->n_ctx);
    if (short_attn) {  // its splits sized for the positions it runs at
        at.n_ctx = (uint32_t)s->short_until;
        at.heads_a_group = 1;
    }
    const View act = view(s->act), prm = view(W.params), tok = view(s->tok);
    const uint32_t E = (uint32_t)hp.n_embd;
    auto gemv = [&](const Tensor* t, uint32_t x_off, View y, uint32_t y_off, bool acc,
                    const Kernels::GemvRounding* rounding = nullptr) {
        K.gemv(cl, t->type, W.matrix(plan_, t), (uint32_t)t->rows(), (uint32_t)t->cols(), act,
               x_off, y, y_off, acc, {}, rounding);
    };
    auto norm_weights = [&](const Tensor* w) {
        return view(W.params, (uint64_t)W.param(w) * 4, (uint64_t)w->n_elements() * 4);
    };
    auto norm = [&](const Tensor* w, uint32_t x_off, uint32_t y_off) {
        K.rms_norm(cl, norm_weights(w), act, x_off, E, act, y_off, E, E, 1, hp.rms_eps);
    };
    auto stage = [&](const char* role) {
        cl.barrier();
        cl.mark(role);
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
    auto pending_norm = [&] { return Kernels::GemvNormIn{norm_weights(pending), hp.rms_eps}; };
    // The FFN activations quantized to int8 at A.ffn_bytes by the pair that wrote them, for the
    // down projection (fusions_.ffn_q8_out).
    bool ffn_rounded = false;
    s->ffn_q8_reads = 0;
    s->gated_norm_reads = 0;
    s->deltanet_q8_reads = 0;
    s->attention_q8_reads = 0;
    s->shared_output_pipeline = 0;
    s->residual_q8_writes = 0;
    // The gated RMSNorm of the DeltaNet layer just recorded, for its output projection to apply
    // (fusions_.gated_norm_in_output; none: the step applied it); or, after an attention layer,
    // that form with no factor (fusions_.shared_output_pipeline).
    std::optional<Kernels::GemvGatedIn> gated;
    // Where the mixer just recorded left its output quantized to int8 for its output projection,
    // and the count of such projections that one adds to: the DeltaNet step at A.y_bytes
    // (fusions_.deltanet_q8_out), the attention at A.o_bytes (fusions_.attention_q8_out); kNone:
    // the projection rounds the floats.
    uint32_t mixer_bytes = Kernels::kNone;
    uint32_t* mixer_count = nullptr;
    // The form of a DeltaNet layer's output projection over the step's rounding (its weights'
    // type and row length, its gated norm's shape), which a later attention layer's output
    // projection of the same type and length takes with no factor
    // (fusions_.shared_output_pipeline).
    struct DeltaNetOutputForm {
        QType t;
        int64_t cols;
        Kernels::GemvGatedIn in;
    };
    std::optional<DeltaNetOutputForm>
        deltanet_output;  // the last DeltaNet layer's, where it has one
    // W · xn (rows of cols values of type t at view w) into y[y_off ..]; share: its part of
    // its stage's weight bytes (Kernels::gemv).
    auto gemv_xn = [&](QType t, View w, uint32_t rows, uint32_t cols, View y, uint32_t y_off,
                       vk::GemvPart share = {}) {
        if (!pending) return K.gemv(cl, t, w, rows, cols, act, A.xn, y, y_off, false, share);
        Kernels::GemvRounding r;
        r.x_rounded = h_rounded;
        K.gemv_normed(cl, t, w, rows, cols, act, h_rounded ? A.h_bytes : A.h, y, y_off, false,
                      pending_norm(), share, h_rounded ? &r : nullptr);
    };
    auto gemv_in = [&](const Tensor* t, View y, uint32_t y_off) {
        gemv_xn(t->type, W.matrix(plan_, t), (uint32_t)t->rows(), (uint32_t)t->cols(), y, y_off);
    };
    // A mixer's input projections wait for the end of their stage, where each run of them that
    // lies back to back in one slab (plan()) and writes back to back in act is one GEMV over all
    // their rows (fusions_.merged_input_projections): x is rounded once for the run and the small
    // ones (a DeltaNet layer's beta and alpha) do not wait behind the large ones' workgroups in a
    // grid of their own.
    struct InProj {
        const Tensor* t;
        uint32_t y_off;
    };
    std::vector<InProj> in_proj;
    auto flush_in = [&] {
        struct Run {
            QType t;
            View w;
            uint32_t rows, cols, y_off;
            uint64_t bytes;
        };
        std::vector<Run> runs;
        for (size_t i = 0; i < in_proj.size();) {
            const Tensor* t = in_proj[i].t;
            const Placement* first = plan_.find(t);
            uint64_t bytes = first->bytes;
            uint32_t rows = (uint32_t)t->rows();
            size_t j = i + 1;
            for (; fusions_.merged_input_projections && j < in_proj.size(); ++j) {
                const Tensor* u = in_proj[j].t;
                const Placement* pl = plan_.find(u);
                if (u->type != t->type || u->cols() != t->cols() || pl->slab != first->slab ||
                    pl->offset != first->offset + bytes ||
                    in_proj[j].y_off != in_proj[i].y_off + rows)
                    break;
                bytes += pl->bytes;
                rows += (uint32_t)u->rows();
            }
            runs.push_back({t->type, W.rows(first->slab, first->offset, bytes), rows,
                            (uint32_t)t->cols(), in_proj[i].y_off, bytes});
            i = j;
        }
        // The smallest first: a GEMV recorded after a large one starts only as the large one's
        // workgroups leave, and its own latencies then lengthen the stage past the large one's
        // tail (Qwen3-8B's v after its q and k: tg128 +3 % on an H200, docs/PERF.md).
        std::stable_sort(runs.begin(), runs.end(),
                         [](const Run& a, const Run& b) { return a.bytes < b.bytes; });
        uint64_t total = 0;
        for (const Run& r : runs) total += r.bytes;
        for (const Run& r : runs)
            gemv_xn(r.t, r.w, r.rows, r.cols, act, r.y_off,
                    {runs.size() > 1 ? (float)((double)r.bytes / (double)total) : 1.f});
        in_proj.clear();
    };
    auto add_norm = [&](const Tensor* t, uint32_t x_off, int64_t, const Tensor* norm_w) {
        const char* role = t->name.find("ffn_down") != std::string::npos ? "gemv down" : "gemv out";
        pending = normed_by_readers(norm_w) ? norm_w : nullptr;
        // The FFN pair rounded its rows for this GEMV only where it reads them that way.
        Kernels::GemvRounding r;
        r.x_rounded = x_off == A.ffn && ffn_rounded;
        ffn_rounded = false;
        if (r.x_rounded) {
            x_off = A.ffn_bytes;
            ++s->ffn_q8_reads;
        }
        // The new h rounded for the readers of the next norm.
        h_rounded = pending && rounds_h(t, pending);
        if (h_rounded) {
            r.out_off = A.h_bytes;
            r.out_norm = norm_weights(pending);
            ++s->residual_q8_writes;
        }
        if (mixer_bytes != Kernels::kNone) {  // (chain.deltanet, chain.attention)
            DL_ASSERT(x_off == A.y || x_off == A.o);
            r.x_rounded = true;
            x_off = mixer_bytes;
            ++*mixer_count;
            mixer_bytes = Kernels::kNone;
        }
        const bool with_r = r.x_rounded || h_rounded;
        if (gated) {  // where the next norm is its readers' (chain.deltanet, chain.attention)
            DL_ASSERT(pending);
            K.gemv_gated(cl, t->type, W.matrix(plan_, t), (uint32_t)t->rows(), (uint32_t)t->cols(),
                         act, x_off, act, A.h, true, *gated, with_r ? &r : nullptr);
            ++(gated->ss_off != Kernels::kNone ? s->gated_norm_reads : s->shared_output_pipeline);
            gated.reset();
            stage(role);
            return;
        }
        if (pending || !fusions_.norm_epilogue) {
            gemv(t, x_off, act, A.h, true, with_r ? &r : nullptr);
            stage(role);
            if (pending) return;
            norm(norm_w, A.h, A.xn);
            stage("norm");
            return;
        }
        Kernels::GemvFusion fu;
        fu.norm_w = norm_weights(norm_w);
        fu.counter = view(s->gemv_counter);
        fu.xn_off = A.xn;
        fu.eps = hp.rms_eps;
        K.gemv_fused(cl, t->type, W.matrix(plan_, t), (uint32_t)t->rows(), (uint32_t)t->cols(), act,
                     x_off, act, A.h, true, fu, r.x_rounded ? &r : nullptr);
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
        gemv(t, x_off, act, y_off, false);
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
                a.y_off = mixer_bytes = A.y_bytes;
                mixer_count = &s->deltanet_q8_reads;
                if (fusions_.shared_output_pipeline)
                    deltanet_output = DeltaNetOutputForm{
                        L.ssm_out->type, L.ssm_out->cols(),
                        Kernels::GemvGatedIn{Kernels::kNone, a.d_v, groups, a.eps}};
            }
        }
        K.deltanet_step(cl, a, act, prm, view(s->ring[il]), view(s->state[il]), tok,
                        view(s->head_counter));
    };
    chain.attention = [&](int64_t il, const Layer& L) {
        Kernels::Attention a = at;
        a.q_norm_off = L.q_norm ? W.param(L.q_norm) : Kernels::kNone;
        a.k_norm_off = L.k_norm ? W.param(L.k_norm) : Kernels::kNone;
        if (fusions_.attention_q8_out && a.head_dim % 16 == 0 &&
            K.gemv_tiled_for(L.wo->type, (uint32_t)L.wo->cols())) {
            a.round_off = mixer_bytes = A.o_bytes;
            mixer_count = &s->attention_q8_reads;
            if (deltanet_output && L.wo->type == deltanet_output->t &&
                L.wo->cols() == deltanet_output->cols && normed_by_readers(L.ffn_norm))
                gated = deltanet_output->in;
        }
        K.attention(cl, a, act, prm, view(s->k_cache[il]), view(s->v_cache[il]), view(s->partials),
                    tok, view(s->head_counter));
        // The short-context form's pipeline created right after this one, where a command in
        // that form follows: created when that command was recorded, after all of this one's,
        // the 9B's tokens in it ran 0.8 % slower on an H200 (docs/PERF.md 2026-12-04 (05:30)).
        if (!short_attn && s->short_until > 0) {
            Kernels::Attention one = a;
            one.n_ctx = (uint32_t)s->short_until;
            one.heads_a_group = 1;
            K.prepare_attention(one);
        }
    };
    chain.ffn_in = [&](const Layer& L, const Tensor* next_norm) {
        // Fused: one GEMV dispatch for both matrices with the SwiGLU as its epilogue, where the
        // plan keeps them in one slab with the same type.
        const Placement *g = plan_.find(L.ffn_gate), *u = plan_.find(L.ffn_up);
        if (fusions_.norm_epilogue && L.ffn_gate->type == L.ffn_up->type && g->slab == u->slab &&
            L.ffn_gate->ne == L.ffn_up->ne) {
            const Kernels::GemvNormIn nin = pending ? pending_norm() : Kernels::GemvNormIn{};
            const uint64_t lo = std::min(g->offset, u->offset);
            const uint64_t hi = std::max(g->offset + g->bytes, u->offset + u->bytes);
            const uint32_t rows = (uint32_t)L.ffn_gate->rows(), cols = (uint32_t)L.ffn_gate->cols();
            // The pair quantizes its rows to int8 for the down projection where that reads them so
            // (as a fused GEMV where the norm after it is its epilogue).
            const Tensor* down = L.ffn_down;
            ffn_rounded =
                fusions_.ffn_q8_out && K.gemv_rounds(L.ffn_gate->type, rows, cols, true, pending) &&
                K.gemv_path(down->type, (uint32_t)down->rows(), (uint32_t)down->cols(), false,
                            false, !normed_by_readers(next_norm)) == Kernels::GemvX::bytes;
            Kernels::GemvRounding r;
            if (ffn_rounded) r.out_off = A.ffn_bytes;
            r.x_rounded = pending && h_rounded;
            const uint32_t x_off = !pending ? A.xn : h_rounded ? A.h_bytes : A.h;
            K.gemv_swiglu(cl, L.ffn_gate->type, W.rows(g->slab, lo, hi - lo), g->offset - lo,
                          u->offset - lo, rows, cols, act, x_off, act, A.ffn,
                          pending ? &nin : nullptr, ffn_rounded || r.x_rounded ? &r : nullptr);
            stage("gemv ffn");
            return;
        }
        gemv_in(L.ffn_gate, act, A.gate);
        gemv_in(L.ffn_up, act, A.up);
        stage("gemv ffn");
        K.swiglu(cl, act, A.gate, act, A.up, act, A.ffn, (uint32_t)hp.n_ff);
        stage("swiglu");
    };
    chain.add_norm = add_norm;

    if (profile_) cl.enable_timestamps(16 * (uint32_t)hp.n_layer + 16, !timed_whole);
    cl.begin(true);
    // The GEMVs that add to h are alone in their stages: they may split over one scratch.
    K.gemv_split = view(s->gemv_split);
    // tok[0] = position, tok[1] = token id, tok[2] = the chosen token.
    K.get_rows(cl, model_->tok_embd->type, W.matrix(plan_, model_->tok_embd),
               (uint32_t)model_->tok_embd->rows(), E, tok, 1, act, A.h, 1);
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
    // (docs/PERF.md, 2026-12-03 night). Or the token's choice from them on the device: whoever
    // asks for the logits chooses from them itself (decode), so that command does not also
    // sample.
    gemv_in(model_->output, view(host_logits ? s->logits : s->logits_dev), 0);
    if (host_logits) {
        cl.host_barrier();
        cl.mark("head");
    } else {
        stage("head");
        K.sample(cl, view(s->logits_dev), 0, (uint32_t)hp.n_vocab, tok, 2, kSampleParams,
                 view(s->sample_scratch));
        cl.host_barrier();
        cl.mark("sample");
    }
    cl.end();
    K.gemv_split = {};
}

}  // namespace dl::vk
