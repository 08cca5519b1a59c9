// Continuous batching (see scheduler.h): the queue, the slots, and the loop; a step's items and
// outcomes are in scheduler_step.cpp.
#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "engine/prefix_cache.h"
#include "engine/scheduler_slot.h"
#include "model/model.h"

namespace dl {

namespace {

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
    // Warm-ups neither take a waiting client's place in the queue nor are taken by one: each
    // kind has queue_limit places.
    if (stopping_ || queued(r->req.warm_up) >= options_.queue_limit) return 0;
    // A queued warm-up of this prompt's beginning gives way to it (GenerationRequest::warm_up).
    for (const auto& q : queue_)
        if (q->req.warm_up && !q->resume && q->feed.size() <= r->feed.size() &&
            std::equal(q->feed.begin(), q->feed.end(), r->feed.begin()))
            cancelled_.push_back(q->id);
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

int64_t Scheduler::waiting() const {
    std::lock_guard lock(mutex_);
    return queued(false);
}

int64_t Scheduler::queued(bool warm_ups) const {
    return std::count_if(queue_.begin(), queue_.end(),
                         [&](const auto& q) { return q->req.warm_up == warm_ups; });
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
    cache_->put(slot.fed, *slot.session, waypoint, slot.prompt_done);
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

bool Scheduler::waits_for_shared_prefill(const Request& r) const {
    if (!cache_ || r.resume) return false;
    int64_t longest = 0;  // the longest running prompt still prefilling that begins r's feed
    for (const auto& s : slots_) {
        if (!s->request) continue;
        const std::vector<int32_t>& f = s->request->feed;
        if (s->prompt_done >= (int64_t)f.size() || f.size() >= r.feed.size()) continue;
        if (std::equal(f.begin(), f.end(), r.feed.begin()))
            longest = std::max(longest, (int64_t)f.size());
    }
    return longest > 0 &&
           longest >= cache_->cached(r.feed, (int64_t)r.feed.size() - 1) + kSharedPrefillWait;
}

Clock::time_point Scheduler::admissible_at(const Request& r) {
    if (!r.req.warm_up) return r.submitted;
    return r.submitted + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(r.req.warm_up_delay));
}

std::deque<std::unique_ptr<Scheduler::Request>>::iterator Scheduler::next_admission() {
    const Clock::time_point now = Clock::now();
    auto it = std::find_if(queue_.begin(), queue_.end(),
                           [&](const auto& q) { return admissible_at(*q) <= now; });
    return it == queue_.end() || waits_for_shared_prefill(**it) ? queue_.end() : it;
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
            // (Stopping, a warm-up is work no one will read.)
            if (cancel_all || (stopping_ && (*it)->req.warm_up) ||
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
            const auto next = next_admission();
            if (next == queue_.end()) break;
            r = std::move(*next);
            queue_.erase(next);
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
            // (Warm-ups alone in the queue: until the first of their delays ends.)
            for (;;) {
                const Clock::time_point now = Clock::now();
                std::optional<Clock::time_point> until;
                bool ready = stopping_ || !cancelled_.empty() || stats_.running > 0;
                for (const auto& q : queue_) {
                    const Clock::time_point at = admissible_at(*q);
                    ready = ready || at <= now;
                    until = until ? std::min(*until, at) : at;
                }
                if (ready) break;
                if (until)
                    wake_.wait_until(lock, *until);
                else
                    wake_.wait(lock);
            }
            if (stopping_ && queue_.empty() && stats_.running == 0) break;
        }
        admit();
        run_step();
    }
}

}  // namespace dl
