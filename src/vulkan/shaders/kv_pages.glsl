// The paged KV cache (Kernels::kKvBlock): a sequence's cache rows live in blocks of KV_BLOCK rows
// of a pool that every sequence shares, in the pool blocks its block table names. The table
// follows the sequence's token words in tok, from word KV_TABLE: pool block of its block 0, 1, ...
// Kernels walk keys in chunks or tiles that divide KV_BLOCK and start at a multiple of their
// length, so none straddles two blocks; they never look up a block past the rows they may read.
// The includer declares tok.
const uint KV_BLOCK = 64u;
const uint KV_TABLE = 64u;

// Where the sequence's words start in tok (a batch's row: its row's words; else 0).
uint kv_words = 0u;

// The pool row that holds row r of the sequence.
uint kv_row(uint r) {
    return tok[kv_words + KV_TABLE + r / KV_BLOCK] * KV_BLOCK + r % KV_BLOCK;
}
