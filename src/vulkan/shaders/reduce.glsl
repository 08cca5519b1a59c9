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

#if defined(SUBGROUP)
// Workgroup-wide sums through the subgroups' own sums (SUBGROUP variants, where the device has
// subgroup arithmetic): one barrier for what the tree above takes log2(WG) + 2 for. Subgroup
// sums go to red[2 · subgroup] and red[2 · subgroup + 1] (a subgroup is 2 invocations or more).
vec2 wg_sum2(vec2 v) {
    v = subgroupAdd(v);
    if (subgroupElect()) {
        red[2u * gl_SubgroupID] = v.x;
        red[2u * gl_SubgroupID + 1u] = v.y;
    }
    barrier();
    vec2 s = vec2(0.0);
    for (uint i = 0; i < gl_NumSubgroups; ++i) s += vec2(red[2u * i], red[2u * i + 1u]);
    barrier();  // red may be reused right after
    return s;
}
float wg_sum(float v) { return wg_sum2(vec2(v, 0.0)).x; }
#else
// Workgroup-wide sums.
float wg_sum(float v) { return seg_sum(v, WG); }
vec2 wg_sum2(vec2 v) { return vec2(wg_sum(v.x), wg_sum(v.y)); }
#endif
