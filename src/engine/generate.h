// The generate loop: prefill a prompt into a session, then sample and decode one token at a time
// until n tokens, an end-of-generation token, the end of the context, or the caller says stop.
// It works on a session that already holds tokens (a chat appends turns without re-prefilling).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "engine/sampler.h"
#include "executor/executor.h"

namespace dl {

struct GenerateOptions {
    int64_t n_predict = 128;  // tokens to generate; < 0: until end of generation or context
    // Stop at a token is_eog() accepts (it is reported to on_token, not fed to the model).
    std::function<bool(int32_t)> is_eog;
    // Every prompt position's logits are computed (for dumps); otherwise only the last one.
    bool all_prompt_logits = false;
    // Called with the logits of each evaluated position, in order: position is the index in
    // the session (n_past before the token was appended).
    std::function<void(int64_t position, std::span<const float> logits)> on_logits;
};

struct GenerateStats {
    int64_t n_prompt = 0;       // tokens prefilled by this call
    double prompt_seconds = 0;  // prefill, up to the first logits
    int64_t n_generated = 0;    // tokens sampled (an end-of-generation token included)
    int64_t n_decoded = 0;      // single-token forward passes
    double decode_seconds = 0;  // time in those passes
    double sample_seconds = 0;  // time choosing tokens
    bool stopped_at_eog = false;
    bool stopped_at_context = false;

    double prompt_tokens_per_second() const {
        return prompt_seconds > 0 ? n_prompt / prompt_seconds : 0;
    }
    // Generation speed: sampled tokens over the time spent producing them after the prompt
    // (decode passes and sampling).
    double generation_tokens_per_second() const {
        double t = decode_seconds + sample_seconds;
        return t > 0 ? n_generated / t : 0;
    }
};

// Returns false to stop generating after this token.
using OnToken = std::function<bool(int32_t token)>;

// Prefills `prompt` (at least one token) after whatever the session holds, then generates.
// Prompt tokens are recorded in the sampler's history. A sampled token is fed to the model only
// when another one follows, so the last token of a run (or the end-of-generation token) is not
// in the session: a caller that continues the session feeds it first. Throws dl::Error when the
// prompt does not fit the session's context.
GenerateStats generate(Executor& executor, SessionState& session, Sampler& sampler,
                       std::span<const int32_t> prompt, const GenerateOptions& options,
                       const OnToken& on_token);

}  // namespace dl
