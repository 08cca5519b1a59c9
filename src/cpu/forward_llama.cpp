// The attention mixer of llama and qwen3, and the steps every attention mixer shares: the q/k/v
// projections, per-head q/k norm and rotary, and the KV-cache attention. llama files carry q/k rows
// permuted for interleaved-pair rotary; qwen3 files keep the NeoX halves and add an RMS norm per
// query and key head before the rotation.
#include <algorithm>
#include <cmath>

#include "core/threads.h"
#include "cpu/forward.h"
#include "cpu/ops.h"

namespace dl::cpu {

void store_kv_and_attend(Pass& p, int64_t slot, const float* q, int64_t q_stride,
                         int64_t q_head_stride) {
    const Hparams& hp = p.model.hp;
    ChainSession& s = p.s;
    const int64_t D = hp.head_dim, kvw = p.w.kv_width, T = p.T, pos0 = p.pos0;
    const int64_t group = hp.n_head / hp.n_head_kv;
    const bool f32 = p.opt.f32_kv_cache;
    for (int64_t t = 0; t < T; ++t) {
        const int64_t row = (pos0 + t) * kvw;
        if (f32) {
            std::copy_n(s.k.data() + t * kvw, kvw, s.k32[slot].data() + row);
            std::copy_n(s.v.data() + t * kvw, kvw, s.v32[slot].data() + row);
        } else {
            to_f16(s.k.data() + t * kvw, s.k16[slot].data() + row, kvw);
            to_f16(s.v.data() + t * kvw, s.v16[slot].data() + row, kvw);
        }
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(double(D)));
    const int64_t n_ctx = s.n_ctx, ow = hp.n_head * D;
    p.pool.run(T * hp.n_head, [&](int64_t task, int thread) {
        const int64_t t = task / hp.n_head, h = task % hp.n_head, kvh = h / group;
        const float* qh = q + t * q_stride + h * q_head_stride;
        float* oh = s.o.data() + t * ow + h * D;
        float* scores = s.scores.data() + thread * n_ctx;
        const int64_t n_rows = pos0 + t + 1;
        if (f32)
            attend(qh, s.k32[slot].data() + kvh * D, s.v32[slot].data() + kvh * D, kvw, n_rows, D,
                   scale, scores, oh);
        else
            attend(qh, s.k16[slot].data() + kvh * D, s.v16[slot].data() + kvh * D, kvw, n_rows, D,
                   scale, scores, oh);
    });
}

void project_qkv(Pass& p, const Layer& L) {
    ChainSession& s = p.s;
    s.act.set(s.xn.data(), p.T, p.model.hp.n_embd);
    matmul(*L.wq, s.act, s.q.data(), p.w.q_width, p.pool);
    matmul(*L.wk, s.act, s.k.data(), p.w.kv_width, p.pool);
    matmul(*L.wv, s.act, s.v.data(), p.w.kv_width, p.pool);
}

void norm_and_rope_qk(Pass& p, const LayerParams& lp, int64_t q_head_stride, bool neox) {
    const Hparams& hp = p.model.hp;
    ChainSession& s = p.s;
    const int64_t D = hp.head_dim, qw = p.w.q_width, kvw = p.w.kv_width;
    const int64_t n_rot = hp.rope_dims, half = n_rot / 2;
    for (int64_t t = 0; t < p.T; ++t) {
        float* cs = s.rope_cos.data() + t * half;
        float* sn = s.rope_sin.data() + t * half;
        rope_angles(p.pos0 + t, p.w.inv_freq.data(), n_rot, cs, sn);
        auto prepare = [&](float* head, const std::vector<float>& norm) {
            if (!norm.empty()) rmsnorm(head, norm.data(), head, D, hp.rms_eps);
            if (neox)
                rope_neox(head, n_rot, cs, sn);
            else
                rope_interleaved(head, n_rot, cs, sn);
        };
        for (int64_t h = 0; h < hp.n_head; ++h)
            prepare(s.q.data() + t * qw + h * q_head_stride, lp.q_norm);
        for (int64_t h = 0; h < hp.n_head_kv; ++h) prepare(s.k.data() + t * kvw + h * D, lp.k_norm);
    }
}

void attention_llama(Pass& p, int64_t il) {
    const Hparams& hp = p.model.hp;
    const Layer& L = p.model.layers[il];
    const LayerParams& lp = p.w.layers[il];
    ChainSession& s = p.s;
    const int64_t D = hp.head_dim, T = p.T;

    project_qkv(p, L);
    norm_and_rope_qk(p, lp, D, /*neox=*/hp.arch == Arch::qwen3);
    store_kv_and_attend(p, lp.slot, s.q.data(), p.w.q_width, D);
    s.act.set(s.o.data(), T, hp.n_head * D);
    matmul(*L.wo, s.act, s.out.data(), hp.n_embd, p.pool);
}

}  // namespace dl::cpu
