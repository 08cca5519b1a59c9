// The interface every executor of a model answers (the CPU chain, the Vulkan resident driver):
// a session holds the per-sequence state (KV rows, conv and DeltaNet state) that only the executor
// that made it understands; prefill and decode append tokens to it and return logits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "executor/sampler_params.h"

namespace dl {

class Model;

class SessionState {
  public:
    virtual ~SessionState() = default;
    int64_t n_past = 0;  // tokens already in the state
    int64_t n_ctx = 0;   // capacity in tokens
};

// A saved copy of a session's state at one position (KV rows, conv and recurrent state), kept
// where the executor keeps sessions (device memory for the Vulkan driver). Only the executor
// that made it can restore it.
class SessionSnapshot {
  public:
    virtual ~SessionSnapshot() = default;
    int64_t n_past = 0;  // tokens the snapshot holds
    // Memory it adds where it lives (rows it shares with sessions in a paged KV cache's blocks
    // are not counted: they take no more memory, and a full cache sheds snapshots by itself).
    uint64_t bytes = 0;
    bool spilled = false;  // moved to host memory by Executor::spill
};

// Thrown by an executor whose paged KV cache has no free block for what a call needs, before that
// call changes any session: the caller frees a sequence's rows and tries again.
class CacheFull : public Error {
  public:
    using Error::Error;
};

// Which rows of logits prefill returns.
enum class LogitsRows { last, all };

// One sequence's share of a batched step (Executor::step): a chunk of its prompt or the one token
// it decodes, and what it wants back.
struct StepItem {
    enum class Want {
        nothing,      // a prompt chunk whose logits nobody reads (not the prompt's last)
        last_logits,  // the logits of the chunk's last token
        all_logits,   // the logits of every token of the chunk, in order
        sample,       // the next token, chosen where the logits are (samples_on_device(*params))
    };
    SessionState* session = nullptr;
    std::span<const int32_t> tokens;  // at least one, appended at session->n_past...
    Want want = Want::last_logits;
    const SamplerParams* params = nullptr;  // Want::sample: the sequence's own filters
    double u = 0;                           // Want::sample: its uniform draw (Sampler::draw)

    // Filled by step(): rows of n_vocab logits (readable until the executor's next call), or the
    // sampled token.
    std::span<const float> logits;
    int32_t token = -1;
};

class Executor {
  public:
    virtual ~Executor() = default;
    virtual std::string name() const = 0;  // "cpu", "vulkan:0 (NVIDIA H200)"
    virtual const Model& model() const = 0;

    virtual std::unique_ptr<SessionState> new_session(int64_t n_ctx) = 0;

    // Appends tokens at positions n_past..n_past+n-1. logits receives n_vocab floats per
    // requested row (the last row, or every row in order). Throws dl::Error when the session
    // would overflow its context.
    virtual void prefill(SessionState& s, std::span<const int32_t> tokens, LogitsRows rows,
                         std::vector<float>& logits) = 0;
    // One token; returns its n_vocab logits where the executor left them (the CPU chain's
    // session, the host-visible memory the Vulkan driver's head wrote: nothing copied), readable
    // until that session's next prefill, decode, decode_sample or restore.
    virtual std::span<const float> decode(SessionState& s, int32_t token) = 0;
    // The same, copied into logits. (Executors bring it in with `using Executor::decode`.)
    void decode(SessionState& s, int32_t token, std::vector<float>& logits) {
        const std::span<const float> row = decode(s, token);
        logits.assign(row.begin(), row.end());
    }

    // Runs one step for many sequences at once: each item's tokens go through the model together,
    // so an executor reads each weight once per step rather than once per sequence. Sessions must
    // be distinct and each item must fit its context (checked before any state changes: dl::Error
    // leaves every session as it was). The base runs the items one by one through prefill,
    // decode and decode_sample; executors that batch override it.
    virtual void step(std::span<StepItem> items);

    // Drops tokens after position n (n <= n_past): attention rows are forgotten; recurrent state
    // cannot be rewound, so executors of recurrent models return false unless n == n_past.
    virtual bool truncate(SessionState& s, int64_t n) { return n == s.n_past; }

    // Sampling where the logits are (only the chosen id returns): when samples_on_device(p), the
    // generate loop calls decode_sample with the uniform draw u its host sampler would have used
    // (Sampler::draw), so both paths choose the same tokens for the same seed.
    virtual bool samples_on_device(const SamplerParams&) const { return false; }
    virtual int32_t decode_sample(SessionState&, int32_t, const SamplerParams&, double) {
        return -1;
    }

    // Prefix reuse: a snapshot of the session as it is now, and restoring it into any session of
    // this executor (the same or another, with at least snapshot.n_past tokens of context), which
    // then continues exactly as the original would. Executors without it return nullptr / false.
    virtual std::unique_ptr<SessionSnapshot> snapshot(const SessionState&) { return nullptr; }
    virtual bool restore(SessionState&, const SessionSnapshot&) { return false; }
    // Moves a snapshot out of the executor's own memory (a device's) into host memory, where
    // restore still finds it; false where the executor keeps snapshots in host memory anyway or
    // the host has no room.
    virtual bool spill(SessionSnapshot&) { return false; }
    // Bytes of the executor's own memory planned for snapshots' copies (the Vulkan driver's
    // plan with a prefix cache); 0 where it plans none.
    virtual uint64_t snapshot_room() const { return 0; }

    // The rate (GB/s) at which this executor's device streams the model's weights, measured now
    // (bench's decode floor), and what was read, for the report. 0 where it cannot measure.
    struct ReadRate {
        double gbps = 0;
        std::string what;
    };
    virtual ReadRate measure_read_rate() { return {}; }

    // Rows of a paged KV cache shared by the executor's sessions (the Vulkan driver's pool): held
    // by sessions, and in all. Both 0 where each session keeps its own rows.
    struct CacheUse {
        int64_t used_rows = 0, total_rows = 0;
    };
    virtual CacheUse cache_use() const { return {}; }

    // Prepares what steps of up to `sequences` sequences will need made on first use (the Vulkan
    // driver: the pipelines its commands bind, which the device's driver compiles when first
    // asked), so that no step of a server pays for it. Returns a line for the log ("" where
    // there is nothing to prepare).
    virtual std::string warm_up(int64_t /*sequences*/) { return {}; }

  protected:
    // Checks a step's items (non-empty tokens in the vocabulary, distinct sessions that fit);
    // the executors' step() call it before they change anything.
    void check_step(std::span<const StepItem> items) const;

  private:
    std::vector<std::vector<float>> step_logits_;  // the base step's result rows, per item
};

}  // namespace dl
