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
    const Kernel& k = pipes_.get("rms_norm", 3, sizeof(NormPush), {wg});
    NormPush p{r.n, r.nrows, r.x_off, r.x_stride, r.y_off, r.y_stride, r.eps};
    auto [gx, gy] = grid(dev_.features(), r.nrows);
    cl.dispatch(k, {r.w, r.x, r.y}, p, gx, gy);
}

void RowKernels::swiglu(CommandList& cl, View g, uint32_t g_off, View u, uint32_t u_off, View y,
                        uint32_t y_off, uint32_t n) {
    const Kernel& k = pipes_.get("swiglu", 3, sizeof(SwigluPush));
    SwigluPush p{n, g_off, u_off, y_off};
    auto [gx, gy] = grid(dev_.features(), (n + 255) / 256);
    cl.dispatch(k, {g, u, y}, p, gx, gy);
}

}  // namespace dl::vk
