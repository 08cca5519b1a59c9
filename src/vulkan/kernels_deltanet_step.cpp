// Launcher of the Gated DeltaNet decode step (shaders/deltanet_step.comp, see
// kernels_deltanet.h); the push-constant layout mirrors the shader. The window:
// kernels_deltanet.cpp.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct DeltaNetPush {
    uint32_t n_k_heads, n_v_heads, qkv_off, z_off, b_off, a_off, y_off, conv_off, dt_off, ssma_off,
        norm_off;
    float eps;
    uint32_t ss_off, tok_row, counter_row;
};

}  // namespace

// The parts a column's d_k rows are cut into (deltanet_step.comp KS) for column groups of cw, so
// a thread holds at most 32 state values in registers.
static uint32_t deltanet_step_parts(const Features& f, uint32_t d_k, uint32_t cw) {
    uint32_t ks = 1;
    while (d_k / ks > 32 && d_k % (ks * 2) == 0 && cw * ks * 2 <= f.max_workgroup_invocations)
        ks *= 2;
    return ks;
}

std::optional<Decline> DeltaNetKernels::deltanet_step_supported(const Features& f, uint32_t d_k,
                                                                uint32_t d_v,
                                                                uint32_t conv_kernel) {
    if (d_v == 0 || (d_v & (d_v - 1)) != 0)
        return Decline{fmt::format("DeltaNet value head size {} is not a power of two", d_v)};
    if (d_v > f.max_workgroup_invocations)
        return Decline{
            fmt::format("DeltaNet value head size {} exceeds the device's {} threads per workgroup",
                        d_v, f.max_workgroup_invocations)};
    if (conv_kernel < 1 || conv_kernel > 16)
        return Decline{fmt::format("DeltaNet conv kernel {} unsupported", conv_kernel)};
    // deltanet_step.comp's shared memory at its widest workgroup (a whole head).
    const uint32_t ks = deltanet_step_parts(f, d_k, d_v);
    const auto bytes =
        module_shared_bytes("deltanet_step", {d_v * ks, d_k, conv_kernel, d_v, d_v, ks});
    if (!bytes) return Decline{"this build cannot size the DeltaNet step's shared memory"};
    if (*bytes > f.max_shared_memory)
        return Decline{
            fmt::format("DeltaNet head sizes {}/{} exceed the device's shared memory", d_k, d_v)};
    return std::nullopt;
}

uint32_t DeltaNetKernels::deltanet_groups(uint32_t d_v, bool split) const {
    if (split && tuning.deltanet_columns > 0 && tuning.deltanet_columns < d_v &&
        (tuning.deltanet_columns & (tuning.deltanet_columns - 1)) == 0)
        return d_v / tuning.deltanet_columns;
    return 1;
}

void DeltaNetKernels::deltanet_step(CommandList& cl, const DeltaNetStep& a, View act, View params,
                                    View ring, View state, View tok, View counter) {
    const Features& f = dev_.features();
    if (auto d = deltanet_step_supported(f, a.d_k, a.d_v, a.conv_kernel)) fail("{}", d->reason);
    // Column groups of cw (see deltanet_step.comp), each column's d_k rows in ks parts so a
    // thread holds at most 32 state values in registers.
    const bool norm_out = a.ss_off != kNone;
    if (a.rows > 1 && (!a.state_in_tok || norm_out))
        fail("the DeltaNet step takes many rows only from the pools, with its own gated norm");
    const uint32_t cw =
        a.d_v / deltanet_groups(a.d_v, norm_out || counter.buffer != VK_NULL_HANDLE);
    if (a.round_y && (!norm_out || cw % 16))
        fail(
            "the DeltaNet step rounds y only leaving its norm to the reader, in groups of 16+ "
            "columns (not {})",
            cw);
    const uint32_t ks = deltanet_step_parts(f, a.d_k, cw);
    if (cw == a.d_v || norm_out) counter = tok;  // bound, never read
    // The q and k norms' sums in one subgroup reduction and one barrier, where the tree took
    // 2 · (log2(WG) + 2) barriers: 9B decode profile on an H200, deltanet 273.8 -> 256.9 us a
    // token (docs/perf/history.md 2026-12-01, evening).
    const bool sg = tuning.deltanet_subgroups && f.subgroup_arithmetic;
    const Kernel& k = pipes_.get(sg ? "deltanet_step_sg" : "deltanet_step", 6, sizeof(DeltaNetPush),
                                 {cw * ks, a.d_k, a.conv_kernel, a.d_v, cw, ks,
                                  a.round_y  ? 2u
                                  : norm_out ? 1u
                                             : 0u,
                                  a.state_in_tok ? 1u : 0u});
    DeltaNetPush p{a.n_k_heads,
                   a.n_v_heads,
                   a.qkv_off,
                   a.z_off,
                   a.b_off,
                   a.a_off,
                   a.y_off,
                   a.conv_off,
                   a.dt_off,
                   a.ssm_a_off,
                   a.norm_off,
                   a.eps,
                   norm_out ? a.ss_off : 0u,
                   a.tok_row,
                   a.counter_row};
    cl.dispatch(k, {act, params, ring, state, tok, counter}, p, a.n_v_heads, a.d_v / cw, a.rows);
}

}  // namespace dl::vk
