// The device's streaming read rate (bench's decode floor): every 16-byte word of a buffer much
// larger than the device's caches read once, folded by XOR into one word a workgroup, so the
// loads cannot be dropped and a test can check that every word was read.
//
// Thread t of workgroup g reads words g · WG · UNROLL + t + i · WG for i < UNROLL: adjacent
// threads read adjacent words, and each thread has UNROLL independent loads in flight.
//
// LOOP (the speed report only): a grid smaller than the chunks, each workgroup taking chunks g,
// g + grid, ... and folding each across the workgroup behind a barrier before it requests the
// next, as the decode GEMVs take their row blocks; out gets each chunk's fold all the same.
#version 450

#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint UNROLL = 8;
layout(constant_id = 2) const uint LOOP = 0;

layout(std430, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(std430, binding = 1) writeonly buffer Out { uint folded[]; };

layout(push_constant) uniform Push {
    uint n;       // 16-byte words to read
    uint groups;  // workgroups that fold (the grid may hold more)
    uint out_off;
} p;

shared uint red[WG];

void fold_chunk(uint g, uint t) {
    uint base = g * WG * UNROLL + t;
    uvec4 acc = uvec4(0u);
    [[unroll]] for (uint i = 0u; i < UNROLL; ++i) {
        uint k = base + i * WG;
        if (k < p.n) acc ^= src[k];
    }
    red[t] = acc.x ^ acc.y ^ acc.z ^ acc.w;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) red[t] ^= red[t + s];
        barrier();
    }
    if (t == 0u) folded[p.out_off + g] = red[0];
    if (LOOP != 0u) barrier();  // red is reused by the workgroup's next chunk
}

void main() {
    uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint t = gl_LocalInvocationID.x;
    if (LOOP == 0u) {
        if (g < p.groups) fold_chunk(g, t);
        return;
    }
    uint grid = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
    for (uint c = g; c < p.groups; c += grid) fold_chunk(c, t);
}
