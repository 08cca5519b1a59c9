// What becomes of gemv.comp's summed rows: row_value() (NORM_IN's factor, the SwiGLU of a pair),
// the RMSNorm epilogue of the new y (NORM_EPILOGUE) and the rounding of the rows to bytes for
// the next GEMV (ROUND_OUT).
//
// NORM_EPILOGUE: the RMSNorm of the new y (the residual stream after mode 1) into
// y[xn_off ..] with the weights of binding 3, so the next norm needs no stage of its own.
// Each workgroup, once its rows are stored and made available device-wide, counts itself on
// counter[counter_idx] (binding 4); the last one to arrive sees every row, normalizes them
// all, and sets the counter back to 0 for the next dispatch. y is `coherent` in this variant
// so the last workgroup reads the other workgroups' rows, not a stale cache line.
//
// ROUND_OUT (X_INT8): the GEMV also writes its rows rounded to bytes, the way a GEMV that
// reads them would round them (quantize_x), at y[xr_off ..]. XPRE: x_off points at such a
// rounding instead of at floats, so the GEMV has no rounding pass. The token command's FFN
// pair rounds its rows for the down projection, whose 12288 values of x (a 9B's) cost every
// workgroup 48 KB of reads and a barrier to round: on an H200 the down stage went 569 -> 503
// us a 9B token, the pair 757 -> 788 (docs/PERF.md 2026-12-01, 21:00). A rounding of n
// values at float offset o: the bytes in words o .. o + n/4 - 1 (16-value block e in words
// o + 4e .. o + 4e + 3), then each block's (scale, scale · sum of its bytes) from o + n/4:
// 3n/8 floats, the bytes and terms the reader would have rounded itself.

#if defined(NORM_EPILOGUE)
shared uint last_group;  // 1 in the workgroup that finished last
// 8 loads a thread cover the 4096 rows of a 9B's residual stream over 512 threads, and hold half
// the registers 16 did: at 16 the compiler gave the 12288-wide Q4_K variant 65 registers, one
// over what fits two workgroups of 512 a multiprocessor (H200, docs/PERF.md 2026-11-30, night).
const uint NORM_BATCH = 8u;

// The sum of v over the workgroup, through the same partials as the row sums.
float group_sum(float v) {
    uint tid = gl_LocalInvocationID.x;
#if defined(SUBGROUP)
    v = subgroupAdd(v);
    if (subgroupElect()) partial[0][gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) s += partial[0][i];
    return s;
#else
    partial[0][tid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) partial[0][tid] += partial[0][tid + s];
        barrier();
    }
    return partial[0][0];
#endif
}

// Values base, base + WG, ... (NORM_BATCH of them) of y and of the norm weights; 0 past the rows.
void load_norm_batch(uint base, out float v[NORM_BATCH], out float w[NORM_BATCH]) {
    [[unroll]] for (uint k = 0; k < NORM_BATCH; ++k) {
        uint i = base + k * WG;
        v[k] = i < p.nrows ? y[p.y_off + i] : 0.0;
        w[k] = i < p.nrows ? norm_w[i] : 0.0;
    }
}

void store_norm_batch(uint base, float v[NORM_BATCH], float w[NORM_BATCH], float scale) {
    [[unroll]] for (uint k = 0; k < NORM_BATCH; ++k) {
        uint i = base + k * WG;
        if (i < p.nrows) y[p.xn_off + i] = v[k] * scale * w[k];
    }
}

// Called by every thread of a workgroup that stored its rows (see the top); `groups` workgroups
// count themselves (those of the grid's overshoot left at the top without counting).
void norm_epilogue(uint groups) {
    uint tid = gl_LocalInvocationID.x;
    // Release: the rows this group's threads stored reach device scope before it counts itself.
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) last_group = atomicAdd(counter[p.counter_idx], 1u) == groups - 1u ? 1u : 0u;
    barrier();
    if (last_group == 0u) return;
    // Acquire: every other group's rows were released before its increment, which came before
    // ours; reads of the coherent y after this fence see them.
    memoryBarrierBuffer();
    // One workgroup reads all of y, so the loads go out in batches of NORM_BATCH independent
    // ones, a memory latency a batch instead of one a value. Where y fits one batch a thread
    // (4096 values over 512 threads for a 9B), the batch loaded for the sum of squares, weights
    // included, is the one scaled and stored: one memory latency in all.
    float v[NORM_BATCH], w[NORM_BATCH];
    float ss = 0.0;
    for (uint base = tid; base < p.nrows; base += NORM_BATCH * WG) {
        load_norm_batch(base, v, w);
        [[unroll]] for (uint k = 0; k < NORM_BATCH; ++k) ss += v[k] * v[k];
    }
    // rms_norm.comp's formula: y / sqrt(mean(y²) + eps) · w.
    float scale = inversesqrt(group_sum(ss) / float(p.nrows) + p.eps);
    if (p.nrows <= NORM_BATCH * WG) {
        store_norm_batch(tid, v, w, scale);
    } else {
        for (uint base = tid; base < p.nrows; base += NORM_BATCH * WG) {
            load_norm_batch(base, v, w);
            store_norm_batch(base, v, w, scale);
        }
    }
    // The next dispatch that counts on this word comes after a pipeline barrier.
    if (tid == 0u) atomicExchange(counter[p.counter_idx], 0u);
}
#endif

// A row's value from its sums (v; u: the up row's, SWIGLU_PAIR): times NORM_IN's factor, through
// the SwiGLU for the pair.
float row_value(float v, float u) {
#if defined(NORM_IN)
    float xs = norm_in_scale();
    v *= xs;
    u *= xs;
#endif
#if defined(SWIGLU_PAIR)
    return v / (1.0 + exp(-v)) * u;  // swiglu.comp's formula
#else
    return v;
#endif
}

#if defined(X_INT8) && !defined(NORM_EPILOGUE)
// ROUND_OUT: the row block's values, gathered for the threads that round them where one
// subgroup does not hold the whole block (round_out). Sized 1 where ROUND_OUT is 0.
shared float ro_v[GROUPS * ROWS * ROUND_OUT + 1u];

#if defined(SUBGROUP)
// ROUND_OUT where subgroups hold 16+ invocations: invocation i < GROUPS · ROWS (counted by
// subgroup) rounds v, row i of the block that starts at row `first`, the 16 of a 16-value block
// combined by shuffles.
void round_out_lanes(uint first, float v) {
    uint i = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    if (i >= GROUPS * ROWS) return;  // whole 16-value blocks stay together
    uint e = (first + i) / 16u, j = i & 15u;
    float amax = abs(v);
    uint bad = isnan(v) || isinf(v) ? 1u : 0u;
    [[unroll]] for (uint m = 1u; m < 16u; m <<= 1) {
        amax = max(amax, subgroupShuffleXor(amax, m));
        bad |= subgroupShuffleXor(bad, m);
    }
    float id = round_factor(amax, bad == 0u);
    int q = int(roundEven(v * id)), sum = q;
    uint w = (uint(q) & 0xffu) << (8u * (j & 3u));
    [[unroll]] for (uint m = 1u; m < 16u; m <<= 1) sum += subgroupShuffleXor(sum, m);
    w |= subgroupShuffleXor(w, 1u);
    w |= subgroupShuffleXor(w, 2u);
    if (16u * e >= p.nrows) return;
    uint o = p.xr_off, n = p.nrows;
    if ((j & 3u) == 0u) yw[o + 4u * e + j / 4u] = w;
    if (j == 0u) {
        float d = amax / 127.0;
        y[o + n / 4u + 2u * e] = d;
        y[o + n / 4u + 2u * e + 1u] = d * float(sum);
    }
}
#endif

// ROUND_OUT: rounds the rows of row block blk (v: the value of row grp · ROWS + lt of the block,
// from the threads with lt < ROWS) as quantize_x rounds x, into y[xr_off ..] (see the top): 16
// invocations a 16-value block by shuffles where subgroups hold 16+, else one thread a block.
// Called by every thread of the workgroup.
void round_out(uint blk, uint grp, uint lt, float v) {
    uint first = blk * GROUPS * ROWS;
    if (lt < ROWS) ro_v[grp * ROWS + lt] = v;
    barrier();
#if defined(SUBGROUP)
    if (gl_SubgroupSize >= 16u) {
        uint i = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
        round_out_lanes(first, i < GROUPS * ROWS ? ro_v[i] : 0.0);
        return;
    }
#endif
    uint b = gl_LocalInvocationID.x, e = first / 16u + b;
    if (b >= GROUPS * ROWS / 16u || 16u * e >= p.nrows) return;
    vec4 vb[4];
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        uint j = 16u * b + 4u * i;
        vb[i] = vec4(ro_v[j], ro_v[j + 1u], ro_v[j + 2u], ro_v[j + 3u]);
    }
    float d;
    int s0;
    uvec4 w = round16(vb, d, s0);
    uint o = p.xr_off, n = p.nrows;
    [[unroll]] for (uint i = 0; i < 4u; ++i) yw[o + 4u * e + i] = w[i];
    y[o + n / 4u + 2u * e] = d;
    y[o + n / 4u + 2u * e + 1u] = d * float(s0);
}
#endif
