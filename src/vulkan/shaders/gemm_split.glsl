// A GEMM tile split over K (workgroup z the part, p.splits parts): each part leaves its sums
// in the split scratch (split_f, binding 4: a tile's parts, tile_elems floats each) and counts
// itself in its tile's counter (split_u, binding 3: one a tile, zero between dispatches; the
// counters lie apart from the sums, so a scratch whose sums another GEMM wrote before still
// starts with its counters at zero). The last part of a tile to arrive adds them all in part
// order, so a sum does not depend on which part finished first; it sets the tile's counter
// back to zero for the next dispatch.

// The first float of part z of tile `tile`.
uint split_part(uint tile, uint z, uint tile_elems) {
    return (tile * p.splits + z) * tile_elems;
}

shared uint split_arrived_last;

// After this part's sums are stored: whether this workgroup is the tile's last part (then every
// part's sums are visible to it). Called by every invocation of the workgroup.
bool split_last(uint tile) {
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u)
        split_arrived_last = atomicAdd(split_u[tile], 1u) == p.splits - 1u ? 1u : 0u;
    barrier();
    if (split_arrived_last == 0u) return false;
    memoryBarrierBuffer();
    if (gl_LocalInvocationIndex == 0u) split_u[tile] = 0u;
    return true;
}
