// The causal conv + SiLU of a Gated DeltaNet layer over a window of n rows (prefill): the conv
// input rows [n][conv_dim] at x_off stay as they are and the outputs go to their own rows at
// xc_off, so every output can be computed independently of every other.
//
// Why this shape: the conv is elementwise across channels and only K taps deep across rows, so a
// thread per channel walking the rows in order (the old shape) was a chain of 512 dependent
// load-compute-store steps with only conv_dim threads. Here invocation (channel c, row group)
// computes RPT consecutive output rows of channel c: it loads the RPT + K - 1 inputs it needs at
// once (independent loads, all issued before the first store; positions before the window come
// from the session's conv ring: input at position q lives in ring row q mod K, zero before
// position 0), then writes RPT outputs. Neighbouring invocations are neighbouring channels, so
// every load and store is coalesced. The ring is only read here; deltanet_ring.comp stores the
// window's last K-1 inputs into it after a barrier (when n % K == 0 the slots read and written
// coincide, so the two cannot share a dispatch).
//
// Expected cost on the H200 (conv_dim 6144, n 512, K 4, RPT 8): 6144 × 64 threads, about 19 MB
// of traffic a layer, bandwidth-bound at a few microseconds. Measured with the ring update
// after it ("dn conv" of the speed report in tests/vulkan/deltanet_window_test.cpp): 17 us a
// 512-row window at conv_dim 6144, 20 us at 8192, 0.03-0.04 us a row (was part of ~3.7 us).
#version 450
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint KCONV = 4;
layout(constant_id = 1) const uint RPT = 8;  // output rows per invocation

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer Params { float prm[]; };
layout(std430, binding = 2) readonly buffer Ring { float ring[]; };  // [K][conv_dim]
layout(std430, binding = 3) readonly buffer Tok { uint tok[]; };     // tok[0] = first position

layout(push_constant) uniform Push {
    uint conv_dim, n;
    uint x_off;     // act: input rows [n][conv_dim]
    uint xc_off;    // act: output rows [n][conv_dim], disjoint from the input rows
    uint conv_off;  // prm: taps [conv_dim][K]
} p;

float silu(float x) { return x / (1.0 + exp(-x)); }

void main() {
    uint c = gl_GlobalInvocationID.x;
    if (c >= p.conv_dim) return;
    uint r0 = gl_WorkGroupID.y * RPT;
    uint pos0 = tok[0];
    // in[t] = input of window row r0 - (K-1) + t (negative rows: positions before the window)
    float in_[RPT + KCONV - 1u];
    [[unroll]] for (uint t = 0; t < RPT + KCONV - 1u; ++t) {
        int rr = int(r0 + t) - int(KCONV - 1u);
        float x = 0.0;
        if (rr >= 0) {
            if (uint(rr) < p.n) x = act[p.x_off + uint(rr) * p.conv_dim + c];
        } else {
            uint back = uint(-rr);
            if (pos0 >= back) x = ring[((pos0 - back) % KCONV) * p.conv_dim + c];
        }
        in_[t] = x;
    }
    float w[KCONV];
    [[unroll]] for (uint t = 0; t < KCONV; ++t) w[t] = prm[p.conv_off + c * KCONV + t];
    [[unroll]] for (uint r = 0; r < RPT; ++r) {
        if (r0 + r >= p.n) break;
        float s = 0.0;
        [[unroll]] for (uint t = 0; t < KCONV; ++t) s += w[t] * in_[r + t];
        act[p.xc_off + (r0 + r) * p.conv_dim + c] = silu(s);
    }
}
