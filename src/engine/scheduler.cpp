// Continuous batching (see scheduler.h): the queue, the slots, and the step loop.
#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "engine/prefix_cache.h"
#include "model/model.h"

namespace dl {

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::eog:
            return "stop";
        case FinishReason::length:
        case FinishReason::context:
            return "length";
        case FinishReason::cancelled:
            return "cancelled";
        case FinishReason::error:
            return "error";
    }
    return "error";
}

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

Scheduler::Scheduler(Executor& executor, SchedulerOptions options)
    : executor_(executor), options_(std::move(options)) {
    if (options_.parallel < 1 || options_.parallel > 4096)
        fail("the number of parallel sequences must be 1 to 4096, not {}", options_.parallel);
    if (options_.n_ctx < 2) fail("each sequence needs a context of at least 2 tokens");
    if (options_.token_budget < options_.parallel)
        options_.token_budget = options_.parallel;  // every running sequence decodes each step
    if (options_.queue_limit < 0) options_.queue_limit = 0;
    for (int64_t i = 0; i < options_.parallel; ++i) {
        auto slot = std::make_unique<Slot>();
        slot->session = executor_.new_session(options_.n_ctx);
        slots_.push_back(std::move(slot));
    }
    // A fresh session's state, restored into a slot for each new request (so sessions are made
    // once); executors without snapshots get a new session instead.
    empty_ = executor_.snapshot(*slots_[0]->session);
    if (options_.prefix_cache_bytes > 0) {
        cache_ = std::make_unique<PrefixCache>(executor_, options_.prefix_cache_bytes,
                                               options_.prefix_cache_host_bytes);
        stats_.cache_budget = options_.prefix_cache_bytes;
        stats_.cache_host_budget = options_.prefix_cache_host_bytes;
    }
    thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
    shutdown(false);
}

uint64_t Scheduler::submit(GenerationRequest request, GenerationSink sink) {
    const int64_t n = (int64_t)request.prompt.size(), V = executor_.model().hp.n_vocab;
    if (n == 0) fail("the prompt is empty");
    if (request.max_tokens == 0) fail("max_tokens must be at least 1");
    if (n >= options_.n_ctx)
        fail("the prompt of {} tokens does not fit the context of {} tokens", n, options_.n_ctx);
    for (int32_t t : request.prompt)
        if (t < 0 || t >= V) fail("token id {} is outside the vocabulary of {} tokens", t, V);
    auto r = std::make_unique<Request>();
    r->req = std::move(request);
    r->sink = std::move(sink);
    r->submitted = Clock::now();
    r->feed = r->req.prompt;
    std::lock_guard lock(mutex_);
    if (stopping_ || (int64_t)queue_.size() >= options_.queue_limit) return 0;
    r->id = next_id_++;
    const uint64_t id = r->id;
    queue_.push_back(std::move(r));
    ++stats_.queued;
    wake_.notify_all();
    return id;
}

void Scheduler::cancel(uint64_t id) {
    std::lock_guard lock(mutex_);
    cancelled_.push_back(id);
    wake_.notify_all();
}

void Scheduler::shutdown(bool finish) {
    {
        std::lock_guard lock(mutex_);
        if (!stopping_) finish_on_stop_ = finish;
        if (!finish) finish_on_stop_ = false;
        stopping_ = true;
        wake_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
}

SchedulerStats Scheduler::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

void Scheduler::done(std::unique_ptr<Request> r, FinishReason why, const Slot* slot,
                     const std::string& error) {
    GenerationEvent ev;
    ev.kind = GenerationEvent::Kind::done;
    ev.finish = why;
    ev.error = error;
    ev.prompt_tokens = (int64_t)r->req.prompt.size();
    const Clock::time_point now = Clock::now();
    ev.total_seconds = seconds(r->submitted, now);
    if (slot) {
        ev.cached_tokens = slot->cached;
        ev.generated_tokens = slot->generated;
        if (slot->started) ev.queue_seconds = seconds(r->submitted, slot->first_step);
        if (slot->generated > 0) ev.first_token_seconds = seconds(r->submitted, slot->first_token);
    }
    {
        std::lock_guard lock(mutex_);
        ++stats_.requests_done;
    }
    try {
        if (r->sink) r->sink(ev);
    } catch (...) {
        // A sink that throws on its last event has nothing left to stop.
    }
}

void Scheduler::finish(Slot& slot, FinishReason why, const std::string& error) {
    // The tokens fed so far are a prefix later requests (the next turn of a chat) may share.
    if (cache_ && why != FinishReason::error && slot.session->n_past == (int64_t)slot.fed.size())
        snapshot(slot);
    std::unique_ptr<Request> r = std::move(slot.request);
    {
        std::lock_guard lock(mutex_);
        --stats_.running;
    }
    done(std::move(r), why, &slot, error);
    release(slot);
    admit_paused_ = false;
}

void Scheduler::snapshot(Slot& slot, bool waypoint) {
    const Clock::time_point t0 = Clock::now();
    cache_->put(slot.fed, *slot.session, waypoint);
    std::lock_guard lock(mutex_);
    stats_.snapshot_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    ++stats_.snapshots;
}

void Scheduler::release(Slot& slot) {
    slot.sampler.reset();
    slot.fed.clear();
    slot.pending = slot.resume_token = -1;
    slot.draw.reset();
    // An idle slot holds no rows of a paged KV cache (restored again when a request starts).
    if (empty_) executor_.restore(*slot.session, *empty_);
}

// The KV cache had no room for a step: the sequence admitted last gives its rows back and goes to
// the front of the queue. When a request has finished and there is room again it is admitted
// anew, prefills the tokens its session held and goes on where it was, with its own sampler, so
// its tokens are those it would have produced without the wait.
void Scheduler::preempt(const std::string& why) {
    Slot* last = nullptr;
    int64_t running = 0;
    for (auto& slot : slots_) {
        if (!slot->request) continue;
        ++running;
        if (!last || slot->admitted > last->admitted) last = slot.get();
    }
    if (!last) return;
    if (running == 1) {  // alone and still no room: the cache is held outside the scheduler
        finish(*last, FinishReason::error, why);
        return;
    }
    log::debug("a request goes back to the queue after {} tokens: {}", last->fed.size(), why);
    std::unique_ptr<Request> r = std::move(last->request);
    std::vector<int32_t> feed = last->fed;
    feed.insert(feed.end(), r->feed.begin() + last->prompt_done, r->feed.end());
    r->feed = std::move(feed);
    Request::Resume z;
    z.sampler = std::move(last->sampler);
    z.pending = last->pending >= 0 ? last->pending : last->resume_token;
    z.draw = last->draw;
    z.generated = last->generated;
    z.cached = last->cached;
    z.first_step = last->first_step;
    z.first_token = last->first_token;
    r->resume = std::move(z);
    release(*last);
    admit_paused_ = true;
    std::lock_guard lock(mutex_);
    --stats_.running;
    ++stats_.queued;
    ++stats_.preempted;
    queue_.push_front(std::move(r));
}

int64_t Scheduler::start(Slot& slot, std::unique_ptr<Request>& r) {
    const std::vector<int32_t>& feed = r->feed;
    int64_t restored = 0;
    // At least the last token is run, for its logits. A restore the KV cache has no room for
    // throws CacheFull before anything changes.
    if (cache_) restored = cache_->restore(feed, (int64_t)feed.size() - 1, *slot.session);
    if (restored == 0) {
        if (empty_)
            executor_.restore(*slot.session, *empty_);
        else
            slot.session = executor_.new_session(options_.n_ctx);
    }
    slot.request = std::move(r);
    Request& q = *slot.request;
    slot.fed.assign(feed.begin(), feed.begin() + restored);
    slot.prompt_done = restored;
    slot.pending = -1;
    if (q.resume) {
        Request::Resume& z = *q.resume;
        slot.sampler = std::move(z.sampler);
        slot.resume_token = z.pending;
        slot.draw = z.draw;
        slot.generated = z.generated;
        slot.cached = z.cached;
        slot.started = true;
        slot.first_step = z.first_step;
        slot.first_token = z.first_token;
        q.resume.reset();
        return 0;  // its cached tokens were counted when it first started
    }
    if (cache_ && options_.snapshot_every > 0) {
        // Where this prompt parts from one seen before, far enough past its hit to be worth a
        // window: the next prompt that shares this beginning starts there.
        const int64_t a = std::max<int64_t>(options_.chunk_align, 1);
        const int64_t part = cache_->longest_shared(feed) / a * a;
        if (part - restored >= options_.snapshot_every && part < (int64_t)feed.size())
            q.req.snapshot_at.push_back(part);
    }
    slot.sampler = std::make_unique<Sampler>(q.req.sampling);
    for (int32_t t : q.req.prompt) slot.sampler->accept(t);
    slot.resume_token = -1;
    slot.draw.reset();
    slot.generated = 0;
    slot.cached = restored;
    slot.started = false;
    return restored;
}

// Takes cancellations and the queue into the slots; calls sinks outside the lock.
void Scheduler::admit() {
    std::vector<std::unique_ptr<Request>> dropped;
    std::vector<uint64_t> cancelled;
    bool cancel_all = false;
    {
        std::lock_guard lock(mutex_);
        cancelled.swap(cancelled_);
        cancel_all = stopping_ && !finish_on_stop_;
        for (auto it = queue_.begin(); it != queue_.end();) {
            if (cancel_all ||
                std::find(cancelled.begin(), cancelled.end(), (*it)->id) != cancelled.end()) {
                dropped.push_back(std::move(*it));
                it = queue_.erase(it);
                --stats_.queued;
            } else {
                ++it;
            }
        }
    }
    for (auto& r : dropped) done(std::move(r), FinishReason::cancelled, nullptr, {});
    for (auto& slot : slots_)
        if (slot->request && (cancel_all || std::find(cancelled.begin(), cancelled.end(),
                                                      slot->request->id) != cancelled.end()))
            finish(*slot, FinishReason::cancelled);
    for (auto& slot : slots_) {
        if (slot->request || admit_paused_) continue;
        std::unique_ptr<Request> r;
        {
            std::lock_guard lock(mutex_);
            if (queue_.empty()) break;
            r = std::move(queue_.front());
            queue_.pop_front();
            --stats_.queued;
            ++stats_.running;
        }
        try {
            slot->admitted = ++admissions_;
            slot->admitted_step = steps_run_;
            const Clock::time_point t0 = Clock::now();
            const int64_t cached = start(*slot, r);
            // (A session made or restored between steps delays every stream's next token.)
            log::debug(
                "admitted a request of {} prompt tokens, {} from the prefix cache: {:.2f} ms",
                slot->request->feed.size(), cached,
                std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
            std::lock_guard lock(mutex_);
            stats_.cached_tokens += cached;
        } catch (const std::exception& e) {
            if (!r) {  // start() had taken it into the slot
                finish(*slot, FinishReason::error, e.what());
                continue;
            }
            bool others = false;
            for (auto& o : slots_) others |= o->request != nullptr;
            const bool full = dynamic_cast<const CacheFull*>(&e) != nullptr;
            if (full && (others || (cache_ && cache_->shed()))) {
                // No rows for its cached prefix now: it waits at the front of the queue, until
                // cached prefixes have moved out of the way or a running request finishes.
                admit_paused_ = others;
                std::lock_guard lock(mutex_);
                --stats_.running;
                ++stats_.queued;
                queue_.push_front(std::move(r));
                break;
            }
            {
                std::lock_guard lock(mutex_);
                --stats_.running;
            }
            done(std::move(r), FinishReason::error, nullptr, e.what());
        }
    }
}

void Scheduler::loop() {
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] {
                return stopping_ || !queue_.empty() || !cancelled_.empty() || stats_.running > 0;
            });
            if (stopping_ && queue_.empty() && stats_.running == 0) break;
        }
        admit();
        run_step();
    }
}

// A prompt's place in line for the next step's chunks (lower goes first): the tokens it has
// left, less prompt_aging for each step run since it was admitted. The fewest left first is what
// keeps the time to first token short for most requests (a later turn of a chat, whose history
// came from the prefix cache, is a few hundred tokens behind a document of thousands); the
// aging bounds how long a long prompt waits behind a stream of short ones.
int64_t Scheduler::prompt_place(const Slot& slot) const {
    if (options_.prompt_aging < 0) return 0;  // the earliest admitted first
    const int64_t left = (int64_t)slot.request->feed.size() - slot.prompt_done;
    return left - options_.prompt_aging * (steps_run_ - slot.admitted_step);
}

// How many of a prompt's remaining tokens the next chunk takes: at most `room`, ending on a
// snapshot point (with a prefix cache), else on an aligned position when the prompt goes on
// past it. (A snapshot point is not aligned down: that would cost a window of the few tokens
// before it, and a chat's next turn is often only a few dozen tokens past its history.)
int64_t Scheduler::chunk_length(const Slot& slot, int64_t room) const {
    const GenerationRequest& g = slot.request->req;
    const int64_t pos = slot.prompt_done, left = (int64_t)slot.request->feed.size() - pos;
    int64_t end = pos + std::min(left, room);
    bool at_point = false;
    if (cache_) {
        for (int64_t at : g.snapshot_at)
            if (at > pos && at < end) {
                end = at;
                at_point = true;
            }
    }
    const int64_t a = options_.chunk_align;
    if (!at_point && a > 0 && end < (int64_t)slot.request->feed.size() && end / a * a > pos)
        end = end / a * a;
    return end - pos;
}

void Scheduler::run_step() {
    std::vector<StepItem> items;
    std::vector<Slot*> owners;
    int64_t budget = options_.token_budget;
    using Want = StepItem::Want;
    // Running streams first: each decodes one token every step.
    for (auto& slot : slots_) {
        if (!slot->request || slot->pending < 0) continue;
        StepItem it;
        it.session = slot->session.get();
        it.tokens = std::span<const int32_t>(&slot->pending, 1);
        const GenerationRequest& g = slot->request->req;
        if (g.top_logprobs < 0 && !g.constraint && executor_.samples_on_device(g.sampling)) {
            it.want = Want::sample;
            it.params = &g.sampling;
            if (!slot->draw) slot->draw = slot->sampler->draw();
            it.u = *slot->draw;
        }
        items.push_back(it);
        owners.push_back(slot.get());
        --budget;
    }
    // Then prompt chunks in the order prompt_place gives, while the budget and prompt_chunks
    // last; with no stream decoding, up to the idle budget.
    if (items.empty()) budget = std::max(budget, options_.idle_token_budget);
    std::vector<Slot*> prompting;
    for (auto& slot : slots_)
        if (slot->request && slot->pending < 0) prompting.push_back(slot.get());
    std::sort(prompting.begin(), prompting.end(), [&](const Slot* a, const Slot* b) {
        const int64_t pa = prompt_place(*a), pb = prompt_place(*b);
        return pa != pb ? pa < pb : a->admitted < b->admitted;
    });
    int64_t chunks = 0, chunk_tokens = 0;
    for (Slot* slot : prompting) {
        if (budget <= 0 || (options_.prompt_chunks > 0 && chunks >= options_.prompt_chunks)) break;
        const int64_t n = chunk_length(*slot, budget);
        if (n <= 0) continue;
        const std::vector<int32_t>& prompt = slot->request->feed;
        StepItem it;
        it.session = slot->session.get();
        it.tokens = std::span<const int32_t>(prompt).subspan((size_t)slot->prompt_done, (size_t)n);
        it.want =
            slot->prompt_done + n == (int64_t)prompt.size() ? Want::last_logits : Want::nothing;
        items.push_back(it);
        owners.push_back(slot);
        budget -= n;
        chunk_tokens += n;
        ++chunks;
    }
    if (items.empty()) return;
    const Clock::time_point now = Clock::now();
    for (Slot* s : owners)
        if (!s->started) {
            s->started = true;
            s->first_step = now;
        }
    try {
        executor_.step(items);
    } catch (const CacheFull& e) {
        // Nothing ran. Cached prefixes give their share of the cache back first (to host
        // memory, or gone), then the request admitted last (preempt); the next step tries again.
        if (!(cache_ && cache_->shed())) preempt(e.what());
        return;
    } catch (const std::exception& e) {
        log::warn("a step of {} sequences failed: {}", items.size(), e.what());
        for (Slot* s : owners) finish(*s, FinishReason::error, e.what());
        return;
    }
    ++steps_run_;
    const double step_seconds = std::chrono::duration<double>(Clock::now() - now).count();
    {
        std::lock_guard lock(mutex_);
        ++stats_.steps;
        stats_.step_seconds += step_seconds;
        if (chunks > 0) {
            ++stats_.prompt_steps;
            stats_.prompt_step_seconds += step_seconds;
        }
    }
    log::debug("step: {} decodes, {} prompt chunks of {} tokens: {:.2f} ms", items.size() - chunks,
               chunks, chunk_tokens, step_seconds * 1e3);
    for (size_t i = 0; i < items.size(); ++i) {
        Slot& slot = *owners[i];
        StepItem& it = items[i];
        const GenerationRequest& g = slot.request->req;
        const bool decoding = slot.pending >= 0;
        slot.fed.insert(slot.fed.end(), it.tokens.begin(), it.tokens.end());
        if (!decoding) {
            slot.prompt_done += (int64_t)it.tokens.size();
            std::lock_guard lock(mutex_);
            stats_.prompt_tokens += (int64_t)it.tokens.size();
        }
        slot.draw.reset();  // used by this step
        const bool at_end_of_prompt = slot.prompt_done == (int64_t)slot.request->feed.size();
        const int64_t every = options_.snapshot_every;
        const bool asked = std::find(g.snapshot_at.begin(), g.snapshot_at.end(),
                                     slot.prompt_done) != g.snapshot_at.end();
        const bool waypoint =
            !decoding && every > 0 &&
            slot.prompt_done / every > (slot.prompt_done - (int64_t)it.tokens.size()) / every;
        if (cache_ && !decoding && (at_end_of_prompt || asked || waypoint)) {
            const Clock::time_point t0 = Clock::now();
            snapshot(slot, waypoint && !at_end_of_prompt && !asked);
            log::debug("snapshot at {} tokens: {:.2f} ms", slot.prompt_done,
                       std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        if (!decoding && !at_end_of_prompt) continue;
        if (!decoding && slot.resume_token >= 0) {
            // A resumed request's tokens are back in its session: it goes on with the token it
            // had sampled (already reported).
            slot.pending = slot.resume_token;
            slot.resume_token = -1;
            continue;
        }

        // This item produced the sequence's next token.
        GenerationEvent ev;
        ev.kind = GenerationEvent::Kind::token;
        int32_t token = it.token;
        if (it.want != Want::sample) {
            if ((int64_t)it.logits.size() != executor_.model().hp.n_vocab) {
                finish(slot, FinishReason::error, "the executor returned no logits");
                continue;
            }
            std::span<const float> logits = it.logits;
            if (g.constraint) {
                // The request's rule on what may come next (a JSON object): the other tokens'
                // logits go to -infinity in a copy.
                slot.constrained.assign(it.logits.begin(), it.logits.end());
                if (g.constraint->mask(slot.constrained) == 0) {
                    finish(slot, FinishReason::error,
                           "no token of the vocabulary can continue the constrained output");
                    continue;
                }
                logits = slot.constrained;
            }
            try {
                token = slot.sampler->sample(logits);
            } catch (const std::exception& e) {
                finish(slot, FinishReason::error, e.what());
                continue;
            }
            if (g.constraint) g.constraint->accept(token);
            if (g.top_logprobs >= 0)
                ev.logprob = log_probability(logits, token, g.top_logprobs, ev.top);
        }
        if (token < 0 || token >= executor_.model().hp.n_vocab) {
            finish(slot, FinishReason::error, "the executor sampled no token");
            continue;
        }
        ev.token = token;
        slot.sampler->accept(token);
        if (slot.generated++ == 0) slot.first_token = Clock::now();
        {
            std::lock_guard lock(mutex_);
            ++stats_.generated_tokens;
        }
        bool go_on = true;
        try {
            go_on = slot.request->sink ? slot.request->sink(ev) : true;
        } catch (...) {
            go_on = false;
        }
        const bool eog = !g.ignore_eos && options_.is_eog && options_.is_eog(token);
        if (eog) {
            finish(slot, FinishReason::eog);
        } else if (!go_on) {
            finish(slot, FinishReason::cancelled);
        } else if (g.max_tokens >= 0 && slot.generated >= g.max_tokens) {
            finish(slot, FinishReason::length);
        } else if (slot.session->n_past >= options_.n_ctx) {
            finish(slot, FinishReason::context);
        } else {
            slot.pending = token;
        }
    }
    std::lock_guard lock(mutex_);
    stats_.cache_bytes = cache_ ? cache_->bytes() : 0;
    stats_.cache_host_bytes = cache_ ? cache_->host_bytes() : 0;
    stats_.cache_entries = cache_ ? cache_->entries() : 0;
    stats_.spills = cache_ ? (int64_t)cache_->spills() : 0;
    stats_.spill_seconds = cache_ ? cache_->spill_seconds() : 0;
    const Executor::CacheUse kv = executor_.cache_use();
    stats_.kv_used_rows = kv.used_rows;
    stats_.kv_total_rows = kv.total_rows;
}

}  // namespace dl
