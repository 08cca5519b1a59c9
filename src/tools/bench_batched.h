// `deltallm bench -b 1,8,32`: rows with llama-batched-bench's semantics. B sequences each read a
// prompt of p random tokens (one step carrying all B prompts), then generate n tokens (n steps,
// each carrying one token of every sequence); prompt and generation speeds are aggregate tokens/s
// over the B sequences.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "executor/executor.h"

namespace dl::tools {

struct BatchedTest {
    int64_t n_seq = 1, n_prompt = 0, n_gen = 0;
    std::vector<double> pp_tps, tg_tps;  // aggregate, one per repetition
    std::string name() const;            // "B8 pp512+tg128"
};

// One repetition: fresh sessions (not timed), the prompts in one step, one untimed generation
// step, then the timed generation steps.
// Appends the measured rates to t.
void run_batched(Executor& ex, BatchedTest& t, std::mt19937& rng);

}  // namespace dl::tools
