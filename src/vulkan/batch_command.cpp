// A step of many sequences' decode tokens as one command (ResidentDriver::step): the window
// command's chain over one row a sequence (plan_window with columns), so the projections are GEMM
// tiles that read each weight once for every row, and each row's mixer runs on its own
// sequence's cache or state through the decode kernels. Commands are recorded once a
// composition (which sessions, in which rows) and replayed while it lasts.
#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "vulkan/driver.h"
#include "vulkan/driver_state.h"

namespace dl::vk {

CommandList& ResidentDriver::batch_command(std::span<Session* const> columns, bool host_logits) {
    std::vector<uint64_t> ids;
    for (const Session* c : columns) ids.push_back(c->id);
    auto key = std::make_pair(std::move(ids), host_logits);
    if (auto it = batch_cmds_.find(key); it != batch_cmds_.end()) return *it->second;
    // Compositions change as sequences join and leave; the oldest commands go (their sessions
    // may be gone: a key of ids never seen again is never replayed).
    if (batch_order_.size() >= kBatchCommands) {
        batch_cmds_.erase(batch_order_.front());
        batch_order_.erase(batch_order_.begin());
    }
    const uint32_t m = (uint32_t)columns.size();
    log::debug("vulkan: a batch command of {} decode rows recorded", m);
    auto cmd = std::make_unique<CommandList>(*dev_);
    record_window(*cmd, plan_window(*columns[0], m, true, columns, host_logits), *columns[0], m,
                  columns, false);
    batch_order_.push_back(key);
    return *batch_cmds_.emplace(std::move(key), std::move(cmd)).first->second;
}

void ResidentDriver::step(std::span<StepItem> items) {
    using Want = StepItem::Want;
    // The batch: the decode tokens (sessions that hold a prompt, one token each, wanting logits or
    // a token sampled here), as many as a window holds; prompt chunks and the rest run one by one
    // beside it (Executor::step).
    std::vector<size_t> batch, rest;
    for (size_t i = 0; i < items.size(); ++i) {
        const StepItem& it = items[i];
        const bool decode = it.session && it.tokens.size() == 1 && it.session->n_past > 0 &&
                            (it.want == Want::last_logits || it.want == Want::sample);
        (decode && (int64_t)batch.size() < plan_.window ? batch : rest).push_back(i);
    }
    check_step(items);  // before anything runs, so a bad item changes no session
    // Every item's cache blocks, before any runs (CacheFull leaves every session as it was).
    for (const StepItem& it : items)
        reserve_rows(static_cast<Session&>(*it.session),
                     it.session->n_past + (int64_t)it.tokens.size());
    if (batch.size() < 2) {
        Executor::step(items);
        return;
    }
    if (!rest.empty()) {
        std::vector<StepItem> others;
        for (size_t i : rest) others.push_back(items[i]);
        Executor::step(others);
        for (size_t j = 0; j < rest.size(); ++j) items[rest[j]] = others[j];
    }
    std::vector<StepItem> decodes;
    for (size_t i : batch) decodes.push_back(items[i]);
    run_batch(decodes);
    for (size_t j = 0; j < batch.size(); ++j) items[batch[j]] = decodes[j];
}

void ResidentDriver::run_batch(std::span<StepItem> items) {
    using Want = StepItem::Want;
    const Hparams& hp = model_->hp;
    const size_t V = (size_t)hp.n_vocab;
    Weights& W = *w_;
    const size_t window = (size_t)plan_.window;
    if (!W.batch_logits)
        W.batch_logits = dev_->create_buffer((uint64_t)window * V * 4, MemoryKind::device);
    if (!W.win_logits)
        W.win_logits = dev_->create_buffer((uint64_t)window * V * 4, MemoryKind::host);
    std::vector<Session*> columns;
    bool host_logits = false;
    auto* ids = static_cast<uint32_t*>(W.win_ids.mapped());
    for (size_t b = 0; b < items.size(); ++b) {
        Session& s = static_cast<Session&>(*items[b].session);
        columns.push_back(&s);
        host_logits |= items[b].want != Want::sample;
        ids[b] = (uint32_t)items[b].tokens[0];
        // Each row's position and sampling parameters, where its kernels read them (a row that
        // wants logits is sampled greedily, unread).
        const StepItem& it = items[b];
        const SamplerParams* p = it.want == Want::sample ? it.params : nullptr;
        set_tok(s, it.tokens[0],
                p ? SampleArgs{p->temperature, p->top_k, p->top_p, p->min_p, (float)it.u}
                  : SampleArgs{});
    }
    CommandList& cmd = batch_command(columns, host_logits);
    cmd.submit_and_wait();
    if (profile_) profile_->add("batch", (int64_t)items.size(), cmd.times());
    const float* logits = static_cast<const float*>(W.win_logits.mapped());
    // Every row ran: each session holds its token now, whatever a row's sampling found.
    for (Session* c : columns) ++c->n_past;
    for (size_t b = 0; b < items.size(); ++b) {
        StepItem& it = items[b];
        it.token = -1;
        it.logits = {};
        if (it.want == Want::sample) {
            it.token = sampled_token(columns[b]->tok.mapped());
        } else {
            it.logits = std::span<const float>(logits + b * V, V);
        }
    }
}

}  // namespace dl::vk
