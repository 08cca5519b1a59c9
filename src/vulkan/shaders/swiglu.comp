// SwiGLU of the FFN: y = silu(gate) ⊙ up, elementwise over n values.
// F16_OUT: two values a thread (n even), also written as halves at h[0 ..], the F16 copy the
// down projection's GEMM tiles read (f16_copy.comp's layout), so that copy needs no stage.
#version 450

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
#if defined(F16_OUT)
layout(std430, binding = 3) writeonly buffer H { uint h[]; };  // 2 halves a word
#endif

layout(push_constant) uniform Push {
    uint n;
    uint g_off, u_off, y_off;
} p;

float silu_times(float a, float b) {
    return a / (1.0 + exp(-a)) * b;
}

void main() {
    uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
#if defined(F16_OUT)
    if (i >= p.n / 2u) return;
    vec2 v = vec2(silu_times(g[p.g_off + 2u * i], u[p.u_off + 2u * i]),
                  silu_times(g[p.g_off + 2u * i + 1u], u[p.u_off + 2u * i + 1u]));
    y[p.y_off + 2u * i] = v.x;
    y[p.y_off + 2u * i + 1u] = v.y;
    h[i] = packHalf2x16(v);
#else
    if (i >= p.n) return;
    y[p.y_off + i] = silu_times(g[p.g_off + i], u[p.u_off + i]);
#endif
}
