// `deltallm perplexity -m M -f FILE [-c 512] [-b N] [--chunks N]`: how well a model predicts a
// text, measured the way llama-perplexity measures it so the numbers can be compared: the text is
// tokenized once (with BOS where the model wants one), cut into non-overlapping windows of c
// tokens, each window evaluated from an empty state, and only the second half of each window's
// predictions scored, so every scored token has at least c/2 tokens of context.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tools/common.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

struct PerplexityArgs {
    ModelArgs model;
    std::string file;
    int64_t n_window = 512;
    int64_t n_batch = 0;    // 0: the whole window in one prefill
    int64_t n_chunks = -1;  // -1: every whole window of the text
};

// Negative log-likelihood of `target` under one row of logits, in nats (log-sum-exp in double).
double token_nll(std::span<const float> row, int32_t target) {
    const float mx = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (float v : row) sum += std::exp((double)v - mx);
    return std::log(sum) + mx - (double)row[(size_t)target];
}

int perplexity(PerplexityArgs& a) {
    const int64_t c = a.n_window;
    // With fewer than 4 tokens the scored half of a window would be empty or a single token
    // with no context worth the name.
    if (c < 4) fail("-c must be at least 4 tokens, not {}", c);
    if (a.n_batch < 0) fail("-b must be 0 (the whole window) or more, not {}", a.n_batch);
    if (a.n_chunks == 0 || a.n_chunks < -1)
        fail("--chunks must be a positive number of windows (or -1 for all), not {}", a.n_chunks);
    if (a.file.empty()) fail("no text: give one with -f FILE");
    const std::string text = read_text_file(a.file);

    a.model.n_ctx = c;  // one session holds one window
    std::unique_ptr<Engine> engine = a.model.open();
    const tokenizer::Tokenizer& tok = engine->tokenizer();
    const int64_t n_vocab = engine->model().hp.n_vocab;
    std::fprintf(stderr, "deltallm: perplexity of %s on %s\n", a.file.c_str(),
                 engine->executor().name().c_str());

    std::vector<int32_t> tokens = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
    const int64_t n_tokens = (int64_t)tokens.size();
    // llama-perplexity asks for two windows' worth of text; the same rule keeps the numbers
    // comparable and an estimate from one window is too noisy to report anyway.
    if (n_tokens < 2 * c)
        fail(
            "{} tokenizes to {} tokens, and -c {} needs at least {}: give a longer text or a "
            "smaller -c",
            a.file, n_tokens, c, 2 * c);
    int64_t n_chunk = n_tokens / c;
    if (a.n_chunks > 0) n_chunk = std::min(n_chunk, a.n_chunks);
    const int64_t batch = a.n_batch > 0 ? std::min(a.n_batch, c) : c;
    const bool bos_first = tok.vocab().add_bos && tok.bos() >= 0;
    const int64_t first = c / 2;  // the first prediction scored in a window

    double nll = 0, nll2 = 0, scored_bytes = 0;
    int64_t count = 0;
    std::vector<float> logits;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t k = 0; k < n_chunk; ++k) {
        const int64_t start = k * c;
        // Every window starts like a document: with BOS in place of its first token when the
        // model was trained with one (the token it replaces is never scored).
        std::vector<int32_t> window(tokens.begin() + start, tokens.begin() + start + c);
        if (bos_first) window[0] = tok.bos();
        auto session = engine->executor().new_session(c);
        // The logits at position i predict token i + 1: positions first .. c-2 are scored, each
        // from the prefill piece that computed it (no window's worth of logits is kept).
        for (int64_t b = 0; b < c; b += batch) {
            const int64_t n = std::min(batch, c - b);
            engine->executor().prefill(*session, std::span(window).subspan((size_t)b, (size_t)n),
                                       LogitsRows::all, logits);
            for (int64_t i = std::max(b, first); i < std::min(b + n, c - 1); ++i) {
                const int32_t target = tokens[(size_t)(start + i + 1)];
                const double v = token_nll(
                    std::span<const float>(logits).subspan((size_t)((i - b) * n_vocab), n_vocab),
                    target);
                nll += v;
                nll2 += v * v;
                ++count;
                if (!tok.is_control(target)) scored_bytes += (double)tok.token_text(target).size();
            }
        }
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "[%lld/%lld] PPL %.4f (%lld tokens scored, %.1f s)\n",
                     (long long)(k + 1), (long long)n_chunk, std::exp(nll / count),
                     (long long)count, s);
    }

    // The standard error of the mean NLL, carried to the perplexity to first order
    // (d exp(x) = exp(x) dx), as llama-perplexity reports it.
    const double mean = nll / count;
    const double ppl = std::exp(mean);
    const double var = nll2 / count - mean * mean;
    const double err = var > 0 && count > 1 ? std::sqrt(var / (count - 1)) * ppl : 0.0;
    std::printf("PPL = %.4f +/- %.5f\n", ppl, err);
    std::printf("bits per byte = %.4f (%lld tokens, %.0f bytes scored in %lld windows of %lld)\n",
                scored_bytes > 0 ? nll / std::log(2.0) / scored_bytes : 0.0, (long long)count,
                scored_bytes, (long long)n_chunk, (long long)c);
    return 0;
}

Registrar reg("perplexity", "perplexity of a text, scored as llama-perplexity does",
              [](CLI::App& app) -> Run {
                  auto a = std::make_shared<PerplexityArgs>();
                  a->model.add_to(app, /*with_device=*/false);
                  app.add_option("--device", a->model.device,
                                 "where to run: auto, cpu, vulkan or vulkan:N")
                      ->capture_default_str();
                  app.add_option("-f,--file", a->file, "the text to score");
                  app.add_option("-c,--ctx", a->n_window,
                                 "window size in tokens; the second half of each is scored")
                      ->capture_default_str();
                  app.add_option("-b,--batch", a->n_batch,
                                 "tokens per prefill within a window (0: the whole window)")
                      ->capture_default_str();
                  app.add_option("--chunks", a->n_chunks,
                                 "score at most this many windows (-1: all)")
                      ->capture_default_str();
                  return [a] { return perplexity(*a); };
              });

}  // namespace

}  // namespace dl::tools
