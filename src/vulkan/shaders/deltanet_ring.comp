// After deltanet_conv (and a barrier): stores the last K-1 conv inputs of a window of n rows into
// the session's conv ring, input at position q to ring row q mod K, so the next window or decode
// token continues the conv. Inputs before the window that are still among the last K-1 already
// sit in their rows and are left alone. One thread per channel; a separate dispatch because the
// conv reads the old rows that these writes replace (the same rows when n % K == 0).
//
// Expected cost on the H200: (K-1) × conv_dim stores, a microsecond or two per layer per window,
// dominated by the dispatch itself.
#version 450

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint KCONV = 4;

layout(std430, binding = 0) readonly buffer Act { float act[]; };
layout(std430, binding = 1) buffer Ring { float ring[]; };        // [K][conv_dim]
layout(std430, binding = 2) readonly buffer Tok { uint tok[]; };  // tok[0] = first position

layout(push_constant) uniform Push {
    uint conv_dim, n;
    uint x_off;  // act: input rows [n][conv_dim]
} p;

void main() {
    uint c = gl_GlobalInvocationID.x;
    if (c >= p.conv_dim) return;
    uint pos0 = tok[0], end = pos0 + p.n;
    for (uint back = 1u; back < KCONV && back <= p.n; ++back) {
        uint q = end - back;  // >= pos0: a row of this window
        ring[(q % KCONV) * p.conv_dim + c] = act[p.x_off + (q - pos0) * p.conv_dim + c];
    }
}
