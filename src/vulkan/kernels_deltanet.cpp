// Launchers of the Gated DeltaNet window kernels (see kernels.h, deltanet_rows): conv, L2 norms
// and gates, the scan over the rows, the gated RMSNorm. Push-constant layouts mirror the shaders.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct ConvPush {
    uint32_t conv_dim, n, x_off, conv_off;
};
struct GatesPush {
    uint32_t n_k_heads, n_v_heads, d_k, qkv_off, qkv_row, b_off, a_off, ba_row, dt_off, ssma_off;
};
struct ScanPush {
    uint32_t n_k_heads, n_v_heads, d_v, n, qkv_off, qkv_row, b_off, a_off, ba_row, y_off, y_row;
};
struct GatedNormPush {
    uint32_t n, nrows, x_off, z_off, norm_off;
    float eps;
};

// The largest power of two <= want within the device's workgroup limit.
uint32_t pow2_at_most(const Features& f, uint32_t want) {
    uint32_t limit = std::max<uint32_t>(f.max_workgroup_invocations, 64);
    uint32_t s = 1;
    while (s * 2 <= std::min(want, limit)) s *= 2;
    return s;
}

}  // namespace

std::optional<Decline> Kernels::deltanet_rows_supported(const Features& f, uint32_t d_k,
                                                        uint32_t d_v, uint32_t conv_kernel) {
    if (auto d = deltanet_step_supported(f, d_k, d_v, conv_kernel)) return d;
    if (d_k > 256)
        return Decline{
            fmt::format("DeltaNet key head size {} is over the 256 a thread holds", d_k)};
    return std::nullopt;
}

void Kernels::deltanet_rows(CommandList& cl, const DeltaNetStep& a, View act, View params,
                            View ring, View state, View tok, uint32_t n) {
    const Features& f = dev_.features();
    if (auto d = deltanet_rows_supported(f, a.d_k, a.d_v, a.conv_kernel)) fail("{}", d->reason);
    const uint32_t conv_dim = 2 * a.n_k_heads * a.d_k + a.n_v_heads * a.d_v;
    const uint32_t d_inner = a.n_v_heads * a.d_v;

    const Kernel& conv = pipes_.get("deltanet_conv", 4, sizeof(ConvPush), {a.conv_kernel});
    ConvPush cp{conv_dim, n, a.qkv_off, a.conv_off};
    auto [gx, gy] = grid(f, (conv_dim + 63) / 64);
    cl.dispatch(conv, {act, params, ring, tok}, cp, gx, gy);
    cl.barrier();
    cl.mark("dn conv");

    const Kernel& gates = pipes_.get("deltanet_gates", 2, sizeof(GatesPush), {64});
    GatesPush gp{a.n_k_heads, a.n_v_heads, a.d_k,       a.qkv_off, conv_dim,
                 a.b_off,     a.a_off,     a.n_v_heads, a.dt_off,  a.ssm_a_off};
    cl.dispatch(gates, {act, params}, gp, 2 * a.n_k_heads + 1, n);
    cl.barrier();
    cl.mark("dn gates");

    // Column slices of 32 give the sequential scan more workgroups than there are heads.
    const uint32_t cols = std::min<uint32_t>(a.d_v, 32);
    const Kernel& scan = pipes_.get("deltanet_scan", 2, sizeof(ScanPush), {cols, a.d_k});
    ScanPush sp{a.n_k_heads, a.n_v_heads, a.d_v,       n,       a.qkv_off, conv_dim,
                a.b_off,     a.a_off,     a.n_v_heads, a.y_off, d_inner};
    cl.dispatch(scan, {act, state}, sp, a.n_v_heads, a.d_v / cols);
    cl.barrier();
    cl.mark("dn scan");

    const uint32_t wg = pow2_at_most(f, std::min<uint32_t>(a.d_v, 128));
    const Kernel& gn = pipes_.get("gated_norm", 2, sizeof(GatedNormPush), {wg});
    GatedNormPush np{a.d_v, n * a.n_v_heads, a.y_off, a.z_off, a.norm_off, a.eps};
    auto [nx, ny] = grid(f, n * a.n_v_heads);
    cl.dispatch(gn, {act, params}, np, nx, ny);
}

}  // namespace dl::vk
