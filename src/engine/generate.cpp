// The generate loop, with the timings the front-ends print.
#include "engine/generate.h"

#include <chrono>

#include "core/error.h"
#include "core/mapped_file.h"
#include "model/model.h"

namespace dl {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

GenerateStats generate(Executor& executor, SessionState& session, Sampler& sampler,
                       std::span<const int32_t> prompt, const GenerateOptions& options,
                       const OnToken& on_token) {
    GenerateStats st;
    if (prompt.empty()) fail("the prompt is empty: give at least one token");
    const int64_t n_vocab = executor.model().hp.n_vocab;
    for (int32_t t : prompt)
        if (t < 0 || t >= n_vocab)
            fail("token id {} is out of range (the vocabulary has {})", t, n_vocab);
    if (session.n_past + (int64_t)prompt.size() > session.n_ctx)
        fail(
            "the prompt of {} tokens does not fit the context of {} tokens ({} already used); "
            "raise it with -c",
            prompt.size(), session.n_ctx, session.n_past);

    std::vector<float> logits;
    const int64_t first_pos = session.n_past;
    const bool all = options.all_prompt_logits;
    auto t0 = Clock::now();
    executor.prefill(session, prompt, all ? LogitsRows::all : LogitsRows::last, logits);
    st.prompt_seconds = since(t0);
    st.n_prompt = (int64_t)prompt.size();
    for (int32_t t : prompt) sampler.accept(t);

    const int64_t n_rows = all ? st.n_prompt : 1;
    if ((int64_t)logits.size() != n_rows * n_vocab)
        fail("the {} executor returned {} logits instead of {}", executor.name(), logits.size(),
             n_rows * n_vocab);
    if (options.on_logits) {
        for (int64_t r = 0; r < n_rows; ++r)
            options.on_logits(all ? first_pos + r : session.n_past - 1,
                              std::span<const float>(logits).subspan(r * n_vocab, n_vocab));
    }
    std::span<const float> row =
        std::span<const float>(logits).subspan((n_rows - 1) * n_vocab, n_vocab);

    // The executor samples itself when it can and nobody asked for the logits: then only the
    // chosen id crosses back, and the host sampler only supplies its random draw.
    const bool on_device = !options.on_logits && executor.samples_on_device(sampler.params());
    int32_t next = -1;  // a token the executor already chose
    for (int64_t i = 0; options.n_predict < 0 || i < options.n_predict; ++i) {
        auto ts = Clock::now();
        const int32_t tok = next >= 0 ? next : sampler.sample(row);
        st.sample_seconds += since(ts);
        sampler.accept(tok);
        ++st.n_generated;
        const bool eog = options.is_eog && options.is_eog(tok);
        const bool go_on = on_token ? on_token(tok) : true;
        if (eog) {
            st.stopped_at_eog = true;
            break;
        }
        if (!go_on || (options.n_predict >= 0 && i + 1 >= options.n_predict)) break;
        if (session.n_past >= session.n_ctx) {
            st.stopped_at_context = true;
            break;
        }
        auto td = Clock::now();
        if (on_device) {
            next = executor.decode_sample(session, tok, sampler.params(), sampler.draw());
            st.decode_seconds += since(td);
            ++st.n_decoded;
            if (next < 0 || next >= n_vocab)
                fail("the {} executor sampled token {} outside the vocabulary", executor.name(),
                     next);
            continue;
        }
        row = executor.decode(session, tok);
        st.decode_seconds += since(td);
        ++st.n_decoded;
        if ((int64_t)row.size() != n_vocab)
            fail("the {} executor returned {} logits instead of {}", executor.name(), row.size(),
                 n_vocab);
        if (options.on_logits) options.on_logits(session.n_past - 1, row);
    }
    // Weights read from a model file truncated meanwhile were zeros: the text is not the model's.
    check_mapped_files();
    return st;
}

}  // namespace dl
