// Launchers of the Gated DeltaNet window kernels (see kernels.h, deltanet_rows): the conv into
// its own rows and the conv ring update, L2 norms and gates, the scan over the rows (chunked WY
// form or token by token), the gated RMSNorm. Push-constant layouts mirror the shaders; the
// shaders' headers say why each is shaped as it is.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct ConvPush {
    uint32_t conv_dim, n, x_off, xc_off, conv_off;
};
struct RingPush {
    uint32_t conv_dim, n, x_off;
};
struct GatesPush {
    uint32_t n_k_heads, n_v_heads, d_k, qkv_off, qkv_row, b_off, a_off, ba_row, dt_off, ssma_off;
};
struct ScanPush {
    uint32_t n_k_heads, n_v_heads, d_v, n, qkv_off, qkv_row, b_off, a_off, ba_row, y_off, y_row;
};
// deltanet_wy.comp and deltanet_chunk.comp (the first leaves y_off and y_row unread).
struct ChunkPush {
    ScanPush scan;
    uint32_t wy_off;
};
struct GatedNormPush {
    uint32_t n, nrows, x_off, z_off, norm_off;
    float eps;
};

constexpr uint32_t kConvRows = 8;  // output rows per conv invocation (RPT)

// The largest power of two <= want within the device's workgroup limit.
uint32_t pow2_at_most(const Features& f, uint32_t want) {
    uint32_t limit = std::max<uint32_t>(f.max_workgroup_invocations, 64);
    uint32_t s = 1;
    while (s * 2 <= std::min(want, limit)) s *= 2;
    return s;
}

// Shape of the chunked scan (deltanet_wy.comp, then deltanet_chunk.comp): rows a chunk (0: it
// does not fit), value columns a workgroup of the walk over the chunks.
struct ChunkShape {
    uint32_t rows, cols;
};
constexpr uint32_t kWyThreads = 256;  // deltanet_wy.comp: a column of [W | U] a thread
// deltanet_chunk.comp: row groups (threads a column), more where there are few workgroups
// (H200, 512 rows, staged walk: 16 value heads in 128 workgroups 84 us with 16 groups, 117 with
// 8; 32 heads in 256 workgroups 160 us with 16, 142 with 8).
uint32_t chunk_groups(uint32_t workgroups) {
    return workgroups >= 256 ? 8 : 16;
}

// Shared memory of the two kernels, in bytes; mirrors their declarations.
uint64_t wy_shared_bytes(uint32_t d_k, uint32_t c) {
    return 4ull * (2ull * c * (d_k + 4) + (uint64_t)c * (c + 1) + 3ull * c);
}
uint64_t chunk_shared_bytes(uint32_t d_k, uint32_t c, uint32_t cols) {
    return 4ull * ((uint64_t)d_k * cols + (uint64_t)c * cols + 2ull * c + (uint64_t)c * (c + 1)) +
           2ull * 16 * c * (d_k / 4 + 1);
}

// Chunks of 32 rows where they fit, else 16 (the solve keeps a chunk's column in registers and
// the walk makes n / C sequential steps); the widest value slice that fits beside them.
ChunkShape chunk_shape(const Features& f, uint32_t d_k, uint32_t d_v) {
    if (f.max_workgroup_invocations < kWyThreads || d_k % 4) return {0, 0};
    for (uint32_t c : {DeltaNetKernels::kDeltaNetChunkMax, 16u}) {
        if (wy_shared_bytes(d_k, c) > f.max_shared_memory) continue;
        for (uint32_t cols : {32u, 16u, 8u}) {
            const uint32_t cw = std::min(cols, d_v);
            if (chunk_shared_bytes(d_k, c, cw) <= f.max_shared_memory) return {c, cw};
        }
    }
    return {0, 0};
}

// Module and shape of the token scan (see deltanet_scan.comp).
struct ScanShape {
    const char* module;
    uint32_t split, cols, chunk;
};

ScanShape scan_shape(const Features& f, uint32_t d_k, uint32_t d_v,
                     DeltaNetKernels::DeltaNetScan want) {
    using S = DeltaNetKernels::DeltaNetScan;
    // Threads per column: a power of two dividing d_k, never more than the smallest subgroup.
    const uint32_t min_sg = std::max<uint32_t>(f.min_subgroup_size, 1);
    uint32_t split = 8;
    while (split > 1 && (split > min_sg || d_k % split)) split /= 2;
    const bool cl = f.subgroup_clustered && split > 1, sh = f.subgroup_shuffle && split > 1;
    ScanShape s{"deltanet_scan", 1, std::min<uint32_t>(d_v, 32), 1};
    if (want == S::clustered && !cl)
        fail(
            "the device has no clustered subgroup adds for the DeltaNet scan (d_k {}, subgroups "
            "of {})",
            d_k, min_sg);
    if (want == S::shuffle && !sh)
        fail("the device has no subgroup shuffles for the DeltaNet scan (d_k {}, subgroups of {})",
             d_k, min_sg);
    // Xor shuffles first: on the H200 the clustered adds made the scan half again slower.
    if ((want == S::best && sh) || want == S::shuffle)
        s = {"deltanet_scan_sh", split, std::min<uint32_t>(d_v, 16), 1};
    else if ((want == S::best && cl) || want == S::clustered)
        s = {"deltanet_scan_cl", split, std::min<uint32_t>(d_v, 16), 1};
    // Rows staged at once: up to 32, as many as fit in 40 KiB of shared memory while a thread's
    // share of the next chunk's q and k stays within 2 × 32 registers.
    const uint64_t budget = std::min<uint64_t>(f.max_shared_memory, 40 * 1024);
    const uint32_t wg = s.cols * s.split;
    for (uint32_t c = 32; c >= 1; c /= 2)
        if ((uint64_t)c * (2 * d_k + s.cols + 2) * 4 <= budget && (c * d_k + wg - 1) / wg <= 32) {
            s.chunk = c;
            break;
        }
    return s;
}

}  // namespace

uint32_t DeltaNetKernels::deltanet_chunk_rows(const Features& f, uint32_t d_k, uint32_t d_v) {
    return chunk_shape(f, d_k, d_v).rows;
}

std::optional<Decline> DeltaNetKernels::deltanet_rows_supported(const Features& f, uint32_t d_k,
                                                                uint32_t d_v,
                                                                uint32_t conv_kernel) {
    if (auto d = deltanet_step_supported(f, d_k, d_v, conv_kernel)) return d;
    // The scan without subgroup operations keeps a whole state column in one thread.
    if (d_k > 256)
        return Decline{
            fmt::format("DeltaNet key head size {} is over the 256 a thread holds", d_k)};
    return std::nullopt;
}

void DeltaNetKernels::deltanet_rows(CommandList& cl, const DeltaNetStep& a, uint32_t conv_out,
                                    View act, View params, View ring, View state, View tok,
                                    uint32_t n, DeltaNetScan scan_path) {
    const Features& f = dev_.features();
    if (auto d = deltanet_rows_supported(f, a.d_k, a.d_v, a.conv_kernel)) fail("{}", d->reason);
    const uint32_t conv_dim = 2 * a.n_k_heads * a.d_k + a.n_v_heads * a.d_v;
    const uint32_t d_inner = a.n_v_heads * a.d_v;
    if (conv_out < a.qkv_off + (uint64_t)n * conv_dim &&
        a.qkv_off < conv_out + (uint64_t)n * conv_dim)
        fail("the DeltaNet conv output rows overlap its input rows");
    if ((n + kConvRows - 1) / kConvRows > f.max_workgroup_count[1])
        fail("a DeltaNet window of {} rows is over the device's dispatch limit", n);

    // Chosen first: a forced scan module the device lacks fails before anything is recorded.
    using S = DeltaNetScan;
    const ChunkShape ch = chunk_shape(f, a.d_k, a.d_v);
    if (scan_path == S::chunked && ch.rows == 0)
        fail(
            "the chunked DeltaNet scan has no shape for key heads of {} on this device (it needs "
            "a multiple of 4, {} threads a workgroup and its chunks in the device's {} bytes of "
            "shared memory)",
            a.d_k, kWyThreads, f.max_shared_memory);
    // `best` by measurement (H200, 512-row windows, d_k = d_v = 128, DeltaNetWindowSpeed, the
    // scan dispatches only): the chunked form, WY factors and walk, 107 us at the 0.8B's 16
    // value heads and 183 at the 9B's 32; the token scan with xor shuffles 157 / 208, with
    // clustered adds 277 / 320, without subgroup operations 935. So the chunked form wherever
    // its chunks fit the device's shared memory.
    const bool chunked = scan_path == S::chunked || (scan_path == S::best && ch.rows > 0);
    const ScanShape sh = scan_shape(f, a.d_k, a.d_v, chunked ? S::plain : scan_path);

    const uint32_t cgroups = (conv_dim + 63) / 64;
    const Kernel& conv =
        pipes_.get("deltanet_conv", 4, sizeof(ConvPush), {a.conv_kernel, kConvRows});
    ConvPush cp{conv_dim, n, a.qkv_off, conv_out, a.conv_off};
    cl.dispatch(conv, {act, params, ring, tok}, cp, cgroups, (n + kConvRows - 1) / kConvRows);
    cl.barrier();  // the ring rows the conv read may be the ones the update writes
    const Kernel& ring_k = pipes_.get("deltanet_ring", 3, sizeof(RingPush), {a.conv_kernel});
    RingPush rp{conv_dim, n, a.qkv_off};
    cl.dispatch(ring_k, {act, ring, tok}, rp, cgroups);
    cl.barrier();
    cl.mark("dn conv");

    const Kernel& gates = pipes_.get("deltanet_gates", 2, sizeof(GatesPush), {64});
    GatesPush gp{a.n_k_heads, a.n_v_heads, a.d_k,       conv_out, conv_dim,
                 a.b_off,     a.a_off,     a.n_v_heads, a.dt_off, a.ssm_a_off};
    cl.dispatch(gates, {act, params}, gp, 2 * a.n_k_heads + 1, n);
    cl.barrier();
    cl.mark("dn gates");

    ScanPush sp{a.n_k_heads, a.n_v_heads, a.d_v,       n,       conv_out, conv_dim,
                a.b_off,     a.a_off,     a.n_v_heads, a.y_off, d_inner};
    if (chunked) {
        if (a.wy_off == kNone) fail("the chunked DeltaNet scan needs its scratch rows (wy_off)");
        if ((n + ch.rows - 1) / ch.rows > f.max_workgroup_count[1])
            fail("a DeltaNet window of {} rows is over the device's dispatch limit", n);
        const ChunkPush cp2{sp, a.wy_off};
        const Kernel& wy =
            pipes_.get("deltanet_wy", 2, sizeof(ChunkPush), {kWyThreads, a.d_k, ch.rows});
        cl.dispatch(wy, {act, act}, cp2, a.n_v_heads, (n + ch.rows - 1) / ch.rows);
        cl.barrier();
        cl.mark("dn wy");
        const uint32_t cols =
            tuning.deltanet_chunk_tile.cols ? tuning.deltanet_chunk_tile.cols : ch.cols;
        const uint32_t groups = tuning.deltanet_chunk_tile.groups
                                    ? tuning.deltanet_chunk_tile.groups
                                    : chunk_groups(a.n_v_heads * ((a.d_v + cols - 1) / cols));
        if (groups * cols > f.max_workgroup_invocations ||
            chunk_shared_bytes(a.d_k, ch.rows, cols) > f.max_shared_memory)
            fail("the DeltaNet chunk walk of {} x {} threads does not fit the device", groups,
                 cols);
        // Quads of q, k and W read as vectors where all of them start 16-byte aligned.
        const bool vec =
            act.offset % 16 == 0 && conv_out % 4 == 0 && conv_dim % 4 == 0 && a.wy_off % 4 == 0;
        const Kernel& scan = pipes_.get("deltanet_chunk", 3, sizeof(ChunkPush),
                                        {groups * cols, a.d_k, ch.rows, cols, vec ? 1u : 0u});
        cl.dispatch(scan, {act, state, act}, cp2, a.n_v_heads, (a.d_v + cols - 1) / cols);
    } else {
        std::vector<uint32_t> spec = {sh.cols * sh.split, a.d_k, sh.chunk};
        if (sh.split > 1) spec.push_back(sh.split);
        const Kernel& scan = pipes_.get(sh.module, 2, sizeof(ScanPush), spec);
        cl.dispatch(scan, {act, state}, sp, a.n_v_heads, a.d_v / sh.cols);
    }
    cl.barrier();
    cl.mark("dn scan");

    const uint32_t wg = pow2_at_most(f, std::min<uint32_t>(a.d_v, 128));
    const Kernel& gn = pipes_.get("gated_norm", 2, sizeof(GatedNormPush), {wg});
    GatedNormPush np{a.d_v, n * a.n_v_heads, a.y_off, a.z_off, a.norm_off, a.eps};
    auto [nx, ny] = grid(f, n * a.n_v_heads);
    cl.dispatch(gn, {act, params}, np, nx, ny);
}

}  // namespace dl::vk
