// The causal conv + SiLU of a Gated DeltaNet layer over a window of n rows (prefill), in place
// on the conv input rows [n][conv_dim]. One thread per channel walks the rows in order, keeping
// the last K-1 inputs in registers: it starts from the session's conv ring (input at position q
// lives in ring row q mod K, zero in a fresh session) and afterwards stores the window's last
// inputs back there, so the conv carries across windows and a window shorter than the taps is
// right. The thread owns its channel of the ring, so no other invocation races with it.
#version 450

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint KCONV = 4;

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer Params { float prm[]; };
layout(std430, binding = 2) buffer Ring { float ring[]; };      // [K][conv_dim]
layout(std430, binding = 3) readonly buffer Tok { uint tok[]; };  // tok[0] = first position

layout(push_constant) uniform Push {
    uint conv_dim, n;
    uint x_off;     // act: rows [n][conv_dim]
    uint conv_off;  // prm: taps [conv_dim][K]
} p;

float silu(float x) { return x / (1.0 + exp(-x)); }

void main() {
    uint c = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (c >= p.conv_dim) return;
    uint pos0 = tok[0];
    // hist[t] = input at position (current - (K-1) + t), t < K-1
    float hist[KCONV];
    for (uint t = 0; t + 1u < KCONV; ++t) {
        uint back = KCONV - 1u - t;  // positions pos0-back
        hist[t] = pos0 >= back ? ring[((pos0 - back) % KCONV) * p.conv_dim + c] : 0.0;
    }
    float w[KCONV];
    for (uint t = 0; t < KCONV; ++t) w[t] = prm[p.conv_off + c * KCONV + t];
    for (uint r = 0; r < p.n; ++r) {
        uint at = p.x_off + r * p.conv_dim + c;
        float x = act[at];
        float s = w[KCONV - 1u] * x;
        for (uint t = 0; t + 1u < KCONV; ++t) s += w[t] * hist[t];
        for (uint t = 0; t + 2u < KCONV; ++t) hist[t] = hist[t + 1u];
        if (KCONV > 1u) hist[KCONV - 2u] = x;
        act[at] = silu(s);
    }
    // The last K-1 inputs (some may predate the window and are already in the ring).
    for (uint t = 0; t + 1u < KCONV; ++t) {
        uint back = KCONV - 1u - t;
        uint end = pos0 + p.n;  // next position
        if (end >= back) ring[((end - back) % KCONV) * p.conv_dim + c] = hist[t];
    }
}
