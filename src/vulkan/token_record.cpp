// The decode token command's recording: a TokenPlan (token_command.cpp) into a command, each
// dispatch its launcher and each stage's end a barrier, mechanically.
#include "vulkan/driver.h"
#include "vulkan/driver_state.h"

namespace dl::vk {

// Records a token command's plan: each dispatch its launcher, each stage's end a barrier.
void ResidentDriver::record_token(Session& s, CommandList& cl, const TokenPlan& p,
                                  bool timed_whole) {
    const Hparams& hp = model_->hp;
    Kernels& K = *w_->kernels;
    const Weights& W = *w_;
    const ActLayout A = act_layout(hp, 1);
    const View act = view(s.act), prm = view(W.params), tok = view(s.tok);
    const uint32_t E = (uint32_t)hp.n_embd;
    auto norm_weights = [&](const Tensor* w) {
        return view(W.params, (uint64_t)W.param(w) * 4, (uint64_t)w->n_elements() * 4);
    };
    auto output = [&](TokenOutput y) {
        return y == TokenOutput::host_logits     ? view(s.logits)
               : y == TokenOutput::device_logits ? view(s.logits_dev)
                                                 : act;
    };
    using Kind = TokenDispatch::Kind;
    if (profile_) cl.enable_timestamps(16 * (uint32_t)hp.n_layer + 16, !timed_whole);
    cl.begin(true);
    // The GEMVs that add to h are alone in their stages: they may split over one scratch.
    K.gemv_split = view(s.gemv_split);
    for (const TokenStage& st : p.stages) {
        for (const TokenDispatch& d : st.dispatches) {
            const View w = d.m.first ? W.rows(d.m.slab, d.m.offset, d.m.bytes) : View{};
            Kernels::GemvRounding r;
            if (d.q8) {
                r.x_rounded = d.q8->x_q8;
                r.out_off = d.q8->out_off;
                if (d.q8->out_norm) r.out_norm = norm_weights(d.q8->out_norm);
            }
            const Kernels::Gemv g{.type = d.m.type,
                                  .w = w,
                                  .rows = d.m.rows,
                                  .cols = d.m.cols,
                                  .x = act,
                                  .x_off = d.x_off,
                                  .y = output(d.y),
                                  .y_off = d.y_off,
                                  .accumulate = d.accumulate,
                                  .share = {d.share},
                                  .rounding = d.q8 ? &r : nullptr};
            switch (d.kind) {
                case Kind::embed:  // tok[0] = position, tok[1] = token id
                    K.get_rows(cl, {.type = d.m.type,
                                    .table = w,
                                    .rows = d.m.rows,
                                    .cols = E,
                                    .ids = tok,
                                    .id_off = 1,
                                    .out = act,
                                    .out_off = A.h,
                                    .n = 1});
                    break;
                case Kind::rms_norm:
                    K.rms_norm(cl, {.w = norm_weights(d.norm),
                                    .x = act,
                                    .x_off = d.x_off,
                                    .x_stride = E,
                                    .y = act,
                                    .y_off = d.y_off,
                                    .y_stride = E,
                                    .n = E,
                                    .nrows = 1,
                                    .eps = hp.rms_eps});
                    break;
                case Kind::gemv:
                    K.gemv(cl, g);
                    break;
                case Kind::gemv_normed:
                    K.gemv_normed(cl, g, Kernels::GemvNormIn{norm_weights(d.norm), hp.rms_eps});
                    break;
                case Kind::gemv_fused: {
                    Kernels::GemvFusion fu;
                    fu.norm_w = norm_weights(d.norm);
                    fu.counter = view(s.gemv_counter);
                    fu.xn_off = A.xn;
                    fu.eps = hp.rms_eps;
                    K.gemv_fused(cl, g, fu);
                    break;
                }
                case Kind::gemv_gated:
                    K.gemv_gated(cl, g, d.gated);
                    break;
                case Kind::gemv_swiglu: {
                    const Kernels::GemvNormIn nin{d.norm ? norm_weights(d.norm) : View{},
                                                  hp.rms_eps};
                    K.gemv_swiglu(cl, g, d.g_off, d.u_off, d.norm ? &nin : nullptr);
                    break;
                }
                case Kind::swiglu:
                    K.swiglu(cl, act, (uint32_t)d.g_off, act, (uint32_t)d.u_off, act, d.y_off, d.n);
                    break;
                case Kind::moe_route:
                    K.moe_route(cl, act, d.x_off, (uint32_t)hp.n_expert, (uint32_t)hp.n_expert_used,
                                act, d.y_off, 1);
                    break;
                case Kind::moe_router:
                    K.moe_router(cl, {.w = w,
                                      .act = act,
                                      .route = act,
                                      .counter = view(s.gemv_counter),
                                      .gate_w = prm,
                                      .n_expert = (uint32_t)hp.n_expert,
                                      .k = (uint32_t)hp.n_expert_used,
                                      .n_embd = E,
                                      .xn_off = d.x_off,
                                      .logit_off = (uint32_t)d.u_off,
                                      .route_off = d.y_off,
                                      .counter_idx = Session::kRouterCounter,
                                      .gate_off = d.norm ? W.param(d.norm) : Kernels::kNone});
                    break;
                case Kind::gemv_experts: {
                    Kernels::ExpertGemv e = d.experts;
                    e.w = w;
                    e.route = e.x = e.y = act;
                    K.gemv_experts(cl, e);
                    break;
                }
                case Kind::shared_expert_add:
                    K.shared_expert_add(cl, view(W.params), W.param(d.norm), act, d.x_off,
                                        (uint32_t)d.u_off, d.y_off, d.n, 1,
                                        d.next_norm ? W.param(d.next_norm) : Kernels::kNone,
                                        hp.rms_eps);
                    break;
                case Kind::deltanet_step:
                    K.deltanet_step(cl, d.deltanet, act, prm, W.ring(s, d.layer, hp),
                                    W.state(s, d.layer, hp), tok, view(s.head_counter));
                    break;
                case Kind::attention:
                    K.attention(cl, d.attention, act, prm, view(W.k_pool[d.layer]),
                                view(W.v_pool[d.layer]), view(s.partials), tok,
                                view(s.head_counter));
                    if (d.prepare_after) K.prepare_attention(*d.prepare_after);
                    break;
                case Kind::sample:  // the chosen token at tok[2]
                    K.sample(cl, view(s.logits_dev), 0, (uint32_t)hp.n_vocab, tok, 2, kSampleParams,
                             view(s.sample_scratch));
                    break;
            }
        }
        if (st.to_host)
            cl.host_barrier();
        else
            cl.barrier();
        cl.mark(st.role.c_str());
    }
    cl.end();
    K.gemv_split = {};
}

}  // namespace dl::vk
