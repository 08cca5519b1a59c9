// The batched rows of `deltallm bench` (see bench_batched.h).
#include "tools/bench_batched.h"

#include <chrono>

#include <fmt/format.h>

#include "model/model.h"

namespace dl::tools {

std::string BatchedTest::name() const {
    return fmt::format("B{} pp{}+tg{}", n_seq, n_prompt, n_gen);
}

void run_batched(Executor& ex, BatchedTest& t, std::mt19937& rng) {
    using Clock = std::chrono::steady_clock;
    const int64_t n_vocab = ex.model().hp.n_vocab;
    std::uniform_int_distribution<int32_t> pick(0, (int32_t)n_vocab - 1);
    const int64_t B = t.n_seq, n_ctx = t.n_prompt + t.n_gen + 2;
    std::vector<std::unique_ptr<SessionState>> sessions;
    for (int64_t i = 0; i < B; ++i) sessions.push_back(ex.new_session(n_ctx));
    // Every sequence needs a prompt to decode after: at least one token, not timed when p is 0.
    const int64_t p = std::max<int64_t>(t.n_prompt, 1);
    std::vector<std::vector<int32_t>> prompts(B, std::vector<int32_t>((size_t)p));
    for (auto& pr : prompts)
        for (auto& x : pr) x = pick(rng);
    std::vector<StepItem> items((size_t)B);
    for (int64_t i = 0; i < B; ++i) {
        items[i].session = sessions[i].get();
        items[i].tokens = prompts[i];
    }
    auto t0 = Clock::now();
    ex.step(items);
    const double pp_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (t.n_prompt > 0) t.pp_tps.push_back(double(B * t.n_prompt) / pp_s);
    if (t.n_gen <= 0) return;
    std::vector<int32_t> next((size_t)(B * (t.n_gen + 1)));
    for (auto& x : next) x = pick(rng);
    // One untimed generation step first: an executor that records a command for each new
    // composition of sequences (the Vulkan driver) does it there.
    for (int64_t i = 0; i < B; ++i)
        items[i].tokens = std::span<const int32_t>(&next[(size_t)(t.n_gen * B + i)], 1);
    ex.step(items);
    t0 = Clock::now();
    for (int64_t k = 0; k < t.n_gen; ++k) {
        for (int64_t i = 0; i < B; ++i)
            items[i].tokens = std::span<const int32_t>(&next[(size_t)(k * B + i)], 1);
        ex.step(items);
    }
    const double tg_s = std::chrono::duration<double>(Clock::now() - t0).count();
    t.tg_tps.push_back(double(B * t.n_gen) / tg_s);
}

}  // namespace dl::tools
