// Continuous batching (see scheduler.h): a step. Running streams decode one token each, then
// prompts read chunks in the order prompt_place gives, under the step's token budget; after the
// step each item's outcome goes to its slot (take_outcome).
#include <algorithm>
#include <chrono>

#include "core/log.h"
#include "engine/prefix_cache.h"
#include "engine/scheduler.h"
#include "engine/scheduler_slot.h"
#include "model/model.h"

namespace dl {

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
    for (size_t i = 0; i < items.size(); ++i) take_outcome(*owners[i], items[i]);
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
void Scheduler::take_outcome(Slot& slot, StepItem& it) {
    using Want = StepItem::Want;
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
    const bool asked = std::find(g.snapshot_at.begin(), g.snapshot_at.end(), slot.prompt_done) !=
                       g.snapshot_at.end();
    const bool waypoint =
        !decoding && every > 0 &&
        slot.prompt_done / every > (slot.prompt_done - (int64_t)it.tokens.size()) / every;
    auto keep = [&](bool is_waypoint) {
        const Clock::time_point t0 = Clock::now();
        snapshot(slot, is_waypoint);
        log::debug("snapshot at {} tokens: {:.2f} ms", slot.prompt_done,
                   std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    };
    // The prompt's end is kept after its first token has gone to the client (the copy is on the
    // way to that token otherwise), before the token is fed or the request ends.
    const bool keep_end = cache_ && !decoding && at_end_of_prompt;
    if (cache_ && !decoding && !at_end_of_prompt && (asked || waypoint)) keep(waypoint && !asked);
    if (!decoding && !at_end_of_prompt) return;
    if (!decoding && slot.resume_token >= 0) {
        // A resumed request's tokens are back in its session: it goes on with the token it
        // had sampled (already reported).
        if (keep_end) keep(false);
        slot.pending = slot.resume_token;
        slot.resume_token = -1;
        return;
    }

    // This item produced the sequence's next token.
    GenerationEvent ev;
    ev.kind = GenerationEvent::Kind::token;
    int32_t token = it.token;
    if (it.want != Want::sample) {
        if ((int64_t)it.logits.size() != executor_.model().hp.n_vocab) {
            finish(slot, FinishReason::error, "the executor returned no logits");
            return;
        }
        std::span<const float> logits = it.logits;
        if (g.constraint) {
            // The request's rule on what may come next (a JSON object): the other tokens'
            // logits go to -infinity in a copy.
            slot.constrained.assign(it.logits.begin(), it.logits.end());
            if (g.constraint->mask(slot.constrained) == 0) {
                finish(slot, FinishReason::error,
                       "no token of the vocabulary can continue the constrained output");
                return;
            }
            logits = slot.constrained;
        }
        try {
            token = slot.sampler->sample(logits);
        } catch (const std::exception& e) {
            finish(slot, FinishReason::error, e.what());
            return;
        }
        if (g.constraint) g.constraint->accept(token);
        if (g.top_logprobs >= 0)
            ev.logprob = log_probability(logits, token, g.top_logprobs, ev.top);
    }
    if (token < 0 || token >= executor_.model().hp.n_vocab) {
        finish(slot, FinishReason::error, "the executor sampled no token");
        return;
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
    if (keep_end) keep(false);
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

}  // namespace dl
