// Launchers of the prefill window kernels (see kernels.h): attention over n rows (the GEMM
// tiles: kernels_gemm.cpp; Gated DeltaNet: kernels_deltanet.cpp). Push-constant layouts mirror
// the shaders.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct AttnPrepRowsPush {
    uint32_t n_head, n_kv, head_dim, q_off, q_stride, q_row, k_off, v_off, kv_row, qo_off, qn_off,
        kn_off, freq_off, n_rot;
    float eps;
    uint32_t interleaved;
};
struct AttnWindowPush {
    uint32_t n_head, n_kv, head_dim, q_off, o_off, o_row, gate_off, gate_stride, gate_row;
    float scale;
};

}  // namespace

void Kernels::attention_rows(CommandList& cl, const AttentionRows& r, View act, View params,
                             View k_cache, View v_cache, View tok, uint32_t n) {
    const Attention& a = r.a;
    if (auto d = attention_supported(dev_.features(), a.head_dim, a.n_head, a.n_kv))
        fail("{}", d->reason);
    const Kernel& prep = pipes_.get("attn_prep_rows", 5, sizeof(AttnPrepRowsPush), {64});
    AttnPrepRowsPush pp{a.n_head,   a.n_kv,   a.head_dim,   a.q_off,
                        a.q_stride, r.q_row,  a.k_off,      a.v_off,
                        r.kv_row,   a.qo_off, a.q_norm_off, a.k_norm_off,
                        a.freq_off, a.n_rot,  a.eps,        a.interleaved ? 1u : 0u};
    cl.dispatch(prep, {act, params, k_cache, v_cache, tok}, pp, a.n_head + a.n_kv, n);
    cl.barrier();
    cl.mark("attn prep");
    const Kernel& att = pipes_.get("attn_window", 4, sizeof(AttnWindowPush), {64});
    AttnWindowPush wp{
        a.n_head, a.n_kv,     a.head_dim,    a.qo_off,   a.o_off,
        r.o_row,  a.gate_off, a.gate_stride, r.gate_row, 1.0f / std::sqrt((float)a.head_dim)};
    cl.dispatch(att, {act, k_cache, v_cache, tok}, wp, a.n_head, n);
}

}  // namespace dl::vk
