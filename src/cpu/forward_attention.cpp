// The attention steps of the chain's forward pass (model/forward_pass.h): the per-head q/k norm,
// the rotary embedding (NeoX halves or, for llama files whose q/k rows are permuted, interleaved
// pairs), the KV cache and the attention itself, and the output gate of gated attention.
#include <algorithm>
#include <cmath>

#include "core/threads.h"
#include "cpu/forward.h"
#include "cpu/ops.h"

namespace dl::cpu {

namespace {

// The stride between query heads in a row of s.q: [q | gate] per head with the output gate.
int64_t q_head_stride(const Hparams& hp) {
    return hp.attn_output_gate ? 2 * hp.head_dim : hp.head_dim;
}

}  // namespace

void qk_norm(Pass& p, const LayerParams& lp) {
    const Hparams& hp = p.model.hp;
    Workspace& s = p.ws;
    const int64_t D = hp.head_dim, qw = p.w.q_width, kvw = p.w.kv_width, qs = q_head_stride(hp);
    for (int64_t t = 0; t < p.T; ++t) {
        for (int64_t h = 0; h < hp.n_head; ++h) {
            float* head = s.q.data() + t * qw + h * qs;
            rmsnorm(head, lp.q_norm.data(), head, D, hp.rms_eps);
        }
        for (int64_t h = 0; h < hp.n_head_kv; ++h) {
            float* head = s.k.data() + t * kvw + h * D;
            rmsnorm(head, lp.k_norm.data(), head, D, hp.rms_eps);
        }
    }
}

void rope(Pass& p) {
    const Hparams& hp = p.model.hp;
    Workspace& s = p.ws;
    const int64_t D = hp.head_dim, qw = p.w.q_width, kvw = p.w.kv_width, qs = q_head_stride(hp);
    const int64_t n_rot = hp.rope_dims, half = n_rot / 2;
    const bool neox = hp.rope_style == RopeStyle::neox;
    for (int64_t t = 0; t < p.T; ++t) {
        float* cs = s.rope_cos.data() + t * half;
        float* sn = s.rope_sin.data() + t * half;
        rope_angles(s.pos[t], p.w.inv_freq.data(), n_rot, cs, sn);
        auto rotate = [&](float* head) {
            if (neox)
                rope_neox(head, n_rot, cs, sn);
            else
                rope_interleaved(head, n_rot, cs, sn);
        };
        for (int64_t h = 0; h < hp.n_head; ++h) rotate(s.q.data() + t * qw + h * qs);
        for (int64_t h = 0; h < hp.n_head_kv; ++h) rotate(s.k.data() + t * kvw + h * D);
    }
}

void attention(Pass& p, const LayerParams& lp) {
    const Hparams& hp = p.model.hp;
    Workspace& ws = p.ws;
    const int64_t D = hp.head_dim, kvw = p.w.kv_width, T = p.T;
    const int64_t qw = p.w.q_width, qs = q_head_stride(hp);
    const int64_t group = hp.n_head / hp.n_head_kv, slot = lp.slot;
    const bool f32 = p.opt.f32_kv_cache;
    // Each row's k and v go into its own sequence's cache at its position.
    for (int64_t t = 0; t < T; ++t) {
        ChainSession& s = *p.segs[(size_t)ws.segment[t]].s;
        const int64_t row = ws.pos[t] * kvw;
        if (f32) {
            std::copy_n(ws.k.data() + t * kvw, kvw, s.k32[slot].data() + row);
            std::copy_n(ws.v.data() + t * kvw, kvw, s.v32[slot].data() + row);
        } else {
            to_f16(ws.k.data() + t * kvw, s.k16[slot].data() + row, kvw);
            to_f16(ws.v.data() + t * kvw, s.v16[slot].data() + row, kvw);
        }
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(double(D)));
    const int64_t ow = hp.n_head * D;
    const int64_t stride = (int64_t)ws.scores.size() / p.pool.size();
    p.pool.run(T * hp.n_head, [&](int64_t task, int thread) {
        const int64_t t = task / hp.n_head, h = task % hp.n_head, kvh = h / group;
        const ChainSession& s = *p.segs[(size_t)ws.segment[t]].s;
        const float* qh = ws.q.data() + t * qw + h * qs;
        float* oh = ws.o.data() + t * ow + h * D;
        float* scores = ws.scores.data() + thread * stride;
        const int64_t n_rows = ws.pos[t] + 1;
        if (f32)
            attend(qh, s.k32[slot].data() + kvh * D, s.v32[slot].data() + kvh * D, kvw, n_rows, D,
                   scale, scores, oh);
        else
            attend(qh, s.k16[slot].data() + kvh * D, s.v16[slot].data() + kvh * D, kvw, n_rows, D,
                   scale, scores, oh);
    });
}

void output_gate(Pass& p) {
    const Hparams& hp = p.model.hp;
    Workspace& s = p.ws;
    const int64_t D = hp.head_dim, qw = p.w.q_width, ow = hp.n_head * D;
    for (int64_t t = 0; t < p.T; ++t)
        for (int64_t h = 0; h < hp.n_head; ++h) {
            float* oh = s.o.data() + t * ow + h * D;
            const float* gate = s.q.data() + t * qw + h * 2 * D + D;
            for (int64_t i = 0; i < D; ++i) oh[i] *= sigmoid(gate[i]);
        }
}

}  // namespace dl::cpu
