// Launchers of the choice of the next token (see kernels_sample.h); push-constant layouts mirror
// the shaders.

#include <algorithm>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct ArgmaxPush {
    uint32_t n, l_off, out_off;
};
struct SamplePush {
    uint32_t n, l_off, out_idx, par, tok_row, l_row;
};

}  // namespace

void SampleKernels::argmax(CommandList& cl, View logits, uint32_t l_off, uint32_t n, View out,
                           uint32_t out_off) {
    uint32_t wg = wg_size(1024);
    const Kernel& k = pipes_.get("argmax", 2, sizeof(ArgmaxPush), {wg});
    ArgmaxPush p{n, l_off, out_off};
    cl.dispatch(k, {logits, out}, p, 1);
}

uint64_t SampleKernels::sample_scratch_bytes(uint32_t n) {
    // Chunks of at least 256 logits, each keeping up to kSampleTopK (logit, index) pairs.
    return std::max<uint64_t>((uint64_t)(n + 255) / 256 * 256 * 8, 16);
}

void SampleKernels::sample(CommandList& cl, View logits, uint32_t l_off, uint32_t n, View tok,
                           uint32_t out_idx, uint32_t par, View scratch, const SampleRows& rows) {
    uint32_t wg = wg_size(1024);
    const uint32_t chunk = tuning.sample_chunk;
    if (chunk % 256 || chunk == 0)
        fail("a sampling chunk of {} logits: not a multiple of 256", chunk);
    if (rows.rows == 0) fail("sampling no rows");
    const uint32_t chunks = (n + chunk - 1) / chunk;
    if (chunks <= 1 || scratch.buffer == VK_NULL_HANDLE) {
        const Kernel& k = pipes_.get("sample", 2, sizeof(SamplePush), {wg});
        SamplePush p{n, l_off, out_idx, par, rows.tok_row, rows.logits_row};
        cl.dispatch(k, {logits, tok}, p, rows.rows);
        return;
    }
    // Each chunk keeps min(top_k, chunk) pairs: at most kSampleTopK for chunks past 256.
    const uint64_t slots = (uint64_t)chunks * std::min(chunk, kSampleTopK);
    const uint64_t last = (uint64_t)(rows.rows - 1) * rows.scratch_row;  // the last row's start
    if (rows.scratch_row % 8 || (rows.rows > 1 && rows.scratch_row < slots * 8) ||
        scratch.range < last + slots * 8 || slots * 8 > sample_scratch_bytes(n))
        fail("the sampling scratch holds {} bytes in rows of {}; {} chunks need {} a row",
             scratch.range, rows.scratch_row, chunks, slots * 8);
    struct ChunkPush {
        uint32_t n, l_off, par, tok_row, l_row, cand_row;
    };
    const uint32_t cand_row = (uint32_t)(rows.scratch_row / 8);
    const Kernel& k1 = pipes_.get("sample_chunks", 3, sizeof(ChunkPush), {wg_size(256), chunk});
    cl.dispatch(k1, {logits, tok, scratch},
                ChunkPush{n, l_off, par, rows.tok_row, rows.logits_row, cand_row}, chunks,
                rows.rows);
    cl.barrier();
    // The choice over chunks · min(top_k, chunk) entries (top_k is read from tok there).
    const Kernel& k2 = pipes_.get("sample_cand", 2, sizeof(SamplePush), {wg});
    cl.dispatch(k2, {scratch, tok}, SamplePush{chunks, chunk, out_idx, par, rows.tok_row, cand_row},
                rows.rows);
}

}  // namespace dl::vk
