// A window's recording: a WindowPlan (window_command.cpp) into a command, each item its launcher
// and each stage's end a barrier, mechanically; queued in parts as it goes where asked.
#include "vulkan/driver.h"
#include "vulkan/driver_state.h"
#include "vulkan/window_plan.h"

namespace dl::vk {

void ResidentDriver::record_window(CommandList& cl, const WindowPlan& p,
                                   std::span<Session* const> sessions, uint32_t m, bool queue) {
    const Hparams& hp = model_->hp;
    Kernels& K = *w_->kernels;
    const Weights& W = *w_;
    const Variant var = plan_.variant;
    const Variant attn_var =
        Kernels::attention_variant(dev_->features(), var, (uint32_t)hp.head_dim);
    const ActLayout A = act_layout(hp, (uint32_t)plan_.window);
    const uint32_t E = (uint32_t)hp.n_embd;
    const View act = view(W.win_act), prm = view(W.params);
    // The session of an item's rows (a prompt chunk's), and its token words.
    auto session = [&](const WindowItem& i) -> Session& {
        if (i.segment >= sessions.size())
            fail("a window item of chunk {} has no session", i.segment);
        return *sessions[i.segment];
    };
    const Weights::BatchRows& B = W.batch;
    const View x16 = W.win_x16 ? view(W.win_x16) : View{};
    const View pairs16 = W.win_pairs16 ? view(W.win_pairs16) : View{};
    // Queued in parts as recorded: after stages 1, 2, 4, 8, ... so the parts grow as the
    // device's lead over the recording does (a 9B's window of 512 rows: 2-3 ms of recording, a
    // layer's work 1.3 ms on an H200).
    // (Not under --profile: the device would wait on the recording between parts, and the wait
    // would count as the time of the stage after it.)
    const bool early = queue && early_submit_ && !profile_;
    uint32_t stages = 0, next_part = 1;
    using Kind = WindowItem::Kind;
    if (profile_) cl.enable_timestamps(16 * (uint32_t)hp.n_layer + 16);
    cl.begin(true);
    for (const WindowItem& i : p.items) {
        const Tensor* t = i.t;
        switch (i.kind) {
            case Kind::expand:  // (an expert stack's every matrix, one after another)
                K.dequant_f16(cl, t->type, W.matrix(plan_, t),
                              (uint32_t)(t->rows() * (t->ne.size() > 2 ? t->ne[2] : 1)),
                              (uint32_t)t->cols(), i.w16);
                break;
            case Kind::gemm:
                K.gemm(cl, var, t->type, W.matrix(plan_, t), (uint32_t)t->rows(),
                       (uint32_t)t->cols(), act, i.x_off, x16,
                       i.to_logits ? view(p.batch ? W.batch_logits : W.win_logits) : act, i.y_off,
                       i.rows ? i.rows : m, i.accumulate, i.w16, i.expanded, i.stage_rows, i.split);
                break;
            case Kind::embed:
                K.get_rows(cl, {.type = t->type,
                                .table = W.matrix(plan_, t),
                                .rows = (uint32_t)t->rows(),
                                .cols = E,
                                .ids = view(W.win_ids),
                                .id_off = 0,
                                .out = act,
                                .out_off = A.h,
                                .n = m});
                break;
            case Kind::rms_norm:
                K.rms_norm(cl, {.w = view(W.params, (uint64_t)W.param(t) * 4,
                                          (uint64_t)t->n_elements() * 4),
                                .x = act,
                                .x_off = i.x_off,
                                .x_stride = E,
                                .y = act,
                                .y_off = i.y_off,
                                .y_stride = E,
                                .n = E,
                                .nrows = m,
                                .eps = hp.rms_eps,
                                .h = i.f16_out ? x16 : View{}});
                break;
            case Kind::f16_copy:
                K.f16_copy(cl, act, i.x_off, x16, i.n);
                break;
            case Kind::round_rows:
                if (i.y_off != Kernels::kNone)
                    K.round_rows(cl, act, i.x_off, act, i.y_off, i.n, i.rows ? i.rows : m, i.u_off);
                else if (x16.buffer)
                    K.round_rows(cl, act, i.x_off, x16, 0, i.n, i.rows ? i.rows : m, i.u_off);
                else
                    fail("the window has no buffer for its rounded rows");
                break;
            case Kind::deltanet_rows: {
                const ActLayout Ar = act_layout_from(hp, (uint32_t)plan_.window, i.first_row);
                K.deltanet_rows(cl, deltanet_args(Ar, model_->layers[i.layer]), Ar.conv, act, prm,
                                W.ring(session(i), i.layer, hp), W.state(session(i), i.layer, hp),
                                view(session(i).tok), i.rows ? i.rows : m, K.tuning.deltanet_scan);
                break;
            }
            case Kind::attention_rows:
                K.attention_rows(cl, i.attention, act, prm, view(W.k_pool[i.layer]),
                                 view(W.v_pool[i.layer]), view(session(i).tok), i.rows ? i.rows : m,
                                 attn_var, i.split);
                break;
            case Kind::copy_row:
                cl.transfer_barrier();
                cl.copy(W.win_act, (uint64_t)i.x_off * 4, W.win_act, (uint64_t)i.y_off * 4,
                        (uint64_t)i.n * 4);
                cl.transfer_barrier();
                break;
            case Kind::swiglu:
                K.swiglu(cl, act, i.x_off, act, i.u_off, act, i.y_off, i.n,
                         !i.f16_out     ? View{}
                         : i.to_pairs16 ? pairs16
                                        : x16);
                break;
            case Kind::moe_route:
                K.moe_route(cl, act, i.x_off, (uint32_t)hp.n_expert, (uint32_t)hp.n_expert_used,
                            act, i.y_off, i.n);
                break;
            case Kind::moe_sort:
                K.moe_sort(cl, act, i.x_off, (uint32_t)hp.n_expert_used, (uint32_t)hp.n_expert, i.n,
                           i.y_off, i.u_off, i.inv_off, i.rows ? i.rows : Kernels::kExpertTileRows);
                break;
            case Kind::moe_gather:
                K.moe_gather(cl, act, i.x_off, i.n, (uint32_t)hp.n_expert_used, act, i.u_off,
                             m * (uint32_t)hp.n_expert_used, pairs16, 0);
                break;
            case Kind::gemm_experts_sorted: {
                Kernels::ExpertGemv e = i.experts;
                e.w = i.w16.range > 0 ? i.w16 : W.matrix(plan_, i.t);  // (F16 where expanded)
                e.route = e.y = act;
                e.x = pairs16;
                K.gemm_experts_sorted(cl, e, (uint32_t)(pairs16.range / 2 / e.cols), i.u_off);
                break;
            }
            case Kind::gemv_experts:
            case Kind::gemm_experts: {
                Kernels::ExpertGemv e = i.experts;
                e.w = i.w16.range > 0 ? i.w16 : W.matrix(plan_, i.t);  // (F16 where expanded)
                e.route = e.x = e.y = act;
                if (i.kind == Kind::gemm_experts)
                    K.gemm_experts(cl, var, e, i.u_off);
                else
                    K.gemv_experts(cl, e);
                break;
            }
            case Kind::moe_sum:
                K.moe_sum(cl, act, i.x_off, i.y_off, act, A.route, (uint32_t)hp.n_expert_used,
                          (uint32_t)hp.n_embd, i.n, i.inv_off);
                break;
            case Kind::shared_expert_add:
                K.shared_expert_add(cl, view(W.params), W.param(i.t), act, i.x_off, i.u_off,
                                    i.y_off, (uint32_t)hp.n_embd, i.n,
                                    i.next_norm ? W.param(i.next_norm) : Kernels::kNone, hp.rms_eps,
                                    i.sum_off == Kernels::kNone
                                        ? Kernels::ExpertsSum{}
                                        : Kernels::ExpertsSum{(uint32_t)hp.n_expert_used, i.sum_off,
                                                              A.route, i.inv_off});
                break;
            case Kind::head_gemv:
                K.gemv(cl, {.type = t->type,
                            .w = W.matrix(plan_, t),
                            .rows = (uint32_t)t->rows(),
                            .cols = (uint32_t)t->cols(),
                            .x = act,
                            .x_off = i.x_off,
                            .y = view(session(i).logits),
                            .y_off = 0,
                            .accumulate = false});
                break;
            case Kind::deltanet_batch: {
                Kernels::DeltaNetStep a = i.deltanet;
                a.tok_row = (uint32_t)(B.tok_stride / 4);
                a.counter_row = (uint32_t)(B.counter_stride / 4);
                K.deltanet_step(cl, a, act, prm, view(W.ring_pool[i.layer]),
                                view(W.state_pool[i.layer]), view(B.tok), view(B.counter));
                break;
            }
            case Kind::attention_batch: {
                Kernels::Attention a = i.attention.a;
                a.tok_row = (uint32_t)(B.tok_stride / 4);
                a.part_row = (uint32_t)(B.partials_stride / 4);
                a.counter_row = (uint32_t)(B.counter_stride / 4);
                K.attention(cl, a, act, prm, view(W.k_pool[i.layer]), view(W.v_pool[i.layer]),
                            view(B.partials), view(B.tok), view(B.counter));
                break;
            }
            case Kind::sample_batch:
                K.sample(
                    cl, view(W.batch_logits), 0, (uint32_t)hp.n_vocab, view(B.tok), 2,
                    kSampleParams, view(B.scratch),
                    {i.n, (uint32_t)(B.tok_stride / 4), (uint32_t)hp.n_vocab, B.scratch_stride});
                break;
            case Kind::logits_to_host:
                cl.copy(W.batch_logits, 0, W.win_logits, 0, (uint64_t)i.n * hp.n_vocab * 4);
                break;
            case Kind::barrier:
                cl.barrier();
                break;
            case Kind::stage_end:
                cl.barrier();
                cl.mark(i.role);
                if (early && ++stages == next_part) {
                    cl.submit_early();
                    next_part *= 2;
                }
                break;
            case Kind::mark_end:
                cl.barrier();
                cl.mark(i.role);
                break;
            case Kind::host_end:
                cl.host_barrier();
                cl.mark(i.role);
                break;
        }
    }
    cl.end();
}

}  // namespace dl::vk
