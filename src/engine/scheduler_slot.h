// What the scheduler keeps of a request and of a slot, shared by its two files
// (scheduler.cpp: admission and the end of requests; scheduler_step.cpp: a step). Not part of
// the scheduler's interface.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace dl {

using Clock = std::chrono::steady_clock;

struct Scheduler::Request {
    uint64_t id = 0;
    GenerationRequest req;
    GenerationSink sink;
    Clock::time_point submitted;
    // The tokens a slot prefills: the prompt; for a request sent back to the queue (preempt),
    // every token its session held, then the rest of its prompt.
    std::vector<int32_t> feed;
    // A request sent back to the queue goes on where it was: its sampler (random state and
    // history), the token it had sampled but not yet fed (-1: none), the draw taken for that
    // token's step, which did not run, and what it had reported.
    struct Resume {
        std::unique_ptr<Sampler> sampler;
        int32_t pending = -1;
        std::optional<double> draw;
        int64_t generated = 0, cached = 0;
        Clock::time_point first_step, first_token;
    };
    std::optional<Resume> resume;
};

struct Scheduler::Slot {
    std::unique_ptr<SessionState> session;
    std::unique_ptr<Request> request;  // null: free
    std::unique_ptr<Sampler> sampler;
    std::vector<int32_t> fed;  // the tokens in the session, in order (the prefix cache's key)
    int64_t prompt_done = 0;   // prompt tokens in the session
    int32_t pending = -1;      // sampled, not yet fed
    // A resumed request's pending token, held until its feed is in the session again.
    int32_t resume_token = -1;
    // The uniform draw for the pending token's device sampling, kept until a step runs it (a step
    // the KV cache refused leaves the sampler as it was).
    std::optional<double> draw;
    std::vector<float> constrained;  // a constrained request's masked logits
    int64_t generated = 0, cached = 0;
    bool started = false;
    uint64_t admitted = 0;  // the order requests were taken into slots (the last gives way first)
    int64_t admitted_step = 0;  // steps run before it was taken into its slot
    Clock::time_point first_step, first_token;
};

}  // namespace dl
