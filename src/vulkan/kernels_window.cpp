// Launchers of the prefill window kernels (see kernels.h): the GEMM tiles over native weight
// blocks, attention and Gated DeltaNet over n rows. Push-constant layouts mirror the shaders.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct GemmPush {
    uint32_t m, n, k, row_bytes, x_off, y_off, mode;
};
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

constexpr uint32_t kGemmTile = 64;           // rows and columns of Y per workgroup
constexpr uint32_t kGemmShared = 32 * 1024;  // bytes of shared memory the tiles use

bool gemm_type(QType t) {
    switch (t) {
        case QType::F32:
        case QType::F16:
        case QType::Q4_0:
        case QType::Q8_0:
        case QType::Q4_K:
        case QType::Q5_K:
        case QType::Q6_K:
            return true;
        default:
            return false;
    }
}

std::string gemm_module(QType t, bool coopmat) {
    std::string name(qtype_name(t));
    for (char& c : name) c = (char)std::tolower((unsigned char)c);
    return fmt::format("gemm_{}@{}", name, coopmat ? "khr_coopmat" : "scalar");
}

// The largest power of two <= want within the device's workgroup limit.
uint32_t pow2_at_most(const Features& f, uint32_t want) {
    uint32_t limit = std::max<uint32_t>(f.max_workgroup_invocations, 64);
    uint32_t s = 1;
    while (s * 2 <= std::min(want, limit)) s *= 2;
    return s;
}

}  // namespace

std::optional<Decline> Kernels::gemm_supported(const Features& f, QType t) {
    if (!gemm_type(t))
        return Decline{fmt::format("no GEMM tile kernel for weights of type {}", qtype_name(t))};
    if (f.max_shared_memory < kGemmShared)
        return Decline{fmt::format("the GEMM tiles need {} KiB of shared memory; the device has {}",
                                   kGemmShared / 1024, f.max_shared_memory / 1024)};
    if (f.max_workgroup_invocations < 128)
        return Decline{"the GEMM tiles need 128 threads a workgroup"};
    return std::nullopt;
}

bool Kernels::gemm_uses_coopmat(const Features& f, Variant v) {
    // The tile is split over exactly 4 subgroups, so their size must be fixed and known.
    return v != Variant::scalar && f.supports(Variant::khr_coopmat) &&
           f.min_subgroup_size == f.max_subgroup_size && f.subgroup_size >= 16 &&
           4 * f.subgroup_size <= f.max_workgroup_invocations;
}

void Kernels::gemm(CommandList& cl, Variant v, QType t, View w, uint32_t rows, uint32_t cols,
                   View x, uint32_t x_off, View y, uint32_t y_off, uint32_t n_rows,
                   bool accumulate) {
    const Features& f = dev_.features();
    if (auto d = gemm_supported(f, t)) fail("{}", d->reason);
    bool cm = gemm_uses_coopmat(f, v);
    std::vector<uint32_t> spec;
    if (cm) spec.push_back(4 * f.subgroup_size);
    const Kernel& k = pipes_.get(gemm_module(t, cm), 3, sizeof(GemmPush), spec);
    GemmPush p{n_rows, rows, cols, (uint32_t)row_size(t, cols), x_off, y_off, accumulate ? 1u : 0u};
    cl.dispatch(k, {w, x, y}, p, (rows + kGemmTile - 1) / kGemmTile,
                (n_rows + kGemmTile - 1) / kGemmTile);
}

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
    const Kernel& att = pipes_.get("attn_window", 4, sizeof(AttnWindowPush), {64});
    AttnWindowPush wp{
        a.n_head, a.n_kv,     a.head_dim,    a.qo_off,   a.o_off,
        r.o_row,  a.gate_off, a.gate_stride, r.gate_row, 1.0f / std::sqrt((float)a.head_dim)};
    cl.dispatch(att, {act, k_cache, v_cache, tok}, wp, a.n_head, n);
}

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

    const Kernel& gates = pipes_.get("deltanet_gates", 2, sizeof(GatesPush), {64});
    GatesPush gp{a.n_k_heads, a.n_v_heads, a.d_k,       a.qkv_off, conv_dim,
                 a.b_off,     a.a_off,     a.n_v_heads, a.dt_off,  a.ssm_a_off};
    cl.dispatch(gates, {act, params}, gp, 2 * a.n_k_heads + 1, n);
    cl.barrier();

    // Column slices of 32 give the sequential scan more workgroups than there are heads.
    const uint32_t cols = std::min<uint32_t>(a.d_v, 32);
    const Kernel& scan = pipes_.get("deltanet_scan", 2, sizeof(ScanPush), {cols, a.d_k});
    ScanPush sp{a.n_k_heads, a.n_v_heads, a.d_v,       n,       a.qkv_off, conv_dim,
                a.b_off,     a.a_off,     a.n_v_heads, a.y_off, d_inner};
    cl.dispatch(scan, {act, state}, sp, a.n_v_heads, a.d_v / cols);
    cl.barrier();

    const uint32_t wg = pow2_at_most(f, std::min<uint32_t>(a.d_v, 128));
    const Kernel& gn = pipes_.get("gated_norm", 2, sizeof(GatedNormPush), {wg});
    GatedNormPush np{a.d_v, n * a.n_v_heads, a.y_off, a.z_off, a.norm_off, a.eps};
    auto [nx, ny] = grid(f, n * a.n_v_heads);
    cl.dispatch(gn, {act, params}, np, nx, ny);
}

}  // namespace dl::vk
