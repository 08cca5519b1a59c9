// Launchers of the measuring probes: the streaming read of bench's decode floor and the stage
// speed report's chain of dependent rounds without weights.
#pragma once

#include <cstdint>

#include "vulkan/kernel_family.h"

namespace dl::vk {

class ProbeKernels : public virtual KernelFamily {
  public:
    ProbeKernels(Device& dev, Pipelines& pipes) : KernelFamily(dev, pipes) {}

    // The streaming read probe (shaders/stream_read.comp): reads the first `bytes` of src (a
    // multiple of 16) once; out[out_off + g] = the XOR of the 16-byte words workgroup g read,
    // folded to one word, for g < stream_read_groups(bytes).
    uint32_t stream_read_groups(uint64_t bytes) const;
    using StreamShape = Tuning::StreamShape;
    void stream_read(CommandList& cl, View src, uint64_t bytes, View out, uint32_t out_off);
    // The stage speed report's chain (shaders/stage_chain.comp): rounds round0 .. round0 +
    // rounds - 1 over x (vectors of n, round r reads vector r and writes r + 1) in one dispatch
    // of `groups` workgroups, handing each round on inside the dispatch through sync[r]; a wait
    // past spin_limit polls sets sync[flag]. skew: one workgroup a round writes that many
    // steps late (the check that the handoff waits).
    void stage_chain(CommandList& cl, View x, View sync, uint32_t n, uint32_t round0,
                     uint32_t rounds, uint32_t groups, uint32_t spin_limit, uint32_t flag,
                     uint32_t skew = 0);

  private:
    StreamShape stream_shape_now() const;  // stream_read's shape (stream_shape or its own)
};

}  // namespace dl::vk
