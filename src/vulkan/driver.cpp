// The resident driver (see driver.h): the weights uploaded per the plan, the Executor's calls
// (decode through a session's token command, prefill through window commands), and its
// registration with the engine.
#include "vulkan/driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "executor/device_driver.h"
#include "model/rope.h"
#include "quant/quant.h"
#include "vulkan/chain.h"
#include "vulkan/driver_state.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {

namespace {

constexpr uint32_t kParamAlign = 64;  // floats: 256-byte aligned parameter tensors

// The windows' expert scratch the plan holds for tuning t on a device: the sorted expert tiles'
// pairs (NV cooperative matrix 2 only) and the stacks expanded to F16, which the sorted tiles read
// unless told to decode their blocks, and the grouped tiles where Tuning::expert_expand asks.
void plan_expert_windows(PlanOptions& o, const Tuning& t, const Features& f, Variant v) {
    const bool cm2 = Kernels::gemm_uses_cm2(f, v);
    o.sorted_expert_pairs = cm2 ? t.expert_cm2_pairs : 0;
    o.expert_stacks_f16_pairs = t.expert_expand               ? 1
                                : cm2 && !t.expert_cm2_blocks ? t.expert_cm2_pairs
                                                              : 0;
}

}  // namespace

Result<std::unique_ptr<ResidentDriver>> ResidentDriver::create(std::shared_ptr<const Model> model,
                                                               const DriverOptions& opts) {
    auto dev = Device::open(opts.device);
    if (!dev) return dev.decline();
    std::unique_ptr<ResidentDriver> d(new ResidentDriver());
    d->model_ = model;
    d->dev_ = std::move(*dev);
    Device& D = *d->dev_;
    PlanOptions po = opts.plan;
    plan_expert_windows(po, opts.tuning, D.features(), D.variant());
    auto p = vk::plan(*model, D.features(), D.variant(), po);
    if (!p) return p.decline();
    d->plan_ = std::move(*p);
    const Plan& P = d->plan_;
    // The plan offered the largest context that fits (PlanOptions::shrink_context): say so, since
    // sessions then end there rather than where the user asked.
    if (P.n_ctx < opts.plan.n_ctx)
        log::warn(
            "{}: a context of {} tokens does not fit in the device's memory; sessions hold "
            "up to {} tokens (KV cache {})",
            D.name(), opts.plan.n_ctx, P.n_ctx, human_bytes(P.kv_bytes));
    auto w = std::make_unique<Weights>();

    // Weights in their block formats, slab by slab.
    for (uint64_t size : P.slabs) w->slabs.push_back(D.create_buffer(size, MemoryKind::device));
    // Rows the device holds in tiles (weight_layout.h) go through a host buffer of whole tiles,
    // about 64 MiB at a time.
    std::vector<uint8_t> tiles;
    for (const Placement& pl : P.matrices) {
        const Tensor& t = *pl.tensor;
        const auto* src = static_cast<const uint8_t*>(t.data);
        if (!tiled(t.type)) {
            D.upload(w->slabs[pl.slab], pl.offset, src, pl.bytes);
            continue;
        }
        const uint64_t rb = row_size(t.type, t.ne[0]), rows = (uint64_t)device_rows(t);
        DL_ASSERT(device_bytes(t.type, t.ne[0], rows) == pl.bytes);
        const uint64_t chunk = std::max<uint64_t>(1, (64ull << 20) / (rb * kTileRows)) * kTileRows;
        for (uint64_t r = 0; r < rows; r += chunk) {
            const uint64_t n = std::min(chunk, rows - r), bytes = device_bytes(t.type, t.ne[0], n);
            tiles.resize(bytes);
            to_device_layout(t.type, (uint32_t)t.ne[0], n, src + r * rb, tiles.data());
            D.upload(w->slabs[pl.slab], pl.offset + r * rb, tiles.data(), bytes);
        }
    }

    // Small tensors as F32, and the rope table.
    std::vector<float> params;
    auto pad = [&] {
        params.resize((params.size() + kParamAlign - 1) / kParamAlign * kParamAlign);
    };
    for (const Tensor& t : model->tensors()) {
        if (t.ne.size() > 1 && t.name.find("ssm_conv1d") == std::string::npos) continue;
        w->param_off[&t] = (uint32_t)params.size();
        size_t n = (size_t)t.n_elements();
        params.resize(params.size() + n);
        quant::dequantize(t.type, t.data, params.data() + params.size() - n, (int64_t)n);
        pad();
    }
    const Hparams& hp = model->hp;
    // Rope inverse frequencies, divided by llama-3's rope_freqs when the model has them: the
    // CPU chain's own table, so both executors rotate by the same angles.
    w->freq_off = (uint32_t)params.size();
    const std::vector<float> inv_freq = rope_inv_freq(*model, std::max<int64_t>(hp.rope_dims, 2));
    params.insert(params.end(), inv_freq.begin(), inv_freq.end());
    pad();
    w->params = D.create_buffer(params.size() * 4, MemoryKind::device);
    D.upload(w->params, 0, params.data(), params.size() * 4);
    w->pipes = std::make_unique<Pipelines>(D);
    w->kernels = std::make_unique<Kernels>(D, *w->pipes);
    w->kernels->tuning = opts.tuning;
    Tuning& tn = w->kernels->tuning;
    if (tn.gemm_skinny && Kernels::gemm_uses_skinny(D.features(), P.variant)) {
        // The skinny GEMM beat the batched GEMV from 8 rows on an H100 (9B Q4_K_M, pp16 + tg32:
        // B32 1,198 -> 2,339 t/s; B8 837.6 -> 970.4 with its loads ahead and four tiles of
        // weight rows; fewer rows not measured); where every quantized matrix of the windows is one
        // it reads, it takes their GEMMs of more rows (their inputs then copied to F16, not
        // rounded). (A model of F32 or F16 matrices keeps the batched GEMV: its batched rows then
        // compute as their solo decodes do, exactly.)
        bool all = true, any = false;
        for (const auto& group : gemm_groups(*model, true))
            for (const Tensor* t : group) {
                const bool k_quant = t->type == QType::Q4_K || t->type == QType::Q6_K;
                all &= k_quant || !Kernels::block_format(t->type);
                any |= k_quant;
            }
        if (all && any) tn.gemm_gemv_rows = std::min(tn.gemm_gemv_rows, Tuning::kSkinnyGemvRows);
    }
    if (P.window > 0) {
        w->win_act = D.create_buffer((uint64_t)act_layout(hp, (uint32_t)P.window).total * 4,
                                     MemoryKind::device);
        w->win_ids = D.create_buffer((uint64_t)P.window * 4, MemoryKind::host_fast);
        if (P.window_x16_bytes > 0)
            w->win_x16 = D.create_buffer(P.window_x16_bytes, MemoryKind::device);
        if (P.window_w16_bytes > 0)
            w->win_w16 = D.create_buffer(P.window_w16_bytes, MemoryKind::device);
        // The sorted expert tiles' pairs' rows gathered as F16, and the stacks expanded to F16.
        if (P.window_pairs16_bytes > 0)
            w->win_pairs16 = D.create_buffer(P.window_pairs16_bytes, MemoryKind::device);
        if (P.window_experts16_bytes > 0)
            w->win_experts16 = D.create_buffer(P.window_experts16_bytes, MemoryKind::device);
        if (P.window_split_bytes > 0) {  // (its counters zero between GEMMs)
            w->win_split = D.create_buffer(P.window_split_bytes, MemoryKind::device);
            D.fill(w->win_split, 0, P.window_split_bytes, 0);
        }
    }
    // The paged KV cache: a key and a value pool of the plan's blocks for each attention layer.
    if (P.kv_blocks > 0) {
        const uint64_t bytes = P.kv_blocks * Kernels::kv_block_bytes(hp.n_head_kv, hp.head_dim);
        for (int64_t il = 0; il < hp.n_layer; ++il) {
            const bool attention = !hp.is_recurrent(il);
            w->k_pool.push_back(attention ? D.create_buffer(bytes, MemoryKind::device) : Buffer{});
            w->v_pool.push_back(attention ? D.create_buffer(bytes, MemoryKind::device) : Buffer{});
        }
        w->kv = std::make_shared<FreeList>((uint32_t)P.kv_blocks);
    }
    // The recurrent state's pools: a slot for each session open at once, zero until a session
    // takes it (a fresh session's state and conv ring are zero).
    if (P.state_slots > 0) {
        for (int64_t il = 0; il < hp.n_layer; ++il) {
            if (!hp.is_recurrent(il)) {
                w->state_pool.emplace_back();
                w->ring_pool.emplace_back();
                continue;
            }
            w->state_pool.push_back(
                D.create_buffer(P.state_slots * deltanet_state_bytes(hp), MemoryKind::device));
            w->ring_pool.push_back(
                D.create_buffer(P.state_slots * conv_ring_bytes(hp), MemoryKind::device));
        }
        w->state_slots = std::make_shared<FreeList>((uint32_t)P.state_slots);
    }
    d->w_ = std::move(w);
    if (opts.profile) d->profile_ = std::make_unique<Profile>();
    d->fusions_ = opts.fusions;
    d->attn_short_ = opts.attn_short;
    d->expand_ahead_ = opts.expand_ahead;
    d->early_submit_ = opts.early_submit;
    d->mix_chunks_ = opts.mixed_steps;
    d->snapshot_buffers_ = std::make_shared<BufferPool>(*d->dev_, 2);
    d->gemm_groups_ = opts.gemm_groups;
    d->f16_by_writer_ = opts.f16_by_writer;
    log::debug("vulkan: {}: {}", D.name(), P.describe());
    return d;
}

ResidentDriver::~ResidentDriver() {
    if (profile_) fmt::print(stderr, "{}", profile_->report());
}

std::string ResidentDriver::name() const {
    return dev_->name();
}

Kernels::ExpertGemv expert_args(const Hparams& hp, const ActLayout& A, const Tensor* t,
                                uint32_t rows, uint32_t first_row, uint32_t x_off, bool per_slot,
                                uint32_t y_off, bool sum, uint32_t n_rows) {
    Kernels::ExpertGemv e;
    e.type = t->type;
    e.rows = rows;
    e.cols = (uint32_t)t->cols();
    e.n_expert = (uint32_t)hp.n_expert;
    e.k = (uint32_t)hp.n_expert_used;
    e.expert_rows = (uint32_t)t->rows();
    e.first_row = first_row;
    e.perm_off = !sum && n_rows > 1 ? A.perm : Kernels::kNone;
    e.route_off = A.route;
    e.x_off = x_off;
    e.x_per_slot = per_slot || sum;
    e.y_off = y_off;
    e.sum = e.accumulate = sum;
    e.n_rows = n_rows;
    return e;
}

Kernels::Attention attention_args(const Hparams& hp, const ActLayout& A, uint32_t freq_off,
                                  uint32_t n_ctx) {
    const uint32_t hd = (uint32_t)hp.head_dim;
    const bool gated = hp.attn_output_gate;
    Kernels::Attention at{};
    at.n_head = (uint32_t)hp.n_head;
    at.n_kv = (uint32_t)hp.n_head_kv;
    at.head_dim = hd;
    at.n_rot = (uint32_t)hp.rope_dims;
    at.n_ctx = n_ctx;
    at.q_off = A.q;
    at.q_stride = gated ? 2 * hd : hd;
    at.k_off = A.k;
    at.v_off = A.v;
    at.qo_off = A.qo;
    at.o_off = A.o;
    at.gate_off = gated ? A.q + hd : Kernels::kNone;
    at.gate_stride = 2 * hd;
    at.q_norm_off = Kernels::kNone;
    at.k_norm_off = Kernels::kNone;
    at.freq_off = freq_off;
    at.eps = hp.rms_eps;
    at.interleaved = hp.rope_style == RopeStyle::interleaved;
    return at;
}

Kernels::DeltaNetStep ResidentDriver::deltanet_args(const ActLayout& A, const Layer& L) const {
    const Hparams& hp = model_->hp;
    const Weights& W = *w_;
    return Kernels::DeltaNetStep{(uint32_t)hp.ssm_n_k_heads,
                                 (uint32_t)hp.ssm_n_v_heads,
                                 (uint32_t)hp.ssm_d_state,
                                 (uint32_t)(hp.ssm_d_inner / hp.ssm_n_v_heads),
                                 (uint32_t)hp.ssm_conv_kernel,
                                 A.qkv,
                                 A.z,
                                 A.beta,
                                 A.alpha,
                                 A.y,
                                 W.param(L.ssm_conv1d),
                                 W.param(L.ssm_dt_bias),
                                 W.param(L.ssm_a),
                                 W.param(L.ssm_norm),
                                 hp.rms_eps,
                                 A.dn_wy};
}

// The best rate of kPasses reads of `parts` (each read whole), timed on the device; three
// submissions, so a momentary neighbour does not count.
double ResidentDriver::read_rate(const std::vector<View>& parts) {
    Kernels& K = *w_->kernels;
    constexpr int kPasses = 4;
    uint64_t bytes = 0;
    uint32_t groups = 0;
    for (const View& v : parts) {
        bytes += v.range;
        groups += K.stream_read_groups(v.range);
    }
    if (bytes == 0) return 0;
    Buffer out = dev_->create_buffer((uint64_t)groups * 4 * (kPasses + 1), MemoryKind::device);
    CommandList cl(*dev_);
    cl.enable_timestamps(2);
    cl.begin(true);  // submitted three times
    uint32_t out_off = 0;
    auto pass = [&] {
        for (const View& v : parts) {
            K.stream_read(cl, v, v.range, view(out), out_off);
            out_off += K.stream_read_groups(v.range);
        }
    };
    pass();
    cl.barrier();
    cl.mark("warm");
    for (int i = 0; i < kPasses; ++i) pass();
    cl.mark("read");
    cl.end();
    double best = 0;
    for (int r = 0; r < 3; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        cl.submit_and_wait();
        const double host_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const auto times = cl.times();
        const double s = times.size() == 2 ? times[1].second * 1e-3 : host_s;
        const double passes = times.size() == 2 ? kPasses : kPasses + 1;
        if (s > 0) best = std::max(best, double(bytes) * passes / s / 1e9);
    }
    return best;
}

// A floor must not be beaten: the read of the weights themselves measured 2,002 GB/s for a 9B
// whose decode reads them faster (2,350 GB/s), while the same probe read a 0.8B's at 4,669. So
// the weights are read in views of at most 256 MiB, and a scratch buffer of 1 GiB is read too
// where a hardware device has room; the floor takes the best of the two.
Executor::ReadRate ResidentDriver::measure_read_rate() {
    constexpr uint64_t kPart = 256ull << 20;
    std::vector<View> weights;
    uint64_t weight_bytes = 0;
    for (const Buffer& b : w_->slabs) {
        const uint64_t n = b.size() / 16 * 16;  // whole 16-byte words
        for (uint64_t off = 0; off < n; off += kPart) {
            weights.push_back(view(b, off, std::min(kPart, n - off)));
            weight_bytes += weights.back().range;
        }
    }
    if (weight_bytes == 0) return {};
    const double of_weights = read_rate(weights);
    double of_scratch = 0;
    // (A software device reads host memory: its caches are the CPU's, and 1 GiB read fifteen
    // times there takes seconds.)
    if (!dev_->features().cpu) {
        try {
            Buffer scratch = dev_->create_buffer(4 * kPart, MemoryKind::device);
            std::vector<View> parts;
            for (uint64_t off = 0; off < scratch.size(); off += kPart)
                parts.push_back(view(scratch, off, kPart));
            of_scratch = read_rate(parts);
        } catch (const Error&) {
            // No room beside the model: the weights' read stands alone.
        }
    }
    const bool scratch_best = of_scratch > of_weights;
    return {std::max(of_weights, of_scratch),
            fmt::format("measured on the device (the best of every weight read 4 times, {:.0f} "
                        "MiB in views of 256 MiB, {:.0f} GB/s, and 1 GiB of scratch{}; {})",
                        double(weight_bytes) / double(1 << 20), of_weights,
                        of_scratch > 0 ? fmt::format(", {:.0f} GB/s", of_scratch)
                                       : std::string(" not allocated"),
                        scratch_best ? "the scratch's" : "the weights'")};
}

void ResidentDriver::set_tok(Session& s, int32_t token, const SampleArgs& args) {
    set_tok(static_cast<uint32_t*>(s.tok.mapped()), s.n_past, token, args);
}

void ResidentDriver::set_tok(uint32_t* t, int64_t position, int32_t token, const SampleArgs& args) {
    t[0] = (uint32_t)position;
    t[1] = (uint32_t)token;
    auto bits = [](float f) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        return u;
    };
    t[kSampleParams] = bits(args.temperature);
    t[kSampleParams + 1] = (uint32_t)args.top_k;
    t[kSampleParams + 2] = bits(args.top_p);
    t[kSampleParams + 3] = bits(args.min_p);
    t[kSampleParams + 4] = bits(args.u);
}

void ResidentDriver::run_token(Session& s, int32_t token, bool logits, const SampleArgs& args) {
    if (s.n_past >= s.n_ctx) fail("the session is full ({} tokens)", s.n_ctx);
    if (token < 0 || token >= model_->hp.n_vocab)
        fail("token id {} is outside the vocabulary of {}", token, model_->hp.n_vocab);
    reserve_rows(s, s.n_past + 1);
    set_tok(s, token, args);
    const bool whole = profile_ && s.profiled_tokens++ % 2 == 1;
    CommandList& cmd = *s.token_cmds[Session::token_slot(s.n_past < s.short_until, logits, whole)];
    cmd.submit_and_wait();
    if (profile_) profile_->add("decode", 1, cmd.times());
    ++s.n_past;
}

std::span<const float> ResidentDriver::decode(SessionState& st, int32_t token) {
    Session& s = static_cast<Session&>(st);
    run_token(s, token, true, SampleArgs{});
    return {static_cast<const float*>(s.logits.mapped()), (size_t)model_->hp.n_vocab};
}

int32_t ResidentDriver::decode_greedy(SessionState& st, int32_t token) {
    Session& s = static_cast<Session&>(st);
    run_token(s, token, false, SampleArgs{});
    return sampled_token(s.tok.mapped());
}

ResidentDriver::CommandCounts ResidentDriver::token_command_counts(const SessionState& st) const {
    const Session& s = static_cast<const Session&>(st);
    const CommandList& cmd = *s.token_cmds[Session::token_slot(s.short_until > 0, false, false)];
    const TokenPlan p = plan_token(s, false, s.short_until > 0);
    return {cmd.n_dispatches(),   cmd.n_barriers(),        p.ffn_q8_reads,
            p.gated_norm_reads,   p.deltanet_q8_reads,     p.residual_q8_writes,
            p.attention_q8_reads, p.shared_output_pipeline};
}

WindowPlan ResidentDriver::window_plan(const SessionState& st, uint32_t m, bool all) const {
    return plan_window(st.n_ctx, m, all);
}

WindowPlan ResidentDriver::batch_plan(uint32_t m, bool host_logits) const {
    StepRows rows;
    rows.decode_rows = m;
    return plan_window(plan_.n_ctx, m, true, &rows, host_logits);
}

TokenPlan ResidentDriver::token_plan(const SessionState& st, bool host_logits,
                                     bool short_attn) const {
    return plan_token(static_cast<const Session&>(st), host_logits, short_attn);
}

int64_t ResidentDriver::short_attention_until(const SessionState& st) const {
    return static_cast<const Session&>(st).short_until;
}

bool ResidentDriver::samples_on_device(const SamplerParams& p) const {
    return p.repeat_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f &&
           (p.temperature <= 0.0f || (p.top_k >= 1 && p.top_k <= (int32_t)Kernels::kSampleTopK));
}

int32_t ResidentDriver::decode_sample(SessionState& st, int32_t token, const SamplerParams& p,
                                      double u) {
    if (!samples_on_device(p))
        fail("these sampling parameters (top_k {}, repeat_penalty {}) are sampled on the host",
             p.top_k, p.repeat_penalty);
    Session& s = static_cast<Session&>(st);
    run_token(s, token, false, SampleArgs{p.temperature, p.top_k, p.top_p, p.min_p, (float)u});
    return sampled_token(s.tok.mapped());
}

void ResidentDriver::prefill(SessionState& st, std::span<const int32_t> tokens, LogitsRows rows,
                             std::vector<float>& logits) {
    Session& s = static_cast<Session&>(st);
    if (s.n_past + (int64_t)tokens.size() > s.n_ctx)
        fail("the prompt of {} tokens does not fit the session ({} of {} used)", tokens.size(),
             s.n_past, s.n_ctx);
    const int32_t n_vocab = model_->hp.n_vocab;
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab) fail("token id {} is outside the vocabulary of {}", t, n_vocab);
    reserve_rows(s, s.n_past + (int64_t)tokens.size());
    const size_t V = (size_t)n_vocab;
    const bool all = rows == LogitsRows::all;
    logits.clear();
    if (plan_.window == 0) {  // no window kernels on this device: replay the token command
        for (size_t i = 0; i < tokens.size(); ++i) {
            run_token(s, tokens[i], true, SampleArgs{});
            if (all || i + 1 == tokens.size()) {
                size_t at = logits.size();
                logits.resize(at + V);
                std::memcpy(logits.data() + at, s.logits.mapped(), V * 4);
            }
        }
        return;
    }
    Weights& W = *w_;
    const size_t window = (size_t)plan_.window;
    if (all && !W.win_logits)
        W.win_logits = dev_->create_buffer((uint64_t)window * V * 4, MemoryKind::host);
    for (size_t start = 0; start < tokens.size(); start += window) {
        const uint32_t m = (uint32_t)std::min(window, tokens.size() - start);
        std::memcpy(W.win_ids.mapped(), tokens.data() + start, (size_t)m * 4);
        static_cast<uint32_t*>(s.tok.mapped())[0] = (uint32_t)s.n_past;
        CommandList& cmd = window_command(s, m, all, true);
        cmd.submit_and_wait();
        if (profile_) {
            profile_->add("prefill", m, cmd.times());
            log::debug("vulkan profile: a window of {} rows at position {}: {}", m, s.n_past,
                       Profile::line(cmd.times()));
        }
        s.n_past += m;
        if (all) {
            size_t at = logits.size();
            logits.resize(at + (size_t)m * V);
            std::memcpy(logits.data() + at, W.win_logits.mapped(), (size_t)m * V * 4);
        }
    }
    if (!all && !tokens.empty()) {
        logits.resize(V);
        std::memcpy(logits.data(), s.logits.mapped(), V * 4);
    }
}

void register_device_driver() {
    static bool done = false;
    if (done) return;
    done = true;
    DeviceDriver d;
    d.name = "vulkan";
    d.make = [](std::shared_ptr<const Model> model, int index, Capacity c,
                std::string* reason) -> std::unique_ptr<Executor> {
        DriverOptions o;
        if (index >= 0) o.device.index = index;
        if (c.n_ctx > 0) o.plan.n_ctx = c.n_ctx;
        o.plan.sequences = std::max<int64_t>(c.sequences, 1);
        o.plan.prefix_cache = c.prefix_cache;
        auto r = ResidentDriver::create(std::move(model), o);
        if (!r) {
            if (reason) *reason = r.reason();
            return nullptr;
        }
        return std::move(*r);
    };
    d.describe = [](const Model& model, Capacity c, int index) -> std::string {
        auto devs = list_devices();
        if (!devs) return "vulkan: " + devs.reason();
        if (index >= (int)devs->size())
            return fmt::format("vulkan:{}: no such device ({} found)\n", index, devs->size());
        std::string out;
        for (const DeviceSummary& s : *devs) {
            if (index >= 0 && (int)s.index != index) continue;
            PlanOptions o;
            if (c.n_ctx > 0) o.n_ctx = c.n_ctx;
            o.sequences = std::max<int64_t>(c.sequences, 1);
            o.prefix_cache = c.prefix_cache;
            plan_expert_windows(o, DriverOptions::tuning_from_env(), s.features,
                                s.features.best_variant());
            auto p = plan(model, s.features, s.features.best_variant(), o);
            out += fmt::format("vulkan:{} ({}): {}\n", s.index, s.features.name,
                               p ? p->describe() : "declines: " + p.reason());
        }
        return out;
    };
    d.list_devices = [] { return describe_devices(); };
    // Under --device auto only a hardware GPU beats the CPU chain; a software rasterizer such
    // as lavapipe runs the same kernels on the same cores, slower.
    d.preferred_under_auto = [] {
        auto devs = list_devices();
        if (!devs) return false;
        for (const DeviceSummary& s : *devs)
            if (!s.features.cpu) return true;
        return false;
    };
    register_device(std::move(d));
}

namespace {
// Registration at start-up; the deltallm binary links this library whole so it is kept.
const bool registered = (register_device_driver(), true);
}  // namespace

}  // namespace dl::vk
