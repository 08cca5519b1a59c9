// Launchers of the row operations (see kernels_rows.h); push-constant layouts mirror the shaders.
#include <fmt/format.h>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct NormPush {
    uint32_t n, nrows, x_off, x_stride, y_off, y_stride;
    float eps;
};
struct SwigluPush {
    uint32_t n, g_off, u_off, y_off;
};
struct GetRowsPush {
    uint32_t ncols, nrows, row_bytes, id_off, out_off, n;
};

}  // namespace

void RowKernels::get_rows(CommandList& cl, const GetRows& g) {
    const QType t = g.type;
    const uint32_t rows = g.rows, cols = g.cols, id_off = g.id_off, out_off = g.out_off, n = g.n;
    const char* suf = type_suffix(t);
    if (!suf) fail("no row-fetch kernel for a table of type {}", qtype_name(t));
    const Kernel& k = pipes_.get(fmt::format("get_rows_{}", suf), 3, sizeof(GetRowsPush));
    GetRowsPush p{cols, rows, (uint32_t)row_size(t, cols), id_off, out_off, n};
    auto [gx, gy] = grid(dev_.features(), n);
    cl.dispatch(k, {g.table, g.ids, g.out}, p, gx, gy);
}

void RowKernels::rms_norm(CommandList& cl, const RmsNorm& r) {
    uint32_t wg = wg_size(256);
    const bool f16 = r.h.buffer != VK_NULL_HANDLE;
    if (f16 && (r.n % 2 || r.h.range < (uint64_t)r.nrows * r.n * 2))
        fail("an RMSNorm's F16 copy of {} rows of {} values in {} bytes", r.nrows, r.n, r.h.range);
    // The rows in registers as vec4s (rms_norm.comp's V4: up to 8 a thread) where they fit and
    // every offset, stride and view allows.
    const bool v4 = r.n % 4 == 0 && r.n <= 4 * 8 * wg && r.x_off % 4 == 0 && r.x_stride % 4 == 0 &&
                    r.y_off % 4 == 0 && r.y_stride % 4 == 0 && r.w.offset % 16 == 0 &&
                    r.x.offset % 16 == 0 && r.y.offset % 16 == 0 && (!f16 || r.h.offset % 16 == 0);
    const Kernel& k = pipes_.get(f16 ? "rms_norm_f16" : "rms_norm", f16 ? 4 : 3, sizeof(NormPush),
                                 {wg, v4 ? 1u : 0u});
    NormPush p{r.n, r.nrows, r.x_off, r.x_stride, r.y_off, r.y_stride, r.eps};
    auto [gx, gy] = grid(dev_.features(), r.nrows);
    if (f16)
        cl.dispatch(k, {r.w, r.x, r.y, r.h}, p, gx, gy);
    else
        cl.dispatch(k, {r.w, r.x, r.y}, p, gx, gy);
}

void RowKernels::swiglu(CommandList& cl, View g, uint32_t g_off, View u, uint32_t u_off, View y,
                        uint32_t y_off, uint32_t n, View h) {
    const bool f16 = h.buffer != VK_NULL_HANDLE;
    if (f16 && (n % 2 || h.range < (uint64_t)n * 2))
        fail("a SwiGLU's F16 copy of {} values in {} bytes", n, h.range);
    const Kernel& k = pipes_.get(f16 ? "swiglu_f16" : "swiglu", f16 ? 4 : 3, sizeof(SwigluPush));
    SwigluPush p{n, g_off, u_off, y_off};
    const uint32_t threads = f16 ? n / 2 : n;
    auto [gx, gy] = grid(dev_.features(), (threads + 255) / 256);
    if (f16)
        cl.dispatch(k, {g, u, y, h}, p, gx, gy);
    else
        cl.dispatch(k, {g, u, y}, p, gx, gy);
}

}  // namespace dl::vk
