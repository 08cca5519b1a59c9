// The two mixers of the Qwen3.5 hybrid (see shared/design/QWEN35.md):
// gated attention — W_q yields [q | gate] per head; q and k are RMS-normed per head (weights with
// the +1 folded in), the first rope_dims dims rotate NeoX-style, and the attention output is
// multiplied by sigmoid(gate) before W_o;
// Gated DeltaNet — projections, causal conv + SiLU, l2-normed q/k, the gated delta rule (step form
// for decode, chunked form for prefill) and the gated RMS norm, then W_ssm_out.
#include "core/threads.h"
#include "cpu/forward.h"
#include "cpu/ops.h"

namespace dl::cpu {

void attention_qwen35(Pass& p, int64_t il) {
    const Hparams& hp = p.model.hp;
    const Layer& L = p.model.layers[il];
    const LayerParams& lp = p.w.layers[il];
    ChainSession& s = p.s;
    const int64_t D = hp.head_dim, qw = p.w.q_width, T = p.T;

    // The loader requires attn_q_norm / attn_k_norm on every attention layer, so both norms apply.
    project_qkv(p, L);
    norm_and_rope_qk(p, lp, 2 * D, /*neox=*/true);
    store_kv_and_attend(p, lp.slot, s.q.data(), qw, 2 * D);
    const int64_t ow = hp.n_head * D;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < hp.n_head; ++h) {
            float* oh = s.o.data() + t * ow + h * D;
            const float* gate = s.q.data() + t * qw + h * 2 * D + D;
            for (int64_t i = 0; i < D; ++i) oh[i] *= sigmoid(gate[i]);
        }
    s.act.set(s.o.data(), T, ow);
    matmul(*L.wo, s.act, s.out.data(), hp.n_embd, p.pool);
}

void deltanet_qwen35(Pass& p, int64_t il) {
    const Hparams& hp = p.model.hp;
    const Layer& L = p.model.layers[il];
    const LayerParams& lp = p.w.layers[il];
    ChainSession& s = p.s;
    const deltanet::Shape& sh = p.w.gdn;
    const int64_t T = p.T, cd = sh.conv_dim(), vw = sh.v_width(), H_v = sh.n_v_heads;

    s.act.set(s.xn.data(), T, hp.n_embd);
    matmul(*L.ssm_qkv, s.act, s.qkv.data(), cd, p.pool);
    matmul(*L.ssm_z, s.act, s.z.data(), vw, p.pool);
    matmul(*L.ssm_beta, s.act, s.beta.data(), H_v, p.pool);
    matmul(*L.ssm_alpha, s.act, s.g.data(), H_v, p.pool);

    deltanet::gates(T, H_v, s.beta.data(), s.g.data(), lp.dt_bias.data(), lp.ssm_a.data(),
                    s.beta.data(), s.g.data());
    deltanet::conv_silu(T, cd, hp.ssm_conv_kernel, s.qkv.data(), lp.conv1d.data(),
                        s.conv_state[lp.slot].data(), s.qkv.data(), &p.pool);
    deltanet::normalize_qk(sh, T, s.qkv.data(), &p.pool);
    float* S = s.ssm_state[lp.slot].data();
    if (p.decode) {
        const float* r = s.qkv.data();
        deltanet::step(sh, S, r, r + sh.qk_width(), r + 2 * sh.qk_width(), s.g.data(),
                       s.beta.data(), s.y.data(), &p.pool);
    } else {
        deltanet::chunked_qkv(sh, T, p.opt.deltanet_chunk, S, s.qkv.data(), s.g.data(),
                              s.beta.data(), s.y.data(), &p.pool);
    }
    deltanet::gated_norm(sh, T, s.y.data(), s.z.data(), lp.ssm_norm.data(), hp.rms_eps, s.y.data(),
                         &p.pool);
    s.act.set(s.y.data(), T, vw);
    matmul(*L.ssm_out, s.act, s.out.data(), hp.n_embd, p.pool);
}

}  // namespace dl::cpu
