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

// The word that tells the workgroup whether it arrived last: a shared word of its own, or one
// the includer can spare after its main loop (SPLIT_FLAG_STORE / SPLIT_FLAG_IS_SET), where one
// word more would pass the device's shared memory.
#ifndef SPLIT_FLAG_STORE
shared uint split_arrived_last;
#define SPLIT_FLAG_STORE(v) split_arrived_last = (v) ? 1u : 0u
#define SPLIT_FLAG_IS_SET() (split_arrived_last != 0u)
#endif

// After this part's sums are stored: whether this workgroup is the tile's last part (then every
// part's sums are visible to it). Called by every invocation of the workgroup.
bool split_last(uint tile) {
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u)
        SPLIT_FLAG_STORE(atomicAdd(split_u[tile], 1u) == p.splits - 1u);
    barrier();
    if (!SPLIT_FLAG_IS_SET()) return false;
    memoryBarrierBuffer();
    if (gl_LocalInvocationIndex == 0u) split_u[tile] = 0u;
    return true;
}
