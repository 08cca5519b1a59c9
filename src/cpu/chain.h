// The CPU chain: the reference executor for every architecture. Prefill runs the prompt in
// windows of tokens, each window through every layer at once (batched matrix products, the
// chunked DeltaNet); decode runs one token with the DeltaNet step and no allocation. Threads come
// from a ThreadPool (the process-wide one unless given).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "executor/executor.h"

namespace dl {
class ThreadPool;
}

namespace dl::cpu {

struct ChainOptions {
    // Attention KV rows in f32 instead of f16: twice the memory, no rounding of keys and values
    // (for parity runs against float references).
    bool f32_kv_cache = false;
    // Prompt tokens per pass through the layers (bounds the prefill scratch memory).
    int64_t window = 128;
    // Tokens per chunk of the chunked DeltaNet.
    int64_t deltanet_chunk = 64;
};

struct ChainWeights;
struct ChainSession;

class Chain final : public Executor {
  public:
    // Checks that the model can run here and converts its small per-channel parameters (norms,
    // conv taps, gates) to f32; the matrices are read in place from the mapping.
    explicit Chain(std::shared_ptr<const Model> model, ChainOptions options = {},
                   ThreadPool* pool = nullptr);
    ~Chain() override;

    std::string name() const override { return "cpu"; }
    const Model& model() const override { return *model_; }
    const ChainOptions& options() const { return options_; }

    std::unique_ptr<SessionState> new_session(int64_t n_ctx) override;
    void prefill(SessionState& s, std::span<const int32_t> tokens, LogitsRows rows,
                 std::vector<float>& logits) override;
    using Executor::decode;
    std::span<const float> decode(SessionState& s, int32_t token) override;
    // Attention-only models can drop rows; recurrent ones only accept n == n_past.
    bool truncate(SessionState& s, int64_t n) override;
    // Copies of the used KV rows and the conv/DeltaNet state, and back (prefix reuse).
    std::unique_ptr<SessionSnapshot> snapshot(const SessionState& s) override;
    bool restore(SessionState& s, const SessionSnapshot& snap) override;

    // Bytes a session of n_ctx tokens holds (KV rows, conv and DeltaNet state, scratch).
    uint64_t session_bytes(int64_t n_ctx) const;

  private:
    ChainSession& own(SessionState& s) const;
    // Runs T tokens at positions n_past.. through the trunk; writes the logits of every row
    // (logits != nullptr, all_rows) or of the last row.
    void forward(ChainSession& s, const int32_t* tokens, int64_t T, bool decode, float* logits,
                 bool all_rows);

    std::shared_ptr<const Model> model_;
    ChainOptions options_;
    ThreadPool* pool_;
    std::unique_ptr<ChainWeights> weights_;
};

}  // namespace dl::cpu
