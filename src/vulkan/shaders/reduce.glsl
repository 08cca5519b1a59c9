// Sums through shared memory: portable across subgroup sizes (8 on lavapipe, 32 on NVIDIA, 64 on
// AMD). WG (a power of two) and the shared array `red` (at least WG floats) are declared by the
// includer.

// The sum over each run of `seg` consecutive invocations (seg a power of two dividing WG), given
// to every invocation of the run.
float seg_sum(float v, uint seg) {
    uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    for (uint s = seg / 2u; s > 0u; s >>= 1) {
        if (t % seg < s) red[t] += red[t + s];
        barrier();
    }
    float r = red[t - t % seg];
    barrier();  // red may be reused right after
    return r;
}

// Workgroup-wide sum.
float wg_sum(float v) { return seg_sum(v, WG); }
