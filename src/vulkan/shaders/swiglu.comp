// SwiGLU of the FFN: y = silu(gate) ⊙ up, elementwise over n values.
#version 450

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
    uint n;
    uint g_off, u_off, y_off;
} p;

void main() {
    uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    float a = g[p.g_off + i];
    y[p.y_off + i] = a / (1.0 + exp(-a)) * u[p.u_off + i];
}
