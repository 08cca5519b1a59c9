// The parts of the executor interface every executor shares: the checks of a batched step and the
// one-by-one step for executors that do not batch.
#include "executor/executor.h"

#include <algorithm>

#include "core/error.h"
#include "model/model.h"

namespace dl {

void Executor::check_step(std::span<const StepItem> items) const {
    const int64_t n_vocab = model().hp.n_vocab;
    std::vector<const SessionState*> seen;
    seen.reserve(items.size());
    for (const StepItem& it : items) {
        if (!it.session) fail("a step item has no session");
        if (it.tokens.empty()) fail("a step item needs at least one token");
        if (std::find(seen.begin(), seen.end(), it.session) != seen.end())
            fail("a session appears twice in one step");
        seen.push_back(it.session);
        const int64_t n = static_cast<int64_t>(it.tokens.size());
        if (it.session->n_past + n > it.session->n_ctx)
            fail("{} tokens do not fit: {} of the context of {} are used", n, it.session->n_past,
                 it.session->n_ctx);
        for (int32_t t : it.tokens)
            if (t < 0 || t >= n_vocab)
                fail("token id {} is outside the vocabulary of {} tokens", t, n_vocab);
        if (it.want == StepItem::Want::sample) {
            if (!it.params || !samples_on_device(*it.params))
                fail("the {} executor cannot sample with these parameters; ask for logits", name());
        }
    }
}

void Executor::step(std::span<StepItem> items) {
    check_step(items);
    step_logits_.resize(std::max(step_logits_.size(), items.size()));
    for (size_t i = 0; i < items.size(); ++i) {
        StepItem& it = items[i];
        std::vector<float>& rows = step_logits_[i];
        it.logits = {};
        it.token = -1;
        const bool one = it.tokens.size() == 1;
        using Want = StepItem::Want;
        if (it.want == Want::sample && one && it.session->n_past > 0) {
            it.token = decode_sample(*it.session, it.tokens[0], *it.params, it.u);
        } else if (it.want == Want::sample) {
            fail("the {} executor samples only single decode tokens", name());
        } else if (one && it.session->n_past > 0 && it.want != Want::all_logits) {
            // Copied: a decode's row may live where the next session's decode writes.
            const std::span<const float> row = decode(*it.session, it.tokens[0]);
            rows.assign(row.begin(), row.end());
            it.logits = rows;
        } else {
            prefill(*it.session, it.tokens,
                    it.want == Want::all_logits ? LogitsRows::all : LogitsRows::last, rows);
            if (it.want != Want::nothing) it.logits = rows;
        }
    }
}

}  // namespace dl
