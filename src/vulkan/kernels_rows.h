// Launchers of the row operations of the token command and the windows: the embedding lookup
// (get_rows), the RMSNorm and the SwiGLU over rows of activations.
#pragma once

#include <cstdint>

#include "quant/types.h"
#include "vulkan/kernel_family.h"

namespace dl::vk {

class RowKernels : public virtual KernelFamily {
  public:
    RowKernels(Device& dev, Pipelines& pipes) : KernelFamily(dev, pipes) {}

    // out[out_off + r * cols ..] = row ids[id_off + r] of the table (rows × cols of type t), r < n.
    void get_rows(CommandList& cl, QType t, View table, uint32_t rows, uint32_t cols, View ids,
                  uint32_t id_off, View out, uint32_t out_off, uint32_t n);
    // y = x / sqrt(mean(x²) + eps) · w for nrows rows of n (strided by x_stride / y_stride floats).
    void rms_norm(CommandList& cl, View w, View x, uint32_t x_off, uint32_t x_stride, View y,
                  uint32_t y_off, uint32_t y_stride, uint32_t n, uint32_t nrows, float eps);
    // y = silu(g) ⊙ u over n values.
    void swiglu(CommandList& cl, View g, uint32_t g_off, View u, uint32_t u_off, View y,
                uint32_t y_off, uint32_t n);
};

}  // namespace dl::vk
