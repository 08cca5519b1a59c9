// Continuous batching: many generation requests served together by one executor. A thread runs
// steps (Executor::step); each step carries the next token of every running sequence and, under a
// token budget, chunks of the prompts still being read, so a long prompt delays the running
// streams by at most one chunk per step. Requests join and leave between steps. Prompts start
// from the longest cached prefix (engine/prefix_cache.h) when the executor can snapshot.
//
// Every request's tokens are exactly those it would get alone: the executor computes each
// sequence's rows independently of the others in the step, and each request samples with its
// own seeded Sampler.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/sampler.h"
#include "engine/token_constraint.h"
#include "executor/executor.h"

namespace dl {

class PrefixCache;

struct SchedulerOptions {
    int64_t parallel = 4;        // sequences generating at once (slots), each with n_ctx tokens
    int64_t n_ctx = 4096;        // context of each slot
    int64_t token_budget = 512;  // tokens per step: decodes first, then prompt chunks
    // Tokens a step may read of prompts while no stream decodes (below token_budget: the
    // budget): no stream waits on that step, and one window of many rows costs an executor less
    // than several short ones, each a read of every weight.
    int64_t idle_token_budget = 2048;
    // The order prompts get a step's chunks in: the fewest tokens left first, each step a
    // prompt has waited since it was admitted counting as this many tokens fewer (so a long
    // prompt waits behind shorter ones at most about its length / prompt_aging steps); < 0: the
    // earliest admitted first. At 128 a saturated server (32 chats over 6,000-token documents
    // on an H100, steps of about 500 prompt tokens) served prompts older than a few seconds in
    // arrival order, and a turn of 180 new tokens waited 9.4 s (docs/perf/history.md,
    // 2026-12-06 (07:00)); at 32 it passes documents admitted in the last dozen seconds.
    int64_t prompt_aging = 32;
    // Prompts a step reads a chunk of, in that order (0: as many as the budget
    // allows). Both executors read each weight once a step for all its rows (the CPU chain's
    // passes; the Vulkan driver's step command, which takes the chunks after the decode rows as
    // far as its window holds), so several short prompts share one step's reads rather than
    // waiting a step each.
    int64_t prompt_chunks = 0;
    // Requests waiting for a slot beyond which submit() refuses (warm-ups counted apart).
    int64_t queue_limit = 64;
    // Prompt chunks end on multiples of this many tokens (a KV block: chunks of a few sizes, whose
    // commands an executor records once), unless the prompt ends first. 0: no alignment.
    int64_t chunk_align = 64;
    uint64_t prefix_cache_bytes = 0;  // 0: no prefix cache
    // Snapshots past prefix_cache_bytes move to host memory up to this many bytes (the Vulkan
    // driver keeps them in device memory first); 0: they are dropped instead.
    uint64_t prefix_cache_host_bytes = 0;
    // With the cache, also keep a snapshot at the end of each prompt chunk that passes a
    // multiple of this many tokens (a waypoint), so prompts that share a long beginning (a
    // system prompt, a document) and then differ start from the last such point; and where a
    // prompt parts from a cached one at least this many tokens past its own cache hit (the
    // shared part aligned down to chunk_align), so the next prompt with that beginning starts
    // there. Waypoints never cut a chunk (a cut costs the executor a window of its own); a
    // parting point does. 0: off.
    int64_t snapshot_every = 0;
    std::function<bool(int32_t)> is_eog;
};

// Why a request ended.
enum class FinishReason {
    eog,        // the model ended its turn (the end-of-generation token is reported, not fed)
    length,     // max_tokens
    context,    // the slot's context is full
    cancelled,  // cancel(), the sink returned false, or shutdown
    error,      // the executor failed; Event::error says why
};
const char* finish_reason_name(FinishReason r);

struct GenerationRequest {
    std::vector<int32_t> prompt;  // at least one token
    SamplerParams sampling;
    int64_t max_tokens = -1;  // < 0: until an end-of-generation token or the context's end; not 0
    bool ignore_eos = false;
    // >= 0: each token event carries its log-probability and this many alternatives (the host
    // computes them, so the step returns logits for this request).
    int32_t top_logprobs = -1;
    // Prompt positions (token counts) at which to keep a snapshot for later requests, besides the
    // end of the prompt and of the generation (a chat keeps one before the last user turn).
    std::vector<int64_t> snapshot_at;
    // A rule on what the request may generate (response_format json_object); its tokens are then
    // sampled on the host from the masked logits.
    std::shared_ptr<TokenConstraint> constraint;
    // A warm-up of the prefix cache (its output unused; a chat's next turn read ahead): it is not
    // admitted before warm_up_delay seconds have passed, and a request whose prompt begins with
    // its prompt, submitted before it is admitted, takes its place (it ends cancelled). A next
    // turn that comes at once then reads those tokens in its own window, rather than in a second
    // one after the warm-up's.
    bool warm_up = false;
    double warm_up_delay = 0;
};

struct GenerationEvent {
    enum class Kind { token, done };
    Kind kind = Kind::token;
    // Kind::token
    int32_t token = -1;
    float logprob = 0;              // when top_logprobs >= 0
    std::vector<TokenLogprob> top;  // the top_logprobs most likely, best first
    // Kind::done
    FinishReason finish = FinishReason::eog;
    std::string error;
    int64_t prompt_tokens = 0;
    int64_t cached_tokens = 0;  // prompt tokens restored from the prefix cache, not prefilled
    int64_t generated_tokens = 0;
    double queue_seconds = 0;        // submit to the first step that carries it
    double first_token_seconds = 0;  // submit to the first token
    double total_seconds = 0;
};

// Called on the scheduler's thread for each token and once with Kind::done; return false to stop
// the request (its slot is free for the next step). It must not call back into the scheduler.
using GenerationSink = std::function<bool(const GenerationEvent&)>;

struct SchedulerStats {
    int64_t running = 0, queued = 0;
    int64_t prompt_tokens = 0, generated_tokens = 0, cached_tokens = 0;  // totals
    int64_t requests_done = 0;
    int64_t steps = 0;
    // Where the step thread's time goes: the executor's steps (those that carried a prompt chunk
    // apart), and the prefix cache's snapshots after them.
    double step_seconds = 0, prompt_step_seconds = 0, snapshot_seconds = 0;
    int64_t prompt_steps = 0, snapshots = 0;
    // Of the snapshots' time: moving older ones to host memory to make room.
    int64_t spills = 0;
    double spill_seconds = 0;
    uint64_t cache_bytes = 0, cache_host_bytes = 0, cache_entries = 0;
    uint64_t cache_budget = 0, cache_host_budget = 0;  // SchedulerOptions' (0: no cache)
    // The executor's paged KV cache (Executor::cache_use), and requests that gave their rows back
    // to others when it was full (Scheduler::preempt).
    int64_t kv_used_rows = 0, kv_total_rows = 0;
    int64_t preempted = 0;
};

class Scheduler {
  public:
    // Makes options.parallel sessions of options.n_ctx tokens and starts the step thread, which
    // then owns the executor: nothing else may run it while the scheduler lives.
    Scheduler(Executor& executor, SchedulerOptions options);
    ~Scheduler();  // shutdown(false)
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Queues a request; returns its id (> 0), or 0 when the queue is full or the scheduler is
    // shutting down. Throws dl::Error for a request that can never run (empty prompt, a token
    // outside the vocabulary, a prompt that does not fit n_ctx).
    uint64_t submit(GenerationRequest request, GenerationSink sink);
    // Stops a request (queued or running); its sink gets done with FinishReason::cancelled. A
    // request that already finished is ignored.
    void cancel(uint64_t id);
    // Stops accepting requests; finish == true lets the running and queued ones end, false
    // cancels them. Returns when the step thread has stopped.
    void shutdown(bool finish);

    SchedulerStats stats() const;
    // Requests in the queue that are not warm-ups (GenerationRequest::warm_up): clients waiting.
    int64_t waiting() const;
    const SchedulerOptions& options() const { return options_; }
    const Executor& executor() const { return executor_; }

  private:
    struct Request;
    struct Slot;

    void loop();
    void admit();
    // Whether the request waits for a running one's prompt: one whose whole prompt begins this
    // one's feed, still being prefilled, and longer by kSharedPrefillWait tokens than what the
    // prefix cache holds of it. Its snapshot at the end of that prompt is then a step or two
    // away, and taking this request now would prefill the same tokens twice (a chat's next turn
    // behind the warm-up of its beginning; requests that open with one long prompt).
    bool waits_for_shared_prefill(const Request& r) const;
    static constexpr int64_t kSharedPrefillWait = 32;
    // The queued request admit() takes next (queue_.end(): none): the first whose warm-up delay
    // has passed, unless it waits for a shared prefill. Under mutex_.
    std::deque<std::unique_ptr<Request>>::iterator next_admission();
    // Queued warm-ups (true) or other requests (false). Under mutex_.
    int64_t queued(bool warm_ups) const;
    // When r may be admitted: its submission, or for a warm-up the end of its delay.
    static std::chrono::steady_clock::time_point admissible_at(const Request& r);
    // Takes a request into a slot; returns the prompt tokens it restored from the prefix cache
    // (0 for a resumed request, counted when it first started).
    int64_t start(Slot& slot, std::unique_ptr<Request>& r);
    int64_t chunk_length(const Slot& slot, int64_t room) const;
    int64_t prompt_place(const Slot& slot) const;
    void run_step();
    // After a step: the item's tokens in its slot's record, a snapshot where one is due, and the
    // next token reported where the item produced one (scheduler_step.cpp).
    void take_outcome(Slot& slot, StepItem& it);
    void finish(Slot& slot, FinishReason why, const std::string& error = {});
    void release(Slot& slot);
    // The prefix cache's snapshot of the slot's tokens so far (timed in the stats); waypoint:
    // PrefixCache::put's.
    void snapshot(Slot& slot, bool waypoint = false);
    void preempt(const std::string& why);
    void done(std::unique_ptr<Request> r, FinishReason why, const Slot* slot,
              const std::string& error);

    Executor& executor_;
    SchedulerOptions options_;
    std::unique_ptr<PrefixCache> cache_;
    std::unique_ptr<SessionSnapshot> empty_;  // a fresh session's state
    std::vector<std::unique_ptr<Slot>> slots_;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::unique_ptr<Request>> queue_;
    std::vector<uint64_t> cancelled_;
    bool stopping_ = false, finish_on_stop_ = true;
    uint64_t next_id_ = 1;
    uint64_t admissions_ = 0;  // step thread only
    int64_t steps_run_ = 0;    // step thread only
    // Set when the KV cache sent a request back: no request is admitted until one finishes and
    // gives its rows back (else the one sent back would be admitted again at once, and the step
    // that has no room for it would never run). Step thread only.
    bool admit_paused_ = false;
    SchedulerStats stats_;
    std::thread thread_;
};

}  // namespace dl
