// Workgroup-wide sum through shared memory: portable across subgroup sizes (8 on lavapipe, 32 on
// NVIDIA, 64 on AMD). WG (a power of two) and the shared array `red` are declared by the includer.
float wg_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        barrier();
    }
    float r = red[0];
    barrier();  // red may be reused right after
    return r;
}
