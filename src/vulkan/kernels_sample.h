// Launchers of the choice of the next token on the device: argmax, and sampling with temperature,
// top-k, top-p and min-p (in chunks over a large vocabulary).
#pragma once

#include <cstdint>

#include "vulkan/kernel_family.h"

namespace dl::vk {

// The rows of a batch that one sampling dispatch a pass serves: row r's words tok_row · r words
// into tok, its logits logits_row · r floats on and its scratch scratch_row · r bytes on.
struct SampleRows {
    uint32_t rows = 1, tok_row = 0, logits_row = 0;
    uint64_t scratch_row = 0;
};

class SampleKernels : public virtual KernelFamily {
  public:
    SampleKernels(Device& dev, Pipelines& pipes) : KernelFamily(dev, pipes) {}

    // out[out_off] = index of the largest of logits[l_off .. l_off + n).
    void argmax(CommandList& cl, View logits, uint32_t l_off, uint32_t n, View out,
                uint32_t out_off);
    // The next token from n logits (see shaders/sample.comp): parameters at tok[par ..]
    // (temperature, top_k, top_p, min_p, u), the id to tok[out_idx]. Temperature <= 0: argmax.
    // With a scratch of sample_scratch_bytes(n) and n over one chunk (sample_chunk logits),
    // a first pass keeps each chunk's candidates (shaders/sample_chunks.comp) and the choice
    // runs over those; a barrier between the two passes is recorded here.
    static constexpr uint32_t kSampleTopK = 256;  // the largest top_k sampled on the device
    // rows: the rows of a batch in one dispatch a pass (SampleRows).
    void sample(CommandList& cl, View logits, uint32_t l_off, uint32_t n, View tok,
                uint32_t out_idx, uint32_t par, View scratch = {}, const SampleRows& rows = {});
    static uint64_t sample_scratch_bytes(uint32_t n);
};

}  // namespace dl::vk
