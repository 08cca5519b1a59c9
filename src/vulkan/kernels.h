// Typed launchers of the compute kernels: each records one dispatch (no barrier) into a
// CommandList, choosing the module and workgroup shape from the device's features. Offsets of
// activations are in floats inside the bound views; weight views start at the tensor.
//
// Each family has its header and sources (kernels_gemv.h, kernels_attention.h,
// kernels_deltanet.h, kernels_gemm.h, kernels_rows.h, kernels_sample.h, kernels_probes.h,
// kernels_experts.h);
// Kernels is all of them over one device.
#pragma once

#include "vulkan/kernels_attention.h"
#include "vulkan/kernels_deltanet.h"
#include "vulkan/kernels_experts.h"
#include "vulkan/kernels_gemm.h"
#include "vulkan/kernels_gemv.h"
#include "vulkan/kernels_probes.h"
#include "vulkan/kernels_rows.h"
#include "vulkan/kernels_sample.h"

namespace dl::vk {

class Kernels : public GemvKernels,
                public AttentionKernels,
                public DeltaNetKernels,
                public GemmKernels,
                public RowKernels,
                public SampleKernels,
                public ProbeKernels,
                public ExpertKernels {
  public:
    Kernels(Device& dev, Pipelines& pipes)
        : KernelFamily(dev, pipes),
          GemvKernels(dev, pipes),
          AttentionKernels(dev, pipes),
          DeltaNetKernels(dev, pipes),
          GemmKernels(dev, pipes),
          RowKernels(dev, pipes),
          SampleKernels(dev, pipes),
          ProbeKernels(dev, pipes),
          ExpertKernels(dev, pipes) {}
};

}  // namespace dl::vk
