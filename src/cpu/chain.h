// The CPU chain: the reference executor for every architecture. A step runs the tokens of one or
// more sequences in windows of rows, each window through every layer at once (batched matrix
// products over all its rows; attention, the conv and the DeltaNet per sequence: the step form
// for a single token, the chunked form for a run of them). Prefill and decode are steps of one
// sequence. Threads come from a ThreadPool (the process-wide one unless given). One step at a
// time per chain: its scratch rows are shared.
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
struct Segment;
struct Workspace;

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
    // Every item's rows in the same passes: each weight is read once per pass of up to `window`
    // rows, whichever sequences the rows belong to. prefill and decode are steps of one item.
    void step(std::span<StepItem> items) override;
    // Attention-only models can drop rows; recurrent ones only accept n == n_past.
    bool truncate(SessionState& s, int64_t n) override;
    // Copies of the used KV rows and the conv/DeltaNet state, and back (prefix reuse).
    std::unique_ptr<SessionSnapshot> snapshot(const SessionState& s) override;
    bool restore(SessionState& s, const SessionSnapshot& snap) override;

    // Bytes a session of n_ctx tokens holds at most (KV rows, conv and DeltaNet state); a new
    // session holds its state, and KV rows only as its tokens arrive.
    uint64_t session_bytes(int64_t n_ctx) const;
    // Bytes of the scratch rows every step shares (allocated with the first session).
    uint64_t workspace_bytes(int64_t n_ctx) const;

  private:
    // A row of a pass whose logits an item asked for, and where they go.
    struct LogitRow {
        int64_t row;
        float* dest;
    };
    ChainSession& own(SessionState& s) const;
    void reserve_workspace(int64_t n_ctx);
    // Makes room for `rows` KV rows in every attention layer (the allocation grows by doubling,
    // up to n_ctx); dl::Error, with nothing changed, when the memory is not there.
    void grow_kv(ChainSession& s, int64_t rows) const;
    // Runs T rows (the segments' tokens, in order) through the trunk; appends them to their
    // sessions and writes the logits of logit_rows.
    void forward(const int32_t* tokens, int64_t T, std::span<const Segment> segs,
                 std::span<const LogitRow> logit_rows);

    std::shared_ptr<const Model> model_;
    ChainOptions options_;
    ThreadPool* pool_;
    std::unique_ptr<ChainWeights> weights_;
    std::unique_ptr<Workspace> ws_;
    std::vector<std::vector<float>> results_;  // each step item's logits
};

}  // namespace dl::cpu
