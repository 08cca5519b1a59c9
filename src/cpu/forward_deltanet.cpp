// The Gated DeltaNet steps of the chain's forward pass (model/forward_pass.h; the math in
// shared/design/QWEN35.md): the gates, the causal conv + SiLU, the l2-normed q/k, the gated delta
// rule (the step form for decode, the chunked form for prefill) and the gated RMS norm. The
// projections around them are the pass's project steps.
#include "core/threads.h"
#include "cpu/forward.h"
#include "cpu/ops.h"

namespace dl::cpu {

void deltanet_gates(Pass& p, const LayerParams& lp) {
    ChainSession& s = p.s;
    deltanet::gates(p.T, p.w.gdn.n_v_heads, s.beta.data(), s.g.data(), lp.dt_bias.data(),
                    lp.ssm_a.data(), s.beta.data(), s.g.data());
}

void deltanet_conv(Pass& p, const LayerParams& lp) {
    ChainSession& s = p.s;
    deltanet::conv_silu(p.T, p.w.gdn.conv_dim(), p.model.hp.ssm_conv_kernel, s.qkv.data(),
                        lp.conv1d.data(), s.conv_state[lp.slot].data(), s.qkv.data(), &p.pool);
}

void deltanet_qk_norm(Pass& p) {
    deltanet::normalize_qk(p.w.gdn, p.T, p.s.qkv.data(), &p.pool);
}

void deltanet_scan(Pass& p, const LayerParams& lp) {
    ChainSession& s = p.s;
    const deltanet::Shape& sh = p.w.gdn;
    float* S = s.ssm_state[lp.slot].data();
    if (p.decode) {
        const float* r = s.qkv.data();
        deltanet::step(sh, S, r, r + sh.qk_width(), r + 2 * sh.qk_width(), s.g.data(),
                       s.beta.data(), s.y.data(), &p.pool);
    } else {
        deltanet::chunked_qkv(sh, p.T, p.opt.deltanet_chunk, S, s.qkv.data(), s.g.data(),
                              s.beta.data(), s.y.data(), &p.pool);
    }
}

void deltanet_out_norm(Pass& p, const LayerParams& lp) {
    ChainSession& s = p.s;
    deltanet::gated_norm(p.w.gdn, p.T, s.y.data(), s.z.data(), lp.ssm_norm.data(),
                         p.model.hp.rms_eps, s.y.data(), &p.pool);
}

}  // namespace dl::cpu
