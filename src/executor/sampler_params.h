// What a caller asks of the choice of the next token: the sampling filters and their seed. Here,
// below the executors, because an executor that samples where the logits are (the Vulkan
// driver) takes them as well as the host sampler (engine/sampler.h).
#pragma once

#include <cstdint>

namespace dl {

struct SamplerParams {
    float temperature = 0.8f;     // <= 0: greedy (argmax after the repetition penalty)
    int32_t top_k = 40;           // <= 0: off
    float top_p = 0.95f;          // >= 1: off
    float min_p = 0.05f;          // <= 0: off; keeps p >= min_p * p_max
    float repeat_penalty = 1.0f;  // 1: off; > 1 discourages tokens seen in the last N
    // OpenAI's penalties over the same last N tokens, subtracted from the logits: presence once
    // for a token seen at all, frequency once for each time it was seen. 0: off.
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    int32_t repeat_last_n = 64;  // N; 0: off, -1: the whole history
    uint64_t seed = 0;           // same seed and same logits => same tokens
};

}  // namespace dl
