// Where a step's activations lie (see act_layout.h).
#include "vulkan/act_layout.h"

#include <algorithm>

#include "core/align.h"
#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

// An activation offset (floats) rounded up to a 16-byte boundary.
uint32_t vec4_aligned(uint32_t floats) {
    return (uint32_t)align_up(floats, 4);
}

}  // namespace

ActLayout act_layout(const Hparams& hp, uint32_t rows) {
    ActLayout a;
    const uint32_t E = (uint32_t)hp.n_embd;
    a.h = 0;
    a.xn = E * rows;
    const uint32_t base = 2 * E * rows;
    uint32_t end = base;
    if (hp.ssm_n_v_heads > 0) {
        a.qkv = base;
        a.z = a.qkv + (uint32_t)hp.conv_dim() * rows;
        a.beta = a.z + (uint32_t)hp.ssm_d_inner * rows;
        a.alpha = a.beta + (uint32_t)hp.ssm_n_v_heads * rows;
        a.y = a.alpha + (uint32_t)hp.ssm_n_v_heads * rows;
        a.y_ss = a.y + (uint32_t)hp.ssm_d_inner * rows;
        a.conv = a.y_ss + (uint32_t)hp.ssm_d_inner;
        a.dn_wy = a.conv + (uint32_t)hp.conv_dim() * rows;
        const uint32_t hv = (uint32_t)hp.ssm_n_v_heads;
        end = std::max(end, a.dn_wy + Kernels::deltanet_wy_floats(hv, (uint32_t)hp.ssm_d_state,
                                                                  (uint32_t)hp.ssm_d_inner / hv) *
                                          rows);
    }
    const uint32_t hd = (uint32_t)hp.head_dim;
    const uint32_t qw = (uint32_t)hp.q_width();
    const uint32_t kvw = (uint32_t)hp.n_head_kv * hd, ow = (uint32_t)hp.n_head * hd;
    a.q = base;
    a.k = a.q + qw * rows;
    a.v = a.k + kvw * rows;
    a.qo = a.v + kvw * rows;
    a.o = a.qo + ow * rows;
    end = std::max(end, a.o + ow * rows);
    const uint32_t n_ff = (uint32_t)std::max(hp.n_ff, hp.n_ff_shexp);
    a.gate = base;
    a.up = a.gate + n_ff * rows;
    a.ffn = a.up + n_ff * rows;
    end = std::max(end, a.ffn + n_ff * rows);
    if (hp.ffn_kind == FfnKind::experts) {
        const uint32_t k = (uint32_t)hp.n_expert_used, slots = k * (uint32_t)hp.n_ff_exp * rows;
        // Each area 16-byte aligned (the router's logits end with one odd float, the shared
        // expert's gate logit): the expert GEMVs read their inputs as vec4s only there, and the
        // skinny GEMM's grouped form runs only there (elsewhere a window's GEMMs take the grouped
        // tiles, 3.5x slower on an H100).
        a.router = vec4_aligned(end);
        a.route = vec4_aligned(a.router + (uint32_t)hp.n_expert * rows + 1);
        a.perm = vec4_aligned(a.route + 2 * k * rows);
        a.inv = vec4_aligned(a.perm + k * rows);
        a.gate_e = vec4_aligned(a.inv + k * rows);
        a.up_e = vec4_aligned(a.gate_e + slots);
        a.ffn_e = vec4_aligned(a.up_e + slots);
        a.down_e = vec4_aligned(a.ffn_e + slots);
        a.shared = vec4_aligned(a.down_e + k * E * rows);
        end = a.shared + E * rows;
        a.xn_rounded = vec4_aligned(end);
        end = a.xn_rounded + Kernels::rounding_floats(E) * rows;
        a.ffn_e_rounded = vec4_aligned(end);
        end = a.ffn_e_rounded + Kernels::rounding_floats((uint32_t)hp.n_ff_exp) * k * rows;
        a.expert_tiles = end;
        end += Kernels::expert_tiles_words(k * rows, (uint32_t)hp.n_expert);
    }
    // Past everything a stage overwrites, 16-byte aligned.
    a.ffn_bytes = vec4_aligned(end);
    end = a.ffn_bytes + Kernels::rounding_floats(n_ff);
    a.h_bytes = vec4_aligned(end);
    end = a.h_bytes + Kernels::normed_rounding_floats((uint32_t)hp.n_embd);
    if (hp.ssm_n_v_heads > 0) {
        a.y_bytes = vec4_aligned(end);
        end = a.y_bytes + Kernels::rounding_floats((uint32_t)hp.ssm_d_inner);
    }
    a.o_bytes = vec4_aligned(end);
    end = a.o_bytes + Kernels::rounding_floats(ow);
    a.total = end;
    return a;
}

ActLayout act_layout_from(const Hparams& hp, uint32_t rows, uint32_t first) {
    ActLayout a = act_layout(hp, rows);
    const uint32_t E = (uint32_t)hp.n_embd;
    a.h += first * E;
    a.xn += first * E;
    if (hp.ssm_n_v_heads > 0) {
        const uint32_t hv = (uint32_t)hp.ssm_n_v_heads, d_inner = (uint32_t)hp.ssm_d_inner;
        a.qkv += first * (uint32_t)hp.conv_dim();
        a.z += first * d_inner;
        a.beta += first * hv;
        a.alpha += first * hv;
        a.y += first * d_inner;
        a.conv += first * (uint32_t)hp.conv_dim();
        a.dn_wy += first * Kernels::deltanet_wy_floats(hv, (uint32_t)hp.ssm_d_state, d_inner / hv);
    }
    const uint32_t hd = (uint32_t)hp.head_dim;
    a.q += first * (uint32_t)hp.q_width();
    a.k += first * (uint32_t)hp.n_head_kv * hd;
    a.v += first * (uint32_t)hp.n_head_kv * hd;
    a.qo += first * (uint32_t)hp.n_head * hd;
    a.o += first * (uint32_t)hp.n_head * hd;
    const uint32_t n_ff = (uint32_t)std::max(hp.n_ff, hp.n_ff_shexp);
    a.gate += first * n_ff;
    a.up += first * n_ff;
    a.ffn += first * n_ff;
    return a;
}

uint32_t ActLayout::at(Act a) const {
    switch (a) {
        case Act::h:
        case Act::out:
            return h;  // the projections before a residual add to h
        case Act::xn:
            return xn;
        case Act::q:
            return q;
        case Act::k:
            return k;
        case Act::v:
            return v;
        case Act::o:
            return o;
        case Act::qkv:
            return qkv;
        case Act::z:
            return z;
        case Act::beta:
            return beta;
        case Act::alpha:
            return alpha;
        case Act::y:
            return y;
        case Act::gate:
            return gate;
        case Act::up:
            return up;
        case Act::ffn:
            return ffn;
        case Act::router:
            return router;
        case Act::shared:
            return shared;
        case Act::logits:
            break;
    }
    fail("the activation {} has no place in the device's rows", act_name(a));
}

}  // namespace dl::vk
