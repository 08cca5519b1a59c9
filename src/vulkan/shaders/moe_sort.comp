// The (row, slot) pairs of a window's expert choice grouped by expert, so the expert GEMVs
// (gemv_batch.comp EXPERTS over this order) find runs of vectors that read the same expert's
// rows, which the workgroup then reads from memory once for the run: pair = row · k + slot,
// expert route[route_off + row · 2k + slot] (moe_route.comp). One workgroup: a histogram of the
// experts in shared memory, its exclusive prefix sum (each invocation sums its run of up to four
// experts, then a scan over the invocations' sums), then each pair placed at its expert's next
// free position. Within an expert the pairs' order depends on the atomics' order; each vector's
// result does not (the GEMV computes every vector alike, whatever its neighbours).
// With tile_rows, also the table of the grouped GEMM tiles (gemm_experts.comp) at tiles_off:
// the number of tiles, then for each its expert and the first and end positions of its pairs,
// each expert's run cut into tiles of at most tile_rows pairs. With inv_off, also each pair's
// position in that order at inv_off + pair (where the expert GEMMs that write in that order
// left its output, for the weighted sums).
#version 450

layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer Route { uint route[]; };

layout(push_constant) uniform Push {
    uint n_pairs;    // rows · k
    uint k;
    uint n_expert;   // at most MAX_EXPERTS
    uint route_off;  // words
    uint perm_off;   // words: where the n_pairs pair indices go
    uint tile_rows;  // 0: no table of tiles
    uint tiles_off;  // words
    uint inv_off;    // words: where each pair's position goes (0xffffffff: nowhere)
} p;

const uint MAX_EXPERTS = 1024u;
shared uint count[MAX_EXPERTS];
shared uint scan_pairs[256], scan_tiles[256];  // the invocations' sums, scanned

void main() {
    uint t = gl_LocalInvocationID.x;
    for (uint e = t; e < p.n_expert; e += 256u) count[e] = 0u;
    barrier();
    for (uint i = t; i < p.n_pairs; i += 256u)
        atomicAdd(count[route[p.route_off + (i / p.k) * 2u * p.k + i % p.k]], 1u);
    barrier();
    // Exclusive prefix sums of the pairs and of the tiles: each expert's first position and its
    // first tile. Invocation t takes experts [t · run, t · run + run).
    const uint run = (p.n_expert + 255u) / 256u;
    const uint e0 = min(t * run, p.n_expert), e1 = min(e0 + run, p.n_expert);
    uint pairs = 0u, tiles = 0u;
    for (uint e = e0; e < e1; ++e) {
        pairs += count[e];
        if (p.tile_rows != 0u) tiles += (count[e] + p.tile_rows - 1u) / p.tile_rows;
    }
    scan_pairs[t] = pairs;
    scan_tiles[t] = tiles;
    barrier();
    for (uint d = 1u; d < 256u; d <<= 1) {  // inclusive scan over the invocations
        uint a = t >= d ? scan_pairs[t - d] : 0u, b = t >= d ? scan_tiles[t - d] : 0u;
        barrier();
        scan_pairs[t] += a;
        scan_tiles[t] += b;
        barrier();
    }
    uint s = scan_pairs[t] - pairs, tile = scan_tiles[t] - tiles;
    for (uint e = e0; e < e1; ++e) {
        uint c = count[e];
        count[e] = s;
        for (uint r = 0u; p.tile_rows != 0u && r < c; r += p.tile_rows) {
            uint at = p.tiles_off + 1u + 3u * tile++;
            route[at] = e;
            route[at + 1u] = s + r;
            route[at + 2u] = s + min(r + p.tile_rows, c);
        }
        s += c;
    }
    if (t == 255u && p.tile_rows != 0u) route[p.tiles_off] = scan_tiles[255];
    barrier();
    for (uint i = t; i < p.n_pairs; i += 256u) {
        uint e = route[p.route_off + (i / p.k) * 2u * p.k + i % p.k];
        const uint pos = atomicAdd(count[e], 1u);
        route[p.perm_off + pos] = i;
        if (p.inv_off != 0xffffffffu) route[p.inv_off + i] = pos;
    }
}
