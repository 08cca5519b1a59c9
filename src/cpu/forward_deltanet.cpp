// The Gated DeltaNet steps of the chain's forward pass (model/forward_pass.h; the math in
// shared/design/QWEN35.md): the gates, the causal conv + SiLU, the l2-normed q/k, the gated delta
// rule (the step form for decode, the chunked form for prefill) and the gated RMS norm. The
// projections around them are the pass's project steps.
#include "core/threads.h"
#include "cpu/forward.h"
#include "cpu/ops.h"

namespace dl::cpu {

void deltanet_gates(Pass& p, const LayerParams& lp) {
    Workspace& ws = p.ws;
    deltanet::gates(p.T, p.w.gdn.n_v_heads, ws.beta.data(), ws.g.data(), lp.dt_bias.data(),
                    lp.ssm_a.data(), ws.beta.data(), ws.g.data());
}

void deltanet_conv(Pass& p, const LayerParams& lp) {
    const int64_t C = p.w.gdn.conv_dim();
    for (const Segment& sg : p.segs) {
        float* rows = p.ws.qkv.data() + sg.row0 * C;
        deltanet::conv_silu(sg.n, C, p.model.hp.ssm_conv_kernel, rows, lp.conv1d.data(),
                            sg.s->conv_state[lp.slot].data(), rows, &p.pool);
    }
}

void deltanet_qk_norm(Pass& p) {
    deltanet::normalize_qk(p.w.gdn, p.T, p.ws.qkv.data(), &p.pool);
}

// A single token takes the step form (the decode path); a run of tokens the chunked form.
void deltanet_scan(Pass& p, const LayerParams& lp) {
    Workspace& ws = p.ws;
    const deltanet::Shape& sh = p.w.gdn;
    const int64_t C = sh.conv_dim(), H = sh.n_v_heads, Y = sh.v_width();
    for (const Segment& sg : p.segs) {
        float* S = sg.s->ssm_state[lp.slot].data();
        const float* r = ws.qkv.data() + sg.row0 * C;
        float* g = ws.g.data() + sg.row0 * H;
        float* beta = ws.beta.data() + sg.row0 * H;
        float* y = ws.y.data() + sg.row0 * Y;
        if (sg.n == 1)
            deltanet::step(sh, S, r, r + sh.qk_width(), r + 2 * sh.qk_width(), g, beta, y, &p.pool);
        else
            deltanet::chunked_qkv(sh, sg.n, p.opt.deltanet_chunk, S, r, g, beta, y, &p.pool);
    }
}

void deltanet_out_norm(Pass& p, const LayerParams& lp) {
    Workspace& ws = p.ws;
    deltanet::gated_norm(p.w.gdn, p.T, ws.y.data(), ws.z.data(), lp.ssm_norm.data(),
                         p.model.hp.rms_eps, ws.y.data(), &p.pool);
}

}  // namespace dl::cpu
