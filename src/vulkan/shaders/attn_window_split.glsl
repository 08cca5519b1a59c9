// A window's attention split over its keys (AttentionKernels::attention_rows_split): grid z is
// the part, of p.splits. The key tiles that every row of the window sees whole (those before
// tok[0]) are dealt out evenly; the last part takes the rest, the window's own keys among them.
// So no part but the last meets the causal mask, and the last sees a key every row sees (its
// maxima are finite); a part finds no keys where the history is short. Each part leaves its
// unnormalized output, running maxima and sums in the split scratch (gemm_split.glsl: a block's
// parts, QVEC · (HEAD + 2) floats each: the output [QVEC][HEAD], the maxima [QVEC], the sums
// [QVEC]); the last part of a block to finish merges them in part order, so the merged output
// does not depend on which part finished first.
// The includer defines QVEC (query vectors a workgroup), HEAD (head_dim) and NEG_INF, and
// includes gemm_split.glsl (p.splits, split_u, split_f) first.

// The keys [kb0, kb1) this part walks, of a block whose last row sees n_keys keys, the window at
// position pos0, in tiles of `tile` keys.
void split_keys(uint pos0, uint n_keys, uint tile, out uint kb0, out uint kb1) {
    kb0 = 0u;
    kb1 = n_keys;
    if (p.splits <= 1u) return;
    const uint whole = pos0 / tile, z = gl_WorkGroupID.z;
    kb0 = z * whole / p.splits * tile;
    if (z + 1u < p.splits) kb1 = (z + 1u) * whole / p.splits * tile;
}

// The workgroup's block of rows and heads, as the scratch counts them.
uint split_block() {
    return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}

// Where part z's output of query vector q at dim d, its running max and its sum lie.
uint split_out(uint z, uint q, uint d) {
    return split_part(split_block(), z, QVEC * (HEAD + 2u)) + q * HEAD + d;
}
uint split_max(uint z, uint q) {
    return split_part(split_block(), z, QVEC * (HEAD + 2u)) + QVEC * HEAD + q;
}
uint split_sum(uint z, uint q) {
    return split_max(z, q) + QVEC;
}

const uint SPLIT_MAX_PARTS = 16u;  // AttentionKernels::kWindowParts

// Part z's weight in query vector q's merged output: exp(m_z - M) / L, M the largest of the
// parts' maxima and L the sum of their sums so rescaled (a part that saw no keys weighs 0).
// Called by the last part only; `weights` receives all parts' weights of q.
void split_weights(uint q, out float weights[SPLIT_MAX_PARTS]) {
    float mx = NEG_INF;
    for (uint z = 0u; z < p.splits; ++z) mx = max(mx, split_f[split_max(z, q)]);
    float total = 0.0;
    for (uint z = 0u; z < p.splits; ++z) {
        const float m = split_f[split_max(z, q)];
        weights[z] = m == NEG_INF ? 0.0 : exp(m - mx);
        total += weights[z] * split_f[split_sum(z, q)];
    }
    for (uint z = 0u; z < p.splits; ++z) weights[z] /= total;
}
