// A step of many sequences' decode tokens as one command (ResidentDriver::step): the window
// command's chain over one row a sequence (plan_window of a batch), so the projections read each
// weight once for every row, and each row's mixer runs on its own sequence's cache or state
// through the decode kernels; the step's prompt chunks can ride along after the decode rows,
// their mixers on the window kernels. Which sequence a row holds is data: the row's words
// (position, token, sampling, where its state starts, its block table) are written before each step
// into the batch's rows, and the caches and states are pools every session shares. So a command is
// recorded once for each number of rows and replayed whoever joins or leaves.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "vulkan/driver.h"
#include "vulkan/driver_state.h"

namespace dl::vk {

void ResidentDriver::grow_batch(uint32_t m) {
    Weights::BatchRows& B = w_->batch;
    if (B.rows >= m) return;
    const Hparams& hp = model_->hp;
    Device& D = *dev_;
    // The commands recorded so far bind the narrower rows' buffers.
    batch_cmds_.clear();
    const uint32_t rows = std::max(m, std::min(std::bit_ceil(m), (uint32_t)plan_.window));
    auto aligned = [](uint64_t bytes) {
        return align_up(std::max<uint64_t>(bytes, 16), kBindAlign);
    };
    const Kernels::Attention at =
        attention_args(hp, act_layout(hp, 1), w_->freq_off, (uint32_t)plan_.n_ctx);
    const uint64_t head_words =
        std::max<uint64_t>({(uint64_t)hp.ssm_n_v_heads, (uint64_t)hp.n_head, 4});
    B.tok_stride = aligned(Kernels::tok_bytes((uint64_t)plan_.n_ctx));
    B.partials_stride = aligned(Kernels::attention_partials(at) * 4);
    B.counter_stride = aligned(head_words * 4);
    B.scratch_stride = aligned(Kernels::sample_scratch_bytes((uint32_t)hp.n_vocab));
    B.tok = D.create_buffer(rows * B.tok_stride, MemoryKind::host_fast);
    std::memset(B.tok.mapped(), 0, rows * B.tok_stride);
    B.partials = D.create_buffer(rows * B.partials_stride, MemoryKind::device);
    B.counter = D.create_buffer(rows * B.counter_stride, MemoryKind::device);
    D.fill(B.counter, 0, rows * B.counter_stride, 0);  // 0 between dispatches
    B.scratch = D.create_buffer(rows * B.scratch_stride, MemoryKind::device);
    B.rows = rows;
}

CommandList& ResidentDriver::batch_command(uint32_t m, bool host_logits) {
    DL_ASSERT(w_->batch.rows >= m);  // run_batch grew the rows (grow_batch) before filling them
    const auto key = std::make_pair(m, host_logits);
    if (auto it = batch_cmds_.find(key); it != batch_cmds_.end()) {
        it->second.last_used = ++batch_steps_;
        return *it->second.cmd;
    }
    if (batch_cmds_.size() >= kBatchCommands)
        batch_cmds_.erase(std::min_element(
            batch_cmds_.begin(), batch_cmds_.end(),
            [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; }));
    log::debug("vulkan: a batch command of {} decode rows recorded", m);
    BatchCommand b{std::make_unique<CommandList>(*dev_), ++batch_steps_};
    record_window(*b.cmd, batch_plan(m, host_logits), {}, m, false);
    return *batch_cmds_.emplace(key, std::move(b)).first->second.cmd;
}

// The buffers of a batch's logits: every row's on the device, and their copy for the host.
void ResidentDriver::batch_logits() {
    Weights& W = *w_;
    const uint64_t bytes = (uint64_t)plan_.window * model_->hp.n_vocab * 4;
    if (!W.batch_logits) W.batch_logits = dev_->create_buffer(bytes, MemoryKind::device);
    if (!W.win_logits) W.win_logits = dev_->create_buffer(bytes, MemoryKind::host);
}

// Records (never runs) what steps of up to `sequences` rows use: the batch command of every row
// count, and a session's window of each size whose kernels may differ (every size the batched
// GEMV takes, whose shapes follow its groups of vectors; the tiles' row classes up to 64 and
// 128 rows and past them, the split GEMMs), so the pipelines they bind are made now. The
// commands stay cached (batch) or go with the session; the pipelines stay.
std::string ResidentDriver::warm_up(int64_t sequences) {
    if (plan_.window == 0) return {};
    const auto t0 = std::chrono::steady_clock::now();
    const size_t before = pipelines();
    const uint32_t window = (uint32_t)plan_.window;
    const uint32_t most = (uint32_t)std::clamp<int64_t>(sequences, 1, window);
    batch_logits();
    grow_batch(most);  // once: wider rows would drop the commands recorded before
    for (uint32_t m = 2; m <= most; ++m)
        for (bool host_logits : {false, true}) batch_command(m, host_logits);
    auto s = new_session(plan_.n_ctx);
    std::vector<uint32_t> sizes = {64, 65, 128, 129, window};
    for (uint32_t m = 1; m <= 33; ++m) sizes.push_back(m);
    for (uint32_t m : sizes)
        if (m <= window) window_command(static_cast<Session&>(*s), m, false);
    return fmt::format(
        "vulkan: {} pipelines made ahead for steps of up to {} sequences in {:.0f} ms",
        pipelines() - before, most,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

size_t ResidentDriver::pipelines() const {
    return w_->pipes->size();
}

void ResidentDriver::step(std::span<StepItem> items) {
    using Want = StepItem::Want;
    // The batch: the decode tokens (sessions that hold a prompt, one token each, wanting logits or
    // a token sampled here), as many as a window holds. Prompt chunks that fit beside them (each
    // wanting no more than its last row's logits or token) run in the same command; other items
    // run one by one beside it (Executor::step).
    std::vector<size_t> batch, chunks, rest;
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
    if (mix_chunks_ && plan_.window > 0) {
        size_t rows = batch.size();
        for (auto at = rest.begin(); at != rest.end();) {
            const StepItem& it = items[*at];
            if (it.want != Want::all_logits && rows + it.tokens.size() <= (size_t)plan_.window) {
                rows += it.tokens.size();
                chunks.push_back(*at);
                at = rest.erase(at);
            } else {
                ++at;
            }
        }
    }
    // A lone decode token runs its session's token command; a lone chunk, its window.
    if (batch.size() + chunks.size() < 2) {
        Executor::step(items);
        return;
    }
    if (!rest.empty()) {
        std::vector<StepItem> others;
        for (size_t i : rest) others.push_back(items[i]);
        Executor::step(others);
        for (size_t j = 0; j < rest.size(); ++j) items[rest[j]] = others[j];
    }
    const size_t decodes = batch.size();
    batch.insert(batch.end(), chunks.begin(), chunks.end());
    std::vector<StepItem> run;
    for (size_t i : batch) run.push_back(items[i]);
    run_batch(run, decodes);
    for (size_t j = 0; j < batch.size(); ++j) items[batch[j]] = run[j];
}

// Row b of the batch: its session's position and sampling parameters (a row that wants logits is
// sampled greedily, unread), where its recurrent state starts, its block table.
void ResidentDriver::fill_batch_row(uint32_t b, const StepItem& it, int64_t position,
                                    int32_t token) {
    using Want = StepItem::Want;
    const Session& s = static_cast<const Session&>(*it.session);
    const SamplerParams* p = it.want == Want::sample ? it.params : nullptr;
    uint32_t* row = w_->batch.words(b);
    const auto* own = static_cast<const uint32_t*>(s.tok.mapped());
    set_tok(
        row, position, token,
        p ? SampleArgs{p->temperature, p->top_k, p->top_p, p->min_p, (float)it.u} : SampleArgs{});
    row[kStateBase] = own[kStateBase];
    row[kRingBase] = own[kRingBase];
    std::memcpy(row + Kernels::kKvTable, own + Kernels::kKvTable, s.kv_blocks.size() * 4);
}

void ResidentDriver::run_batch(std::span<StepItem> items, size_t decodes) {
    using Want = StepItem::Want;
    const size_t V = (size_t)model_->hp.n_vocab;
    Weights& W = *w_;
    batch_logits();
    const uint32_t d = (uint32_t)decodes;
    const uint32_t heads = (uint32_t)items.size();  // the head's rows: one an item
    StepRows layout;
    layout.decode_rows = d;
    std::vector<Session*> sessions;  // the chunks'
    uint32_t m = d;
    for (size_t j = d; j < items.size(); ++j) {
        Session& s = static_cast<Session&>(*items[j].session);
        sessions.push_back(&s);
        layout.chunks.push_back({(uint32_t)items[j].tokens.size(), s.n_ctx});
        m += (uint32_t)items[j].tokens.size();
    }
    grow_batch(heads);
    auto* ids = static_cast<uint32_t*>(W.win_ids.mapped());
    bool host_logits = false;
    uint32_t row = 0;
    for (uint32_t b = 0; b < heads; ++b) {
        const StepItem& it = items[b];
        host_logits |= it.want == Want::last_logits;
        std::memcpy(ids + row, it.tokens.data(), it.tokens.size() * 4);
        row += (uint32_t)it.tokens.size();
        // A chunk's rows run on its session's words (its position first); its last row is
        // sampled as the batch's row b, after the decode rows.
        if (b >= d)
            static_cast<uint32_t*>(sessions[b - d]->tok.mapped())[0] = (uint32_t)it.session->n_past;
        fill_batch_row(b, it, it.session->n_past + (int64_t)it.tokens.size() - 1, it.tokens.back());
    }
    if (sessions.empty()) {  // decodes alone: the command of m rows, replayed
        CommandList& cmd = batch_command(m, host_logits);
        cmd.submit_and_wait();
        if (profile_) profile_->add("batch", (int64_t)m, cmd.times());
    } else {  // recorded for the step (its sessions and row counts vary), queued as it goes
        CommandList cmd(*dev_);
        record_window(cmd, plan_window(plan_.n_ctx, m, true, &layout, host_logits), sessions, m,
                      true);
        cmd.submit_and_wait();
        ++mixed_steps_;
        if (profile_) {
            profile_->add("batch", (int64_t)m, cmd.times());
            log::debug("vulkan profile: a step of {} rows ({} prompt chunks): {}", m,
                       sessions.size(), Profile::line(cmd.times()));
        }
    }
    // Every row ran: each session holds its tokens now, whatever a row's sampling found.
    const float* logits = static_cast<const float*>(W.win_logits.mapped());
    for (uint32_t b = 0; b < heads; ++b) {
        StepItem& it = items[b];
        it.session->n_past += (int64_t)it.tokens.size();
        it.token = -1;
        it.logits = {};
        if (it.want == Want::sample)
            it.token = sampled_token(W.batch.words(b));
        else if (it.want == Want::last_logits)
            it.logits = std::span<const float>(logits + b * V, V);
    }
}

}  // namespace dl::vk
