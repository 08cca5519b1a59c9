// The k-th largest key among a workgroup's entries, by radix selection over the key's four bytes
// from the top: each pass counts the entries still in the running by their next byte (a
// histogram in shared memory), finds the byte whose suffix sum reaches the rank still wanted,
// and keeps only the entries with that byte. Four passes over the entries where a binary search
// over the 32 bits took 32, each with a workgroup reduction.
// The includer declares WG, `shared uint kth_hist[256], kth_tmp[256], kth_sel[2]` and
// `bool kth_key_of(uint i, out uint key)` (entry i < n; false: no entry). Every thread of the
// workgroup calls kth_largest_key with the same n and k; with fewer than k entries it returns 0
// (every key is at or above it).
uint kth_largest_key(uint n, uint k) {
    const uint t = gl_LocalInvocationID.x;
    uint prefix = 0u, mask = 0u, remaining = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (uint b = t; b < 256u; b += WG) kth_hist[b] = 0u;
        barrier();
        for (uint i = t; i < n; i += WG) {
            uint kv;
            if (kth_key_of(i, kv) && (kv & mask) == prefix)
                atomicAdd(kth_hist[(kv >> uint(shift)) & 255u], 1u);
        }
        barrier();
        // Suffix sums: kth_hist[b] becomes the count of entries whose byte is b or above.
        for (uint s = 1u; s < 256u; s <<= 1) {
            for (uint b = t; b < 256u; b += WG)
                kth_tmp[b] = kth_hist[b] + (b + s < 256u ? kth_hist[b + s] : 0u);
            barrier();
            for (uint b = t; b < 256u; b += WG) kth_hist[b] = kth_tmp[b];
            barrier();
        }
        if (kth_hist[0] < remaining) return 0u;  // fewer than k entries (first pass only)
        for (uint b = t; b < 256u; b += WG) {
            uint above = b < 255u ? kth_hist[b + 1u] : 0u;
            if (kth_hist[b] >= remaining && above < remaining) {
                kth_sel[0] = b;
                kth_sel[1] = remaining - above;
            }
        }
        barrier();
        prefix |= kth_sel[0] << uint(shift);
        mask |= 255u << uint(shift);
        remaining = kth_sel[1];
        barrier();  // kth_hist and kth_sel are written again by the next pass
    }
    return prefix;
}
