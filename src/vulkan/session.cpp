// A session of the resident driver: its buffers (activations, KV caches, DeltaNet states and conv
// rings, the token id word), its recorded token commands, and snapshots of its state in device
// memory.
#include "vulkan/driver.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "core/align.h"
#include "core/error.h"
#include "core/log.h"
#include "vulkan/driver_state.h"

namespace dl::vk {

std::unique_ptr<SessionState> ResidentDriver::new_session(int64_t n_ctx) {
    const auto t0 = std::chrono::steady_clock::now();
    const Hparams& hp = model_->hp;
    Device& D = *dev_;
    const Weights& W = *w_;
    auto s = std::make_unique<Session>();
    s->n_ctx = std::min<int64_t>(n_ctx > 0 ? n_ctx : plan_.n_ctx, plan_.n_ctx);
    const ActLayout A = act_layout(hp, 1);
    s->act = D.create_buffer((uint64_t)A.total * 4, MemoryKind::device);
    s->logits = D.create_buffer((uint64_t)hp.n_vocab * 4, MemoryKind::host_read);
    s->logits_dev = D.create_buffer((uint64_t)hp.n_vocab * 4, MemoryKind::device);
    s->sample_scratch =
        D.create_buffer(Kernels::sample_scratch_bytes((uint32_t)hp.n_vocab), MemoryKind::device);
    s->kv = W.kv;
    const uint64_t tok_bytes = Kernels::tok_bytes((uint64_t)s->n_ctx);
    s->tok = D.create_buffer(tok_bytes, MemoryKind::host_fast);
    std::memset(s->tok.mapped(), 0, tok_bytes);

    const Kernels::Attention at = attention_args(hp, A, W.freq_off, (uint32_t)s->n_ctx);
    s->partials = D.create_buffer(std::max<uint64_t>(Kernels::attention_partials(at) * 4, 16),
                                  MemoryKind::device);
    s->gemv_counter = D.create_buffer(16, MemoryKind::device);
    D.fill(s->gemv_counter, 0, 16, 0);
    const uint64_t split = Kernels::split_bytes((uint32_t)hp.n_embd);
    s->gemv_split = D.create_buffer(split, MemoryKind::device);
    D.fill(s->gemv_split, 0, split, 0);
    const uint64_t head_words =
        std::max<uint64_t>({(uint64_t)hp.ssm_n_v_heads, (uint64_t)hp.n_head, 4});
    s->head_counter = D.create_buffer(head_words * 4, MemoryKind::device);
    D.fill(s->head_counter, 0, head_words * 4, 0);

    // A slot of the recurrent state's pools, zeroed: a fresh session's state and conv ring.
    if (W.state_slots) {
        const std::optional<uint32_t> slot = W.state_slots->take();
        if (!slot)
            fail(
                "all {} sessions the device holds recurrent state for are open; open the model "
                "for more sequences at once (--parallel)",
                W.state_slots->size());
        s->state_slot = *slot;
        s->state_slots = W.state_slots;
        auto* t = static_cast<uint32_t*>(s->tok.mapped());
        t[kStateBase] = (uint32_t)(*slot * deltanet_state_bytes(hp) / 4);
        t[kRingBase] = (uint32_t)(*slot * conv_ring_bytes(hp) / 4);
        for (int64_t il = 0; il < hp.n_layer; ++il) {
            if (!hp.is_recurrent(il)) continue;
            const View st = W.state(*s, il, hp), ring = W.ring(*s, il, hp);
            D.fill(W.state_pool[il], st.offset, st.range, 0);
            D.fill(W.ring_pool[il], ring.offset, ring.range, 0);
        }
    }

    // The token commands: one that copies the logits to the host (decode), one that returns only
    // the chosen token (greedy and sampled decode); in each attention form some position takes.
    // The launcher's form first, so its pipelines are created in the order they were before there
    // was a short form: recorded second, its tokens at 4096 positions ran 1 % slower on an H200
    // (0.8B; docs/perf/history.md 2026-12-04 (05:30)), though no kernel of it changed.
    s->short_until = attn_short_positions(s->n_ctx);
    for (bool short_attn : {false, true}) {
        if (short_attn ? s->short_until == 0 : s->short_until >= s->n_ctx) continue;
        for (bool timed_whole : {false, true}) {
            if (timed_whole && !profile_) continue;
            for (bool logits : {false, true}) {
                auto& cmd = s->token_cmds[Session::token_slot(short_attn, logits, timed_whole)];
                cmd = std::make_unique<CommandList>(D);
                record_token(*s, *cmd, plan_token(*s, logits, short_attn), timed_whole);
            }
        }
    }
    log::debug(
        "vulkan: a session of {} positions opened in {:.3f} ms", s->n_ctx,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return s;
}

int64_t ResidentDriver::attn_short_positions(int64_t n_ctx) const {
    const Hparams& hp = model_->hp;
    bool attention = false;
    for (int64_t il = 0; il < hp.n_layer; ++il) attention |= !hp.is_recurrent(il);
    if (!attention || attn_short_ == 0) return 0;
    if (attn_short_ > 0) return std::min(attn_short_, n_ctx);
    // The launcher's form reads each cache row once for its g query heads, the short form once
    // a head: (g - 1) more reads of K and V (F16) a position. On an H200 the short form of the
    // 9B (g 2) was faster up to 1024 positions and slower from 4096, Qwen3-8B's (g 4) faster at
    // 128 and slower at 1024 (docs/perf/history.md 2026-12-04): 4 MiB of extra reads a layer.
    const Kernels::Attention at =
        attention_args(hp, act_layout(hp, 1), w_->freq_off, (uint32_t)n_ctx);
    const uint64_t g = w_->kernels->attention_group(at);
    if (g <= 1) return 0;
    const uint64_t extra = (g - 1) * (uint64_t)hp.n_head_kv * (uint64_t)hp.head_dim * 2 * 2;
    const int64_t chunks = (int64_t)((4ull << 20) / extra / Kernels::kAttnSplit);
    return std::min<int64_t>(chunks * Kernels::kAttnSplit, n_ctx);
}

void ResidentDriver::reserve_rows(Session& s, int64_t rows) {
    if (!s.kv || rows <= s.n_past) return;  // no attention layers, or nothing to write
    const size_t need = (size_t)Kernels::kv_blocks((uint64_t)rows);
    auto* table = static_cast<uint32_t*>(s.tok.mapped()) + Kernels::kKvTable;
    auto take = [&] {
        const std::optional<uint32_t> b = s.kv->take();
        if (!b)
            throw CacheFull(fmt::format(
                "the KV cache is full: its {} blocks of {} tokens are all held by sequences and "
                "cached prefixes",
                s.kv->size(), Kernels::kKvBlock));
        return *b;
    };
    // The block the next row goes into, where it holds earlier rows and has other holders (a
    // snapshot, a session restored from one): this session writes into a copy of its own.
    const size_t first = (size_t)(s.n_past / Kernels::kKvBlock);
    if (first < s.kv_blocks.size() && s.kv->shared(s.kv_blocks[first])) {
        const uint32_t old = s.kv_blocks[first], fresh = take();
        const Hparams& hp = model_->hp;
        const uint64_t block = Kernels::kv_block_bytes(hp.n_head_kv, hp.head_dim);
        CommandList cl(*dev_);
        cl.begin();
        for (int64_t il = 0; il < hp.n_layer; ++il) {
            if (hp.is_recurrent(il)) continue;
            cl.copy(w_->k_pool[il], old * block, w_->k_pool[il], fresh * block, block);
            cl.copy(w_->v_pool[il], old * block, w_->v_pool[il], fresh * block, block);
        }
        cl.end();
        cl.submit_and_wait();
        s.kv_blocks[first] = fresh;
        table[first] = fresh;
        s.kv->give(old);
    }
    while (s.kv_blocks.size() < need) {
        const uint32_t b = take();
        table[s.kv_blocks.size()] = b;
        s.kv_blocks.push_back(b);
    }
}

Executor::CacheUse ResidentDriver::cache_use() const {
    const FreeList* kv = w_->kv.get();
    if (!kv) return {};
    const int64_t block = Kernels::kKvBlock;
    return {(int64_t)(kv->size() - kv->free()) * block, (int64_t)kv->size() * block};
}

void ResidentDriver::release_rows(Session& s, int64_t rows) {
    const size_t keep = (size_t)Kernels::kv_blocks((uint64_t)rows);
    while (s.kv_blocks.size() > keep) {
        s.kv->give(s.kv_blocks.back());
        s.kv_blocks.pop_back();
    }
}

namespace {

// A session's state at one position. Its attention rows stay where they are: the snapshot holds
// the session's blocks of them (a writer copies a shared block first), until it is spilled to
// host memory, where they are held in order. The recurrent state and conv ring are copies.
// Everything the snapshot copies lives in one buffer (per-layer offsets into it): a buffer a
// layer made 48 allocations a 9B snapshot, each a vkAllocateMemory, and a server that keeps a
// few hundred snapshots would pass the device's allocation count (4,096 on many drivers).
// Its buffer comes from the driver's pool and goes back to it (buffer_pool.h).
struct DeviceSnapshot : SessionSnapshot {
    ~DeviceSnapshot() override {
        for (uint32_t b : kv_blocks) kv->give(b);
        if (buffers) buffers->give(std::move(data), kind());
    }
    MemoryKind kind() const { return spilled ? MemoryKind::host : MemoryKind::device; }
    const void* owner = nullptr;
    std::vector<uint32_t> kv_blocks;
    std::shared_ptr<FreeList> kv;
    std::shared_ptr<BufferPool> buffers;
    Buffer data;              // device memory, or host memory once spilled
    uint64_t data_bytes = 0;  // of data, in use (the pool's buffers are rounded up)
    // Per layer, byte offsets into data (kNone where the layer has none): the spilled attention
    // rows (whole blocks, in order), the recurrent state and conv ring.
    static constexpr uint64_t kNone = ~uint64_t{0};
    std::vector<uint64_t> k, v, state, ring;
};

// Copies the first `rows` rows of a paged cache (these blocks, in order) to or from a buffer
// holding them in order from byte flat_at, one copy a run of consecutive pool blocks.
void copy_blocks(CommandList& cl, std::span<const uint32_t> blocks, int64_t rows,
                 uint64_t block_bytes, const Buffer& pool, const Buffer& flat, uint64_t flat_at,
                 bool to_flat) {
    const size_t n = (size_t)Kernels::kv_blocks((uint64_t)rows);
    DL_ASSERT(n <= blocks.size());
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && blocks[j] == blocks[j - 1] + 1) ++j;
        const uint64_t pool_off = blocks[i] * block_bytes, flat_off = flat_at + i * block_bytes;
        const uint64_t bytes = (j - i) * block_bytes;
        if (to_flat)
            cl.copy(pool, pool_off, flat, flat_off, bytes);
        else
            cl.copy(flat, flat_off, pool, pool_off, bytes);
        i = j;
    }
}

}  // namespace

std::unique_ptr<SessionSnapshot> ResidentDriver::snapshot(const SessionState& st) {
    const Session& s = static_cast<const Session&>(st);
    const Hparams& hp = model_->hp;
    const Weights& W = *w_;
    Device& D = *dev_;
    auto snap = std::make_unique<DeviceSnapshot>();
    snap->owner = this;
    snap->buffers = snapshot_buffers_;
    snap->n_past = s.n_past;
    // The blocks that hold its rows, held by the snapshot too (not in its bytes: they are the
    // pool's, shared with the session and other snapshots of the same beginning; a full pool
    // sheds snapshots through CacheFull).
    snap->kv = s.kv;
    if (s.kv) {
        const size_t n = (size_t)Kernels::kv_blocks((uint64_t)s.n_past);
        for (size_t i = 0; i < n; ++i) {
            s.kv->hold(s.kv_blocks[i]);
            snap->kv_blocks.push_back(s.kv_blocks[i]);
        }
    }
    // The recurrent layers' state and ring, packed in layer order.
    const size_t L = (size_t)hp.n_layer;
    snap->k.assign(L, DeviceSnapshot::kNone);
    snap->v.assign(L, DeviceSnapshot::kNone);
    snap->state.assign(L, DeviceSnapshot::kNone);
    snap->ring.assign(L, DeviceSnapshot::kNone);
    uint64_t bytes = 0;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        if (!hp.is_recurrent(il)) continue;
        snap->state[il] = bytes;
        bytes += align_up(W.state(s, il, hp).range, 16);
        snap->ring[il] = bytes;
        bytes += align_up(W.ring(s, il, hp).range, 16);
    }
    if (bytes > 0) {
        snap->data = snapshot_buffers_->take(bytes, MemoryKind::device);
        snap->data_bytes = bytes;
        CommandList cl(D);
        cl.begin();
        for (int64_t il = 0; il < hp.n_layer; ++il) {
            if (!hp.is_recurrent(il)) continue;
            const View st = W.state(s, il, hp), ring = W.ring(s, il, hp);
            cl.copy(W.state_pool[il], st.offset, snap->data, snap->state[il], st.range);
            cl.copy(W.ring_pool[il], ring.offset, snap->data, snap->ring[il], ring.range);
        }
        cl.end();
        cl.submit_and_wait();
        snap->bytes += snap->data.size();
    }
    return snap;
}

bool ResidentDriver::spill(SessionSnapshot& base) {
    auto* snap = dynamic_cast<DeviceSnapshot*>(&base);
    if (!snap || snap->owner != this) fail("the snapshot was made by another executor");
    if (snap->spilled) return true;
    const Hparams& hp = model_->hp;
    const Weights& W = *w_;
    Device& D = *dev_;
    const uint64_t block = Kernels::kv_block_bytes(hp.n_head_kv, hp.head_dim);
    const uint64_t kv_bytes = snap->kv_blocks.size() * block;
    // The host buffer: each attention layer's rows (keys, then values), then the recurrent
    // part as the device buffer holds it.
    std::vector<uint64_t> k(snap->k.size(), DeviceSnapshot::kNone), v = k;
    uint64_t bytes = 0;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        if (hp.is_recurrent(il) || kv_bytes == 0) continue;
        k[il] = bytes;
        v[il] = bytes + kv_bytes;
        bytes += 2 * kv_bytes;
    }
    const uint64_t recurrent_at = bytes;
    bytes += snap->data_bytes;
    if (bytes == 0) bytes = 4;
    Buffer host;
    try {
        host = snapshot_buffers_->take(bytes, MemoryKind::host);
        CommandList cl(D);
        cl.begin();
        for (int64_t il = 0; il < hp.n_layer; ++il) {
            if (k[il] == DeviceSnapshot::kNone) continue;
            copy_blocks(cl, snap->kv_blocks, snap->n_past, block, W.k_pool[il], host, k[il], true);
            copy_blocks(cl, snap->kv_blocks, snap->n_past, block, W.v_pool[il], host, v[il], true);
        }
        if (snap->data_bytes) cl.copy(snap->data, 0, host, recurrent_at, snap->data_bytes);
        cl.end();
        cl.submit_and_wait();
    } catch (const Error& e) {
        log::debug("a snapshot stays on the device: {}", e.what());
        return false;  // no host memory for it: the caller drops it instead
    }
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        if (snap->state[il] != DeviceSnapshot::kNone) snap->state[il] += recurrent_at;
        if (snap->ring[il] != DeviceSnapshot::kNone) snap->ring[il] += recurrent_at;
    }
    snap->k = std::move(k);
    snap->v = std::move(v);
    snapshot_buffers_->give(std::move(snap->data), MemoryKind::device);
    snap->data = std::move(host);
    snap->data_bytes = bytes;
    snap->bytes = snap->data.size();  // the rows now too
    for (uint32_t b : snap->kv_blocks) snap->kv->give(b);
    snap->kv_blocks.clear();
    snap->spilled = true;
    return true;
}

bool ResidentDriver::restore(SessionState& st, const SessionSnapshot& base) {
    Session& s = static_cast<Session&>(st);
    const auto* snap = dynamic_cast<const DeviceSnapshot*>(&base);
    if (!snap || snap->owner != this) fail("the snapshot was made by another executor");
    if (snap->n_past > s.n_ctx)
        fail("the snapshot holds {} tokens; the session has room for {}", snap->n_past, s.n_ctx);
    const Hparams& hp = model_->hp;
    const Weights& W = *w_;
    const uint64_t block = Kernels::kv_block_bytes(hp.n_head_kv, hp.head_dim);
    CommandList cl(*dev_);
    cl.begin();
    if (!snap->spilled && s.kv) {
        // The snapshot's blocks become the session's (held by both); its own go back.
        for (uint32_t b : snap->kv_blocks) s.kv->hold(b);
        release_rows(s, 0);
        s.kv_blocks = snap->kv_blocks;
        auto* table = static_cast<uint32_t*>(s.tok.mapped()) + Kernels::kKvTable;
        std::copy(s.kv_blocks.begin(), s.kv_blocks.end(), table);
    } else if (s.kv) {
        // Fresh blocks for its rows (a full pool leaves the session as it was: none of its own
        // is given back before all are taken), then the rows into them.
        std::vector<uint32_t> fresh;
        for (size_t i = 0; i < (size_t)Kernels::kv_blocks((uint64_t)snap->n_past); ++i) {
            const std::optional<uint32_t> b = s.kv->take();
            if (!b) {
                for (uint32_t f : fresh) s.kv->give(f);
                throw CacheFull(fmt::format(
                    "the KV cache is full: no {} free blocks of {} tokens to restore {} tokens "
                    "into",
                    Kernels::kv_blocks((uint64_t)snap->n_past), Kernels::kKvBlock, snap->n_past));
            }
            fresh.push_back(*b);
        }
        release_rows(s, 0);
        s.kv_blocks = std::move(fresh);
        auto* table = static_cast<uint32_t*>(s.tok.mapped()) + Kernels::kKvTable;
        std::copy(s.kv_blocks.begin(), s.kv_blocks.end(), table);
        for (int64_t il = 0; il < hp.n_layer; ++il) {
            if (hp.is_recurrent(il) || snap->n_past == 0) continue;
            copy_blocks(cl, s.kv_blocks, snap->n_past, block, W.k_pool[il], snap->data, snap->k[il],
                        false);
            copy_blocks(cl, s.kv_blocks, snap->n_past, block, W.v_pool[il], snap->data, snap->v[il],
                        false);
        }
    }
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        if (!hp.is_recurrent(il)) continue;
        const View st = W.state(s, il, hp), ring = W.ring(s, il, hp);
        cl.copy(snap->data, snap->state[il], W.state_pool[il], st.offset, st.range);
        cl.copy(snap->data, snap->ring[il], W.ring_pool[il], ring.offset, ring.range);
    }
    cl.end();
    cl.submit_and_wait();
    s.n_past = snap->n_past;
    return true;
}

// One pass reads every slab once; a first pass warms the pipelines and the page tables, then
// kPasses back to back are timed. The best of three submissions, so a momentary neighbour does not
// count. Without device timestamps, the host's clock around a submission (all its passes).

}  // namespace dl::vk
