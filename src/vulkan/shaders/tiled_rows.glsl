// Where the bytes of a Q4_K or Q6_K block lie in a matrix the device holds in tiles of 32 rows
// (weight_layout.h, kTileRows). A row is named by a handle, tiled_row(r, row_bytes): the byte
// its tile starts at, plus its lane (its place in the tile). Tiles start at multiples of 32
// bytes from the matrix (32 · row_bytes apart), so the two parts stay apart: the lane is the
// handle's low five bits. A byte offset added to a handle must be a multiple of 32.
uint tiled_row(uint r, uint row_bytes) { return (r >> 5) * (32u * row_bytes) + (r & 31u); }

// Byte o of the GGUF bytes of column block i of the row with handle h, for blocks of bs bytes
// (Q4_K 144, Q6_K 210): o lies in a 16-byte field, which the tile holds lane by lane, or is one
// of Q6_K's two bytes of d (o >= 208), held lane by lane after the fields. Bytes o .. o + n of
// one field are contiguous.
uint tiled_byte(uint h, uint i, uint bs, uint o) {
    uint lane = h & 31u, chunk = (h - lane) + i * (bs * 32u);
    if (o >= 208u) return chunk + 208u * 32u + 2u * lane + (o - 208u);
    return chunk + (o >> 4) * 512u + 16u * lane + (o & 15u);
}
