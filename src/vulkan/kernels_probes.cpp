// Launchers of the measuring probes (see kernels_probes.h); push-constant layouts mirror the
// shaders.

#include <algorithm>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct StreamReadPush {
    uint32_t n, groups, out_off;
};
struct StageChainPush {
    uint32_t n, round0, rounds, spin_limit, flag, skew;
};

}  // namespace

// stream_read.comp's shape: 256 threads, 8 loads of 16 bytes each, unless the speed report
// forces another (stream_shape).
ProbeKernels::StreamShape ProbeKernels::stream_shape_now() const {
    return {wg_size(tuning.stream_shape.threads ? tuning.stream_shape.threads : 256),
            tuning.stream_shape.loads ? tuning.stream_shape.loads : 8, tuning.stream_shape.grid};
}

uint32_t ProbeKernels::stream_read_groups(uint64_t bytes) const {
    const StreamShape sh = stream_shape_now();
    const uint64_t per_group = uint64_t(sh.threads) * sh.loads * 16;
    return (uint32_t)((bytes + per_group - 1) / per_group);
}

void ProbeKernels::stream_read(CommandList& cl, View src, uint64_t bytes, View out,
                               uint32_t out_off) {
    if (bytes % 16 || bytes / 16 > UINT32_MAX)
        fail("the read probe takes a multiple of 16 bytes under 64 GiB, not {}", bytes);
    const StreamShape sh = stream_shape_now();
    const uint32_t loop = sh.grid ? 1 : 0;
    const Kernel& k =
        pipes_.get("stream_read", 2, sizeof(StreamReadPush), {sh.threads, sh.loads, loop});
    const uint32_t groups = stream_read_groups(bytes);
    StreamReadPush p{(uint32_t)(bytes / 16), groups, out_off};
    auto [gx, gy] = grid(dev_.features(), sh.grid ? std::min(sh.grid, groups) : groups);
    cl.dispatch(k, {src, out}, p, gx, gy);
}

void ProbeKernels::stage_chain(CommandList& cl, View x, View sync, uint32_t n, uint32_t round0,
                               uint32_t rounds, uint32_t groups, uint32_t spin_limit, uint32_t flag,
                               uint32_t skew) {
    if (n == 0 || rounds == 0 || groups == 0)
        fail("the stage chain takes values, rounds and workgroups, not {}, {}, {}", n, rounds,
             groups);
    const Kernel& k = pipes_.get("stage_chain", 2, sizeof(StageChainPush), {wg_size(256)});
    StageChainPush p{n, round0, rounds, spin_limit, flag, skew};
    cl.dispatch(k, {x, sync}, p, groups);
}

}  // namespace dl::vk
