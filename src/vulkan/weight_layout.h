// The byte order of a weight matrix on the device. Every block format keeps its GGUF rows byte
// for byte except Q4_K and Q6_K, the formats of nearly every byte of a Q4_K_M file, whose rows
// the device holds in tiles of kTileRows rows:
//  - a matrix of R rows is ceil(R / kTileRows) tiles, the last one padded with zero rows, so it
//    takes device_bytes() bytes, up to kTileRows - 1 rows more than its GGUF bytes;
//  - a tile of rows of nb blocks is nb chunks, one a 256-value column block kb, each as many
//    bytes as the tile's blocks of that column (kTileRows · 144 for Q4_K, kTileRows · 210 for
//    Q6_K);
//  - inside a chunk, each 16-byte field of a block (bytes 16f .. 16f + 15 of its GGUF bytes:
//    Q4_K's header, then its eight words of nibbles; Q6_K's eight words of low nibbles, four of
//    high bits, its sixteen scales) lies side by side for the tile's rows, field f of lane l (the
//    row's place in its tile) at 16 (f · kTileRows + l); Q6_K's f16 d, the last two bytes of its
//    block, lie after the 13 fields, lane by lane.
// So a GEMV that gives each invocation one row's whole block reads, with a subgroup of
// kTileRows, one contiguous 512 bytes a load instruction, and holds every load of a block in
// flight at once: on an H200 the tiled Q4_K GEMV streamed at 4.55 TB/s past its fixed cost where
// the rows in GGUF order streamed at 3.2 (docs/perf/history.md 2026-12-02, afternoon). Every field
// is 16-byte aligned wherever the matrix is. Readers find a field through shaders/tiled_rows.glsl.
#pragma once

#include <cstdint>

#include "quant/types.h"

namespace dl::vk {

// Rows a tile.
inline constexpr uint32_t kTileRows = 32;

// True where the device holds rows of type t in tiles rather than in GGUF order.
bool tiled(QType t);

// The bytes the device holds for `rows` rows of `cols` values of type t.
uint64_t device_bytes(QType t, uint64_t cols, uint64_t rows);

// `rows` rows of `cols` values of type t from their GGUF bytes (src) into the device's byte
// order (dst, device_bytes(t, cols, rows) bytes; src and dst must not overlap). A matrix may be
// laid out in parts of whole tiles: part p of its rows goes to device_bytes(t, cols, first row
// of p) bytes into its device bytes.
void to_device_layout(QType t, uint32_t cols, uint64_t rows, const uint8_t* src, uint8_t* dst);

// The same tiled order for tiles of any number of rows (to_device_layout's for kTileRows; the
// GEMV speed report also measures others): `rows` Q4_K or Q6_K rows into dst, ceil(rows / tile)
// tiles of `tile` rows, the last padded with zero rows.
void to_tiles(QType t, uint32_t cols, uint64_t rows, uint32_t tile, const uint8_t* src,
              uint8_t* dst);

}  // namespace dl::vk
