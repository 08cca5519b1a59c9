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

    // out[out_off + r * cols ..] = row ids[id_off + r] of the table (rows × cols of `type`),
    // r < n.
    struct GetRows {
        QType type = QType::F32;
        View table;
        uint32_t rows = 0, cols = 0;
        View ids;
        uint32_t id_off = 0;
        View out;
        uint32_t out_off = 0, n = 0;
    };
    void get_rows(CommandList& cl, const GetRows& g);
    // y = x / sqrt(mean(x²) + eps) · w for nrows rows of n (strided by x_stride / y_stride floats).
    // With h, each row also as n halves at h's row · n (the F16 copy f16_copy would make of y's
    // rows packed; n even).
    struct RmsNorm {
        View w, x;
        uint32_t x_off = 0, x_stride = 0;
        View y;
        uint32_t y_off = 0, y_stride = 0, n = 0, nrows = 0;
        float eps = 0;
        View h{};
    };
    void rms_norm(CommandList& cl, const RmsNorm& r);
    // y = silu(g) ⊙ u over n values; with h, also as n halves at h's start (n even).
    void swiglu(CommandList& cl, View g, uint32_t g_off, View u, uint32_t u_off, View y,
                uint32_t y_off, uint32_t n, View h = {});
};

}  // namespace dl::vk
