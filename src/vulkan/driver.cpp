// The resident driver (see driver.h): weight upload per the plan, the per-session buffers and the
// recorded token command for qwen35, qwen3 and llama.
#include "vulkan/driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <utility>

#include "core/bytes.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "cpu/ops.h"
#include "engine/engine.h"
#include "quant/quant.h"
#include "vulkan/chain.h"
#include "vulkan/kernels.h"
#include "vulkan/pipeline.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {

namespace {

constexpr uint32_t kParamAlign = 64;  // floats: 256-byte aligned parameter tensors

}  // namespace

struct ResidentDriver::Weights {
    std::vector<Buffer> slabs;
    Buffer params;
    std::map<const Tensor*, uint32_t> param_off;  // float offset of each small tensor
    uint32_t freq_off = 0;
    std::unique_ptr<Pipelines> pipes;
    std::unique_ptr<Kernels> kernels;
    // Prefill window scratch, shared by the sessions (prefill runs one window at a time):
    // activations of plan.window rows, their token ids, every row's logits when asked, and the
    // F16 copy of a GEMM input for the cooperative-matrix tiles.
    Buffer win_act, win_ids, win_logits, win_x16, win_w16;

    // The bytes of slab `slab` from `offset` that hold `bytes` of matrix rows, with the 4 spare
    // bytes the plan keeps after every matrix, rounded to whole words.
    View rows(uint32_t slab, uint64_t offset, uint64_t bytes) const {
        return view(slabs[slab], offset, (bytes + 7) / 4 * 4);
    }
    View matrix(const Plan& p, const Tensor* t) const {
        const Placement* pl = p.find(t);
        DL_ASSERT(pl);
        return rows(pl->slab, pl->offset, pl->bytes);
    }
    uint32_t param(const Tensor* t) const {
        auto it = param_off.find(t);
        DL_ASSERT(it != param_off.end());
        return it->second;
    }
};

struct ResidentDriver::Session : SessionState {
    Buffer act, logits, logits_dev, tok, partials;
    Buffer sample_scratch;  // each vocabulary chunk's candidates (Kernels::sample)
    // The word the norm epilogues of the token command count their workgroups on (0 between
    // dispatches; see Kernels::gemv_fused).
    Buffer gemv_counter;
    // The scratch of the tiled GEMVs that split their rows over workgroups (Kernels::gemv_split).
    Buffer gemv_split;
    // GEMVs of the token command that read x rounded by the GEMV before (gemv_pre_round_).
    uint32_t rounded_reads = 0;
    uint32_t gated_reads = 0;  // CommandCounts::gated_reads of the token command
    uint32_t gated_rounded = 0;
    uint32_t attn_rounded = 0;
    uint32_t attn_gated_form = 0;
    uint32_t normed_roundings = 0;
    // One word a head that the DeltaNet decode step's column groups and the decode attention's
    // splits count on (0 between dispatches; they are stages apart).
    Buffer head_counter;
    std::vector<Buffer> k_cache, v_cache;  // per layer (empty for GDN layers)
    std::vector<Buffer> state, ring;       // per layer (empty for attention layers)
    // The token commands, by token_slot(): the one that returns only the chosen token and the
    // one that writes the logits to the host; under --profile the same timed whole (every other
    // token runs these, so the profile has the token's time without the stages' timestamps);
    // each in the attention's short-context form for positions below short_until and in its
    // own form from there (either missing where no position takes it).
    std::array<std::unique_ptr<CommandList>, 8> token_cmds;
    static size_t token_slot(bool short_attn, bool logits, bool whole) {
        return (short_attn ? 4 : 0) + (logits ? 2 : 0) + (whole ? 1 : 0);
    }
    int64_t short_until = 0;
    int64_t profiled_tokens = 0;
    // Prefill window commands, by (rows, all logits): recorded on first use, replayed after.
    std::map<std::pair<uint32_t, bool>, std::unique_ptr<CommandList>> window_cmds;
};

Result<std::unique_ptr<ResidentDriver>> ResidentDriver::create(std::shared_ptr<const Model> model,
                                                               const DriverOptions& opts) {
    auto dev = Device::open(opts.device);
    if (!dev) return dev.decline();
    std::unique_ptr<ResidentDriver> d(new ResidentDriver());
    d->model_ = model;
    d->dev_ = std::move(*dev);
    Device& D = *d->dev_;
    auto p = vk::plan(*model, D.features(), D.variant(), opts.plan);
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
        const uint64_t rb = row_size(t.type, t.ne[0]), rows = (uint64_t)t.rows();
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
    const int64_t n_rot = std::max<int64_t>(hp.rope_dims, 2);
    std::vector<float> divisors;
    if (model->rope_freqs) {
        divisors.resize((size_t)model->rope_freqs->n_elements());
        quant::dequantize(model->rope_freqs->type, model->rope_freqs->data, divisors.data(),
                          (int64_t)divisors.size());
    }
    params.resize(params.size() + (size_t)(n_rot / 2));
    cpu::rope_inv_freq(hp.rope_base, n_rot, divisors.empty() ? nullptr : divisors.data(),
                       params.data() + w->freq_off);
    pad();
    w->params = D.create_buffer(params.size() * 4, MemoryKind::device);
    D.upload(w->params, 0, params.data(), params.size() * 4);
    w->pipes = std::make_unique<Pipelines>(D);
    w->kernels = std::make_unique<Kernels>(D, *w->pipes);
    w->kernels->gemv_x = opts.gemv_x;
    w->kernels->deltanet_columns = opts.deltanet_columns;
    w->kernels->deltanet_scan = opts.deltanet_scan;
    w->kernels->gemv_groups = opts.gemv_groups;
    w->kernels->gemv_waves = opts.gemv_waves;
    w->kernels->attn_one_split = opts.attn_one_split;
    w->kernels->gemv_wide = opts.gemv_wide;
    w->kernels->gemv_tiled = opts.gemv_tiled;
    w->kernels->gemv_split_parts = opts.gemv_split;
    w->kernels->gemv_balance = opts.gemv_balance;
    w->kernels->gemv_slots = opts.gemv_slots;
    w->kernels->gemm_tile = opts.gemm_tile;
    if (P.window > 0) {
        w->win_act = D.create_buffer((uint64_t)act_layout(hp, (uint32_t)P.window).total * 4,
                                     MemoryKind::device);
        w->win_ids = D.create_buffer((uint64_t)P.window * 4, MemoryKind::host_fast);
        if (P.window_x16_bytes > 0)
            w->win_x16 = D.create_buffer(P.window_x16_bytes, MemoryKind::device);
        if (P.window_w16_bytes > 0)
            w->win_w16 = D.create_buffer(P.window_w16_bytes, MemoryKind::device);
    }
    d->w_ = std::move(w);
    if (opts.profile) d->profile_ = std::make_unique<Profile>();
    d->fused_decode_ = opts.fused_decode;
    d->gemv_norm_in_ = opts.gemv_norm_in;
    d->gemv_pre_round_ = opts.gemv_pre_round;
    d->gemv_round_h_ = opts.gemv_round_h;
    d->gemv_round_h_min_ = opts.gemv_round_h_min;
    d->merge_in_ = opts.merge_in;
    d->gated_in_ = opts.gated_in;
    d->gated_rounded_ = opts.gated_rounded;
    d->attn_rounded_ = opts.attn_rounded;
    d->attn_gated_form_ = opts.attn_gated_form;
    d->attn_short_ = opts.attn_short;
    d->expand_ahead_ = opts.expand_ahead;
    d->early_submit_ = opts.early_submit;
    d->gemm_groups_ = opts.gemm_groups;
    log::debug("vulkan: {}: {}", D.name(), P.describe());
    return d;
}

bool DriverOptions::profile_from_env() {
    return env::get_bool("DELTALLM_VK_PROFILE");
}

bool DriverOptions::fused_decode_from_env() {
    return env::get_bool("DELTALLM_VK_DECODE_FUSION");
}

bool DriverOptions::gemv_norm_in_from_env() {
    return env::get_bool("DELTALLM_VK_GEMV_NORM_IN");
}

bool DriverOptions::gemv_round_h_from_env() {
    return env::get_bool("DELTALLM_VK_GEMV_ROUND_H");
}

bool DriverOptions::gemv_pre_round_from_env() {
    return env::get_bool("DELTALLM_VK_GEMV_PRE_ROUND");
}

bool DriverOptions::merge_in_from_env() {
    return env::get_bool("DELTALLM_VK_MERGE_IN");
}

bool DriverOptions::gated_in_from_env() {
    return env::get_bool("DELTALLM_VK_GATED_IN");
}

bool DriverOptions::gated_rounded_from_env() {
    return env::get_bool("DELTALLM_VK_GATED_ROUNDED");
}

bool DriverOptions::attn_rounded_from_env() {
    return env::get_bool("DELTALLM_VK_ATTN_ROUNDED");
}

bool DriverOptions::attn_gated_form_from_env() {
    return env::get_bool("DELTALLM_VK_ATTN_GATED_FORM");
}

bool DriverOptions::gemv_balance_from_env() {
    return env::get_bool("DELTALLM_VK_GEMV_BALANCE");
}

bool DriverOptions::expand_ahead_from_env() {
    return env::get_bool("DELTALLM_VK_EXPAND_AHEAD");
}

bool DriverOptions::early_submit_from_env() {
    return env::get_bool("DELTALLM_VK_EARLY_SUBMIT");
}

bool DriverOptions::gemm_groups_from_env() {
    return env::get_bool("DELTALLM_VK_GEMM_GROUPS");
}

Kernels::GemmTile DriverOptions::gemm_tile_from_env() {
    const std::string s = env::get_string("DELTALLM_VK_GEMM_TILE");
    if (s.empty()) return {};
    Kernels::GemmTile t;
    char x1 = 0, x2 = 0, x3 = 0, rest = 0;
    const int got = std::sscanf(s.c_str(), "%u%c%u%c%u%c%u%c", &t.bm, &x1, &t.bn, &x2, &t.bk, &x3,
                                &t.wg, &rest);
    const auto ok = [](uint32_t v) { return v >= 32 && v <= 256 && v % 32 == 0; };
    const bool wg_ok =
        got == 5 || (got == 7 && x3 == 'x' && (t.wg == 128 || t.wg == 256 || t.wg == 512));
    if ((got != 5 && got != 7) || x1 != 'x' || x2 != 'x' || !wg_ok || !ok(t.bm) || !ok(t.bn) ||
        !ok(t.bk))
        fail(
            "DELTALLM_VK_GEMM_TILE='{}': use BMxBNxBK, each a multiple of 32 up to 256, "
            "optionally xWG with WG invocations (128, 256 or 512)",
            s);
    return t;
}

uint32_t DriverOptions::gemv_groups_from_env() {
    const int64_t v = env::get_int("DELTALLM_VK_GEMV_GROUPS");
    if (v != 1 && v != 2 && v != 4 && v != 8)
        fail("DELTALLM_VK_GEMV_GROUPS={}: use 1, 2, 4 or 8", v);
    return (uint32_t)v;
}

uint32_t DriverOptions::gemv_waves_from_env() {
    const int64_t v = env::get_int("DELTALLM_VK_GEMV_WAVES");
    if (v < 0 || v > 64) fail("DELTALLM_VK_GEMV_WAVES={}: use 0 to 64", v);
    return (uint32_t)v;
}

uint32_t DriverOptions::gemv_split_from_env() {
    const int64_t v = env::get_int("DELTALLM_VK_GEMV_SPLIT");
    if (v < 0 || v > 4) fail("DELTALLM_VK_GEMV_SPLIT={}: use 0 to 4", v);
    return (uint32_t)v;
}

int64_t DriverOptions::attn_short_from_env() {
    const int64_t v = env::get_int("DELTALLM_VK_ATTN_SHORT");
    if (v < -1) fail("DELTALLM_VK_ATTN_SHORT={}: use -1 (by the cache bytes), 0 or positions", v);
    return v;
}

uint32_t DriverOptions::attn_one_split_from_env() {
    const int64_t v = env::get_int("DELTALLM_VK_ATTN_ONE_SPLIT");
    if (v < 0 || v > 64) fail("DELTALLM_VK_ATTN_ONE_SPLIT={}: use 0 to 64", v);
    return (uint32_t)v;
}

// The value named by the string variable `var`, or one clear error that lists the names.
template <typename E>
static E choice_from_env(const char* var, std::initializer_list<std::pair<const char*, E>> names) {
    const std::string s = env::get_string(var);
    std::string all;
    for (const auto& [name, value] : names) {
        if (s == name) return value;
        all += all.empty() ? name : std::string(", ") + name;
    }
    fail("{}='{}': use one of {}", var, s, all);
}

Kernels::GemvWide DriverOptions::gemv_wide_from_env() {
    using W = Kernels::GemvWide;
    return choice_from_env<W>("DELTALLM_VK_GEMV_WIDE",
                              {{"auto", W::automatic}, {"off", W::off}, {"all", W::all}});
}

Kernels::GemvTiled DriverOptions::gemv_tiled_from_env() {
    using T = Kernels::GemvTiled;
    return choice_from_env<T>("DELTALLM_VK_GEMV_TILED", {{"on", T::on}, {"off", T::off}});
}

uint32_t DriverOptions::deltanet_columns_from_env() {
    const int64_t v = env::get_int("DELTALLM_VK_DN_COLUMNS");
    if (v < 0 || v > 4096) fail("DELTALLM_VK_DN_COLUMNS={}: use 0 to 4096", v);
    return (uint32_t)v;
}

Kernels::DeltaNetScan DriverOptions::deltanet_scan_from_env() {
    using S = Kernels::DeltaNetScan;
    return choice_from_env<S>("DELTALLM_VK_DN_SCAN", {{"best", S::best},
                                                      {"chunked", S::chunked},
                                                      {"shuffle", S::shuffle},
                                                      {"clustered", S::clustered},
                                                      {"plain", S::plain}});
}

Kernels::GemvX DriverOptions::gemv_x_from_env() {
    using X = Kernels::GemvX;
    return choice_from_env<X>("DELTALLM_VK_GEMV_X",
                              {{"auto", X::automatic}, {"global", X::global}, {"bytes", X::bytes}});
}

ResidentDriver::~ResidentDriver() {
    if (profile_) fmt::print(stderr, "{}", profile_->report());
}

void Profile::add(const std::string& phase, int64_t tokens,
                  const std::vector<std::pair<std::string, double>>& times) {
    Phase& p = phases[phase];
    if (times.size() == 1 && times[0].first == CommandList::kWhole) {
        p.whole_tokens += tokens;
        p.whole_ms += times[0].second;
        return;
    }
    p.tokens += tokens;
    for (const auto& [role, ms] : times) p.ms[role] += ms;
}

std::string Profile::report() const {
    std::string out;
    for (const auto& [name, p] : phases) {
        double total = 0;
        for (const auto& [role, ms] : p.ms) total += ms;
        out += fmt::format(
            "vulkan profile, {}: {} tokens timed a stage at a time, {:.3f} ms on the device "
            "({:.1f} us a token)\n",
            name, p.tokens, total, p.tokens ? 1e3 * total / p.tokens : 0.0);
        if (p.whole_tokens > 0 && p.tokens > 0) {
            const double whole = 1e3 * p.whole_ms / p.whole_tokens;
            out += fmt::format(
                "  timed whole, without a timestamp a stage: {} tokens, {:.1f} us a token on the "
                "device (the stages' timestamps add {:.1f} us a token to the table below)\n",
                p.whole_tokens, whole, 1e3 * total / p.tokens - whole);
        }
        std::vector<std::pair<double, std::string>> rows;
        for (const auto& [role, ms] : p.ms) rows.push_back({ms, role});
        std::sort(rows.rbegin(), rows.rend());
        for (const auto& [ms, role] : rows)
            out += fmt::format("  {:<12} {:10.3f} ms {:5.1f}% {:9.2f} us/token\n", role, ms,
                               total > 0 ? 100 * ms / total : 0.0,
                               p.tokens ? 1e3 * ms / p.tokens : 0.0);
    }
    return out;
}

std::string ResidentDriver::name() const {
    return dev_->name();
}

namespace {

// The kernel arguments of one layer for an activation layout (token or window).
Kernels::Attention attention_args(const Hparams& hp, const ActLayout& A, uint32_t freq_off,
                                  uint32_t n_ctx) {
    const uint32_t hd = (uint32_t)hp.head_dim;
    const bool gated = hp.arch == Arch::qwen35;
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
    at.interleaved = hp.arch == Arch::llama;
    return at;
}

}  // namespace

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
    s->tok = D.create_buffer(256, MemoryKind::host_fast);
    std::memset(s->tok.mapped(), 0, 256);

    const uint32_t hd = (uint32_t)hp.head_dim;
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

    const uint32_t d_v = hp.ssm_n_v_heads ? (uint32_t)(hp.ssm_d_inner / hp.ssm_n_v_heads) : 0;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        if (hp.is_recurrent(il)) {
            s->k_cache.emplace_back();
            s->v_cache.emplace_back();
            s->state.push_back(D.create_buffer(
                (uint64_t)hp.ssm_n_v_heads * hp.ssm_d_state * d_v * 4, MemoryKind::device));
            s->ring.push_back(D.create_buffer((uint64_t)hp.ssm_conv_kernel * hp.conv_dim() * 4,
                                              MemoryKind::device));
            D.fill(s->state.back(), 0, s->state.back().size(), 0);
            D.fill(s->ring.back(), 0, s->ring.back().size(), 0);
        } else {
            const uint64_t bytes = Kernels::attention_cache_bytes(s->n_ctx, hp.n_head_kv, hd);
            s->k_cache.push_back(D.create_buffer(bytes, MemoryKind::device));
            s->v_cache.push_back(D.create_buffer(bytes, MemoryKind::device));
            s->state.emplace_back();
            s->ring.emplace_back();
        }
    }

    // The token commands: one that copies the logits to the host (decode), one that returns only
    // the chosen token (greedy and sampled decode); in each attention form some position takes.
    // The launcher's form first, so its pipelines are created in the order they were before there
    // was a short form: recorded second, its tokens at 4096 positions ran 1 % slower on an H200
    // (0.8B; docs/PERF.md 2026-12-04 (05:30)), though no kernel of it changed.
    s->short_until = attn_short_positions(s->n_ctx);
    for (bool short_attn : {false, true}) {
        if (short_attn ? s->short_until == 0 : s->short_until >= s->n_ctx) continue;
        for (bool whole : {false, true}) {
            if (whole && !profile_) continue;
            for (bool logits : {false, true}) {
                auto& cmd = s->token_cmds[Session::token_slot(short_attn, logits, whole)];
                cmd = std::make_unique<CommandList>(D);
                record_token(*s, *cmd, logits, whole, short_attn);
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
    // 128 and slower at 1024 (docs/PERF.md 2026-12-04): 4 MiB of extra reads a layer.
    const Kernels::Attention at =
        attention_args(hp, act_layout(hp, 1), w_->freq_off, (uint32_t)n_ctx);
    const uint64_t g = w_->kernels->attention_group(at);
    if (g <= 1) return 0;
    const uint64_t extra = (g - 1) * (uint64_t)hp.n_head_kv * (uint64_t)hp.head_dim * 2 * 2;
    const int64_t chunks = (int64_t)((4ull << 20) / extra / Kernels::kAttnSplit);
    return std::min<int64_t>(chunks * Kernels::kAttnSplit, n_ctx);
}

// The decode token command of a session: the whole forward pass of one token at tok[0] (id
// tok[1]), then either the head into the device logits and the choice of the next token from
// them (tok[2]; parameters at tok[kSampleParams..]) or, when asked, the head into the host's
// logits.
void ResidentDriver::record_token(Session& session, CommandList& cl, bool host_logits, bool whole,
                                  bool short_attn) {
    Session* s = &session;
    const Hparams& hp = model_->hp;
    Kernels& K = *w_->kernels;
    const Weights& W = *w_;
    const ActLayout A = act_layout(hp, 1);
    Kernels::Attention at = attention_args(hp, A, W.freq_off, (uint32_t)s->n_ctx);
    if (short_attn) {  // its splits sized for the positions it runs at
        at.n_ctx = (uint32_t)s->short_until;
        at.heads_a_group = 1;
    }
    const View act = view(s->act), prm = view(W.params), tok = view(s->tok);
    const uint32_t E = (uint32_t)hp.n_embd;
    auto gemv = [&](const Tensor* t, uint32_t x_off, View y, uint32_t y_off, bool acc,
                    const Kernels::GemvRounding* rounding = nullptr) {
        K.gemv(cl, t->type, W.matrix(plan_, t), (uint32_t)t->rows(), (uint32_t)t->cols(), act,
               x_off, y, y_off, acc, {}, rounding);
    };
    auto norm_weights = [&](const Tensor* w) {
        return view(W.params, (uint64_t)W.param(w) * 4, (uint64_t)w->n_elements() * 4);
    };
    auto norm = [&](const Tensor* w, uint32_t x_off, uint32_t y_off) {
        K.rms_norm(cl, norm_weights(w), act, x_off, E, act, y_off, E, E, 1, hp.rms_eps);
    };
    auto stage = [&](const char* role) {
        cl.barrier();
        cl.mark(role);
    };
    // Norms the GEMVs after them take (Kernels::gemv_normed): where every GEMV that reads a
    // norm's output takes x in bytes, each normalizes h itself as it rounds it, so the GEMV
    // before the norm ends with no epilogue (no workgroup waits for all the others, no serial
    // tail) and the first norm takes no stage.
    const auto readers = norm_readers(*model_);
    auto normed_by_readers = [&](const Tensor* norm_w) {
        if (!fused_decode_ || !gemv_norm_in_) return false;
        for (const Tensor* t : readers.at(norm_w))
            if (K.gemv_x_for(t->type, (uint32_t)t->cols()) != Kernels::GemvX::bytes) return false;
        return true;
    };
    // The norm the GEMVs reading xn apply to h themselves (none: xn holds the normalized h).
    const Tensor* pending = nullptr;
    // h rounded to bytes times the pending norm's weights at A.h_bytes by the GEMV that wrote
    // it, for its readers (Kernels::GemvRounding::out_norm): where that GEMV and every reader of
    // the norm run on the tiled GEMV (gemv_round_h_).
    bool h_rounded = false;
    auto rounds_h = [&](const Tensor* writer, const Tensor* norm_w) {
        if (!gemv_round_h_ || !norm_w || writer->rows() % 16 ||
            writer->rows() < (int64_t)gemv_round_h_min_ ||
            !K.gemv_tiled_for(writer->type, (uint32_t)writer->cols()))
            return false;
        for (const Tensor* t : readers.at(norm_w))
            if (!K.gemv_tiled_for(t->type, (uint32_t)t->cols())) return false;
        return true;
    };
    auto pending_norm = [&] { return Kernels::GemvNormIn{norm_weights(pending), hp.rms_eps}; };
    // The FFN activations rounded to bytes at A.ffn_bytes by the pair that wrote them, for the
    // down projection (gemv_pre_round_).
    bool ffn_rounded = false;
    s->rounded_reads = 0;
    s->gated_reads = 0;
    s->gated_rounded = 0;
    s->attn_rounded = 0;
    s->attn_gated_form = 0;
    s->normed_roundings = 0;
    // The gated RMSNorm of the DeltaNet layer just recorded, for its output projection to apply
    // (gated_in_; none: the step applied it); or, after an attention layer, that form with no
    // factor (attn_gated_form_).
    std::optional<Kernels::GemvGatedIn> gated;
    // Where the mixer just recorded left its output rounded to bytes for its output projection,
    // and the count of such projections that one adds to: the DeltaNet step at A.y_bytes
    // (gated_rounded_), the attention at A.o_bytes (attn_rounded_); kNone: the projection rounds
    // the floats.
    uint32_t mixer_bytes = Kernels::kNone;
    uint32_t* mixer_count = nullptr;
    // The form of a DeltaNet layer's output projection over the step's rounding (its weights'
    // type and row length, its gated norm's shape), which a later attention layer's output
    // projection of the same type and length takes with no factor (attn_gated_form_).
    struct GatedForm {
        QType t;
        int64_t cols;
        Kernels::GemvGatedIn in;
    };
    std::optional<GatedForm> deltanet_form;  // the last DeltaNet layer's, where it has one
    // W · xn (rows of cols values of type t at view w) into y[y_off ..]; share: its part of
    // its stage's weight bytes (Kernels::gemv).
    auto gemv_xn = [&](QType t, View w, uint32_t rows, uint32_t cols, View y, uint32_t y_off,
                       vk::GemvPart share = {}) {
        if (!pending) return K.gemv(cl, t, w, rows, cols, act, A.xn, y, y_off, false, share);
        Kernels::GemvRounding r;
        r.x_rounded = h_rounded;
        K.gemv_normed(cl, t, w, rows, cols, act, h_rounded ? A.h_bytes : A.h, y, y_off, false,
                      pending_norm(), share, h_rounded ? &r : nullptr);
    };
    auto gemv_in = [&](const Tensor* t, View y, uint32_t y_off) {
        gemv_xn(t->type, W.matrix(plan_, t), (uint32_t)t->rows(), (uint32_t)t->cols(), y, y_off);
    };
    // A mixer's input projections wait for the end of their stage, where each run of them that
    // lies back to back in one slab (plan()) and writes back to back in act is one GEMV over all
    // their rows (merge_in_): x is rounded once for the run and the small ones (a DeltaNet
    // layer's beta and alpha) do not wait behind the large ones' workgroups in a grid of their
    // own.
    struct InProj {
        const Tensor* t;
        uint32_t y_off;
    };
    std::vector<InProj> in_proj;
    auto flush_in = [&] {
        struct Run {
            QType t;
            View w;
            uint32_t rows, cols, y_off;
            uint64_t bytes;
        };
        std::vector<Run> runs;
        for (size_t i = 0; i < in_proj.size();) {
            const Tensor* t = in_proj[i].t;
            const Placement* first = plan_.find(t);
            uint64_t bytes = first->bytes;
            uint32_t rows = (uint32_t)t->rows();
            size_t j = i + 1;
            for (; merge_in_ && j < in_proj.size(); ++j) {
                const Tensor* u = in_proj[j].t;
                const Placement* pl = plan_.find(u);
                if (u->type != t->type || u->cols() != t->cols() || pl->slab != first->slab ||
                    pl->offset != first->offset + bytes ||
                    in_proj[j].y_off != in_proj[i].y_off + rows)
                    break;
                bytes += pl->bytes;
                rows += (uint32_t)u->rows();
            }
            runs.push_back({t->type, W.rows(first->slab, first->offset, bytes), rows,
                            (uint32_t)t->cols(), in_proj[i].y_off, bytes});
            i = j;
        }
        // The smallest first: a GEMV recorded after a large one starts only as the large one's
        // workgroups leave, and its own latencies then lengthen the stage past the large one's
        // tail (Qwen3-8B's v after its q and k: tg128 +3 % on an H200, docs/PERF.md).
        std::stable_sort(runs.begin(), runs.end(),
                         [](const Run& a, const Run& b) { return a.bytes < b.bytes; });
        uint64_t total = 0;
        for (const Run& r : runs) total += r.bytes;
        for (const Run& r : runs)
            gemv_xn(r.t, r.w, r.rows, r.cols, act, r.y_off,
                    {runs.size() > 1 ? (float)((double)r.bytes / (double)total) : 1.f});
        in_proj.clear();
    };
    auto add_norm = [&](const Tensor* t, uint32_t x_off, int64_t, const Tensor* norm_w) {
        const char* role = t->name.find("ffn_down") != std::string::npos ? "gemv down" : "gemv out";
        pending = normed_by_readers(norm_w) ? norm_w : nullptr;
        // The FFN pair rounded its rows for this GEMV only where it reads them that way.
        Kernels::GemvRounding r;
        r.x_rounded = x_off == A.ffn && ffn_rounded;
        ffn_rounded = false;
        if (r.x_rounded) {
            x_off = A.ffn_bytes;
            ++s->rounded_reads;
        }
        // The new h rounded for the readers of the next norm.
        h_rounded = pending && rounds_h(t, pending);
        if (h_rounded) {
            r.out_off = A.h_bytes;
            r.out_norm = norm_weights(pending);
            ++s->normed_roundings;
        }
        if (mixer_bytes != Kernels::kNone) {  // (chain.deltanet, chain.attention)
            DL_ASSERT(x_off == A.y || x_off == A.o);
            r.x_rounded = true;
            x_off = mixer_bytes;
            ++*mixer_count;
            mixer_bytes = Kernels::kNone;
        }
        const bool with_r = r.x_rounded || h_rounded;
        if (gated) {  // where the next norm is its readers' (chain.deltanet, chain.attention)
            DL_ASSERT(pending);
            K.gemv_gated(cl, t->type, W.matrix(plan_, t), (uint32_t)t->rows(), (uint32_t)t->cols(),
                         act, x_off, act, A.h, true, *gated, with_r ? &r : nullptr);
            ++(gated->ss_off != Kernels::kNone ? s->gated_reads : s->attn_gated_form);
            gated.reset();
            stage(role);
            return;
        }
        if (pending || !fused_decode_) {
            gemv(t, x_off, act, A.h, true, with_r ? &r : nullptr);
            stage(role);
            if (pending) return;
            norm(norm_w, A.h, A.xn);
            stage("norm");
            return;
        }
        Kernels::GemvFusion fu;
        fu.norm_w = norm_weights(norm_w);
        fu.counter = view(s->gemv_counter);
        fu.xn_off = A.xn;
        fu.eps = hp.rms_eps;
        K.gemv_fused(cl, t->type, W.matrix(plan_, t), (uint32_t)t->rows(), (uint32_t)t->cols(), act,
                     x_off, act, A.h, true, fu, r.x_rounded ? &r : nullptr);
        stage(role);
    };
    LayerChain chain;
    chain.stage = [&](const char* role) {
        flush_in();
        stage(role);
    };
    chain.project_role = "gemv in";
    chain.project = [&](const Tensor* t, uint32_t x_off, uint32_t y_off) {
        if (x_off == A.xn) return in_proj.push_back({t, y_off});
        gemv(t, x_off, act, y_off, false);
    };
    chain.inputs = [](uint32_t, int64_t) {};
    chain.deltanet = [&](int64_t il, const Layer& L) {
        Kernels::DeltaNetStep a = deltanet_args(A, L);
        // Where the output projection reads x in bytes and the FFN's norm is its readers' (the
        // projection then needs no epilogue of its own).
        if (gated_in_ && normed_by_readers(L.ffn_norm) &&
            K.gemv_gates(L.ssm_out->type, (uint32_t)L.ssm_out->cols()) && a.d_v % 16 == 0) {
            a.ss_off = A.y_ss;
            const uint32_t groups = K.deltanet_groups(a.d_v, true);
            gated = Kernels::GemvGatedIn{A.y_ss, a.d_v, groups, a.eps};
            if (gated_rounded_ && (a.d_v / groups) % 16 == 0 &&
                K.gemv_tiled_for(L.ssm_out->type, (uint32_t)L.ssm_out->cols())) {
                a.round_y = true;
                a.y_off = mixer_bytes = A.y_bytes;
                mixer_count = &s->gated_rounded;
                if (attn_gated_form_)
                    deltanet_form =
                        GatedForm{L.ssm_out->type, L.ssm_out->cols(),
                                  Kernels::GemvGatedIn{Kernels::kNone, a.d_v, groups, a.eps}};
            }
        }
        K.deltanet_step(cl, a, act, prm, view(s->ring[il]), view(s->state[il]), tok,
                        view(s->head_counter));
    };
    chain.attention = [&](int64_t il, const Layer& L) {
        Kernels::Attention a = at;
        a.q_norm_off = L.q_norm ? W.param(L.q_norm) : Kernels::kNone;
        a.k_norm_off = L.k_norm ? W.param(L.k_norm) : Kernels::kNone;
        if (attn_rounded_ && a.head_dim % 16 == 0 &&
            K.gemv_tiled_for(L.wo->type, (uint32_t)L.wo->cols())) {
            a.round_off = mixer_bytes = A.o_bytes;
            mixer_count = &s->attn_rounded;
            if (deltanet_form && L.wo->type == deltanet_form->t &&
                L.wo->cols() == deltanet_form->cols && normed_by_readers(L.ffn_norm))
                gated = deltanet_form->in;
        }
        K.attention(cl, a, act, prm, view(s->k_cache[il]), view(s->v_cache[il]), view(s->partials),
                    tok, view(s->head_counter));
        // The short-context form's pipeline created right after this one, where a command in
        // that form follows: created when that command was recorded, after all of this one's,
        // the 9B's tokens in it ran 0.8 % slower on an H200 (docs/PERF.md 2026-12-04 (05:30)).
        if (!short_attn && s->short_until > 0) {
            Kernels::Attention one = a;
            one.n_ctx = (uint32_t)s->short_until;
            one.heads_a_group = 1;
            K.prepare_attention(one);
        }
    };
    chain.ffn_in = [&](const Layer& L, const Tensor* next_norm) {
        // Fused: one GEMV dispatch for both matrices with the SwiGLU as its epilogue, where the
        // plan keeps them in one slab with the same type.
        const Placement *g = plan_.find(L.ffn_gate), *u = plan_.find(L.ffn_up);
        if (fused_decode_ && L.ffn_gate->type == L.ffn_up->type && g->slab == u->slab &&
            L.ffn_gate->ne == L.ffn_up->ne) {
            const Kernels::GemvNormIn nin = pending ? pending_norm() : Kernels::GemvNormIn{};
            const uint64_t lo = std::min(g->offset, u->offset);
            const uint64_t hi = std::max(g->offset + g->bytes, u->offset + u->bytes);
            const uint32_t rows = (uint32_t)L.ffn_gate->rows(), cols = (uint32_t)L.ffn_gate->cols();
            // The pair rounds its rows for the down projection where that reads them in bytes
            // (as a fused GEMV where the norm after it is its epilogue).
            const Tensor* down = L.ffn_down;
            ffn_rounded =
                gemv_pre_round_ && K.gemv_rounds(L.ffn_gate->type, rows, cols, true, pending) &&
                K.gemv_path(down->type, (uint32_t)down->rows(), (uint32_t)down->cols(), false,
                            false, !normed_by_readers(next_norm)) == Kernels::GemvX::bytes;
            Kernels::GemvRounding r;
            if (ffn_rounded) r.out_off = A.ffn_bytes;
            r.x_rounded = pending && h_rounded;
            const uint32_t x_off = !pending ? A.xn : h_rounded ? A.h_bytes : A.h;
            K.gemv_swiglu(cl, L.ffn_gate->type, W.rows(g->slab, lo, hi - lo), g->offset - lo,
                          u->offset - lo, rows, cols, act, x_off, act, A.ffn,
                          pending ? &nin : nullptr, ffn_rounded || r.x_rounded ? &r : nullptr);
            stage("gemv ffn");
            return;
        }
        gemv_in(L.ffn_gate, act, A.gate);
        gemv_in(L.ffn_up, act, A.up);
        stage("gemv ffn");
        K.swiglu(cl, act, A.gate, act, A.up, act, A.ffn, (uint32_t)hp.n_ff);
        stage("swiglu");
    };
    chain.add_norm = add_norm;

    if (profile_) cl.enable_timestamps(16 * (uint32_t)hp.n_layer + 16, !whole);
    cl.begin(true);
    // The GEMVs that add to h are alone in their stages: they may split over one scratch.
    K.gemv_split = view(s->gemv_split);
    // tok[0] = position, tok[1] = token id, tok[2] = the chosen token.
    K.get_rows(cl, model_->tok_embd->type, W.matrix(plan_, model_->tok_embd),
               (uint32_t)model_->tok_embd->rows(), E, tok, 1, act, A.h, 1);
    stage("embed");
    // The first attn_norm; every later norm ends the GEMV before it or is taken by the GEMVs
    // after it.
    if (normed_by_readers(model_->layers[0].attn_norm)) {
        pending = model_->layers[0].attn_norm;
    } else {
        norm(model_->layers[0].attn_norm, A.h, A.xn);
        stage("norm");
    }
    record_layers(*model_, A, chain);
    // The logits for the host, written by the head into host memory (as the window command's
    // last row is): a copy after the head took a stage of its own, tg128 -2 % on an H200
    // (docs/PERF.md, 2026-12-03 night). Or the token's choice from them on the device: whoever
    // asks for the logits chooses from them itself (decode), so that command does not also
    // sample.
    gemv_in(model_->output, view(host_logits ? s->logits : s->logits_dev), 0);
    if (host_logits) {
        cl.host_barrier();
        cl.mark("head");
    } else {
        stage("head");
        K.sample(cl, view(s->logits_dev), 0, (uint32_t)hp.n_vocab, tok, 2, kSampleParams,
                 view(s->sample_scratch));
        cl.host_barrier();
        cl.mark("sample");
    }
    cl.end();
    K.gemv_split = {};
}

// The command of one prefill window of m rows at positions tok[0] .. tok[0]+m-1, token ids in
// the window id buffer: the same chain as the token command with GEMM tiles in place of GEMVs
// and the row kernels of attention and DeltaNet. Logits of the last row go to the session's
// logits buffer, or of every row to the window logits buffer when `all`.
CommandList& ResidentDriver::window_command(Session& s, uint32_t m, bool all, bool queue) {
    auto key = std::make_pair(m, all);
    auto it = s.window_cmds.find(key);
    if (it != s.window_cmds.end()) return *it->second;
    const auto t0 = std::chrono::steady_clock::now();
    const Hparams& hp = model_->hp;
    Kernels& K = *w_->kernels;
    Weights& W = *w_;
    const Variant var = plan_.variant;
    const Variant attn_var =
        Kernels::attention_variant(dev_->features(), var, (uint32_t)hp.head_dim);
    const ActLayout A = act_layout(hp, (uint32_t)plan_.window);
    const uint32_t E = (uint32_t)hp.n_embd;
    auto cmd = std::make_unique<CommandList>(*dev_);
    CommandList& cl = *cmd;
    const View act = view(W.win_act), prm = view(W.params), tok = view(s.tok);
    const View x16 = W.win_x16 ? view(W.win_x16) : View{};
    // The GEMMs of one stage (gemm_groups) run together, their matrices expanded to F16 for the
    // NV tiles one after another in one slot. The expansions run one group ahead: group g + 1's
    // matrices are expanded into one slot (bandwidth-bound passes) beside group g's GEMMs over
    // the other (tensor-bound). The barrier that group g + 1 needs after its expansions also
    // orders group g's GEMMs before group g + 2 is expanded into their slot. Without gemm_groups_
    // each GEMM is a group of its own.
    std::vector<std::vector<const Tensor*>> groups;
    for (auto& g : gemm_groups(*model_, all)) {
        if (gemm_groups_) {
            groups.push_back(std::move(g));
            continue;
        }
        for (const Tensor* t : g) groups.push_back({t});
    }
    View slot[2];
    if (W.win_w16) {
        const uint64_t half = W.win_w16.size() / 2 / kBindAlign * kBindAlign;
        slot[0] = view(W.win_w16, 0, half);
        slot[1] = view(W.win_w16, half, half);
    }
    // Where each GEMM's expansion goes: a part of its group's slot, or none (not expanded).
    std::vector<std::vector<View>> w16(groups.size());
    std::vector<uint32_t> stage_rows(groups.size());  // weight rows of each group's GEMMs
    for (size_t g = 0; g < groups.size(); ++g) {
        uint64_t used = 0;
        for (const Tensor* t : groups[g]) {
            stage_rows[g] += (uint32_t)t->rows();
            View part{};
            if (slot[g % 2].range > used) {
                part = slot[g % 2];
                part.offset += used;
                part.range -= used;
            }
            const uint64_t bytes = (uint64_t)t->rows() * t->cols() * 2;
            if (K.gemm_expands(var, t->type, (uint32_t)t->rows(), (uint32_t)t->cols(), m, part)) {
                part.range = bytes;
                used += align_up(bytes, kBindAlign);
            } else {
                part = View{};
            }
            w16[g].push_back(part);
        }
    }
    auto any_expands = [&](size_t g) {
        return std::any_of(w16[g].begin(), w16[g].end(), [](const View& v) { return v.range > 0; });
    };
    size_t group = 0, member = 0;        // the next GEMM recorded: groups[group][member]
    size_t expanded = groups.size();     // the group whose matrices were expanded ahead, if any
    uint32_t barriers_at_expansion = 0;  // barriers recorded before that expansion
    auto expand = [&](size_t g) {
        for (size_t j = 0; j < groups[g].size(); ++j) {
            const Tensor* t = groups[g][j];
            if (w16[g][j].range > 0)
                K.dequant_f16(cl, t->type, W.matrix(plan_, t), (uint32_t)t->rows(),
                              (uint32_t)t->cols(), w16[g][j]);
        }
        expanded = g;
        barriers_at_expansion = cl.n_barriers();
    };
    auto gemm = [&](const Tensor* t, uint32_t x_off, View y, uint32_t y_off, bool acc) {
        if (group >= groups.size() || groups[group][member] != t)
            fail("window GEMM {} ({}) out of the recorded order", group, t->name);
        const size_t g = group, j = member;
        if (j == 0 && any_expands(g)) {
            if (expanded != g) {  // not expanded ahead: the slot may still be read
                cl.barrier();
                expand(g);
            }
            if (cl.n_barriers() == barriers_at_expansion) cl.barrier();
        }
        const uint32_t rows = (uint32_t)t->rows(), cols = (uint32_t)t->cols();
        const bool expanded_here = w16[g][j].range > 0;
        K.gemm(cl, var, t->type, W.matrix(plan_, t), rows, cols, act, x_off, x16, y, y_off, m, acc,
               w16[g][j], expanded_here, stage_rows[g]);
        if (++member < groups[g].size()) return;
        member = 0;
        ++group;
        if (expand_ahead_ && group < groups.size() && any_expands(group)) expand(group);
    };
    // The F16 copy of the rows the next GEMMs read, when their tiles take F16 (one per input).
    auto to_f16 = [&](uint32_t x_off, int64_t cols) {
        if (!K.gemm_reads_f16(var, (uint32_t)cols)) return;
        K.f16_copy(cl, act, x_off, x16, m * (uint32_t)cols);
        cl.barrier();
        cl.mark("f16 copy");
    };
    auto norm = [&](const Tensor* w, uint32_t x_off, uint32_t y_off, uint32_t rows) {
        K.rms_norm(cl, view(W.params, (uint64_t)W.param(w) * 4, (uint64_t)w->n_elements() * 4), act,
                   x_off, E, act, y_off, E, E, rows, hp.rms_eps);
    };
    Kernels::AttentionRows ar{attention_args(hp, A, W.freq_off, (uint32_t)s.n_ctx), 0, 0, 0, 0};
    ar.q_row = (uint32_t)hp.n_head * ar.a.q_stride;
    ar.kv_row = (uint32_t)(hp.n_head_kv * hp.head_dim);
    ar.o_row = (uint32_t)(hp.n_head * hp.head_dim);
    ar.gate_row = ar.q_row;

    // Queued in parts as recorded: after stages 1, 2, 4, 8, ... so the parts grow as the
    // device's lead over the recording does (a 9B's window of 512 rows: 2-3 ms of recording, a
    // layer's work 1.3 ms on an H200).
    const bool early = queue && early_submit_;
    uint32_t stages = 0, next_part = 1;
    auto stage = [&](const char* role) {
        cl.barrier();
        cl.mark(role);
        if (early && ++stages == next_part) {
            cl.submit_early();
            next_part *= 2;
        }
    };
    LayerChain chain;
    chain.stage = stage;
    chain.project_role = "gemm";
    chain.project = [&](const Tensor* t, uint32_t x_off, uint32_t y_off) {
        gemm(t, x_off, act, y_off, false);
    };
    chain.inputs = to_f16;
    chain.deltanet = [&](int64_t il, const Layer& L) {
        K.deltanet_rows(cl, deltanet_args(A, L), A.conv, act, prm, view(s.ring[il]),
                        view(s.state[il]), tok, m, K.deltanet_scan);
    };
    chain.attention = [&](int64_t il, const Layer& L) {
        Kernels::AttentionRows a = ar;
        a.a.q_norm_off = L.q_norm ? W.param(L.q_norm) : Kernels::kNone;
        a.a.k_norm_off = L.k_norm ? W.param(L.k_norm) : Kernels::kNone;
        K.attention_rows(cl, a, act, prm, view(s.k_cache[il]), view(s.v_cache[il]), tok, m,
                         attn_var);
    };
    chain.ffn_in = [&](const Layer& L, const Tensor*) {
        gemm(L.ffn_gate, A.xn, act, A.gate, false);
        gemm(L.ffn_up, A.xn, act, A.up, false);
        stage("gemm");
        K.swiglu(cl, act, A.gate, act, A.up, act, A.ffn, (uint32_t)hp.n_ff * m);
        stage("swiglu");
    };
    chain.add_norm = [&](const Tensor* t, uint32_t x_off, int64_t cols, const Tensor* norm_w) {
        to_f16(x_off, cols);
        gemm(t, x_off, act, A.h, true);
        stage("gemm");
        norm(norm_w, A.h, A.xn, m);
        stage("norm");
    };

    if (profile_) cl.enable_timestamps(16 * (uint32_t)hp.n_layer + 16);
    cl.begin(true);
    if (expand_ahead_ && !groups.empty() && any_expands(0)) expand(0);  // beside the embedding
    K.get_rows(cl, model_->tok_embd->type, W.matrix(plan_, model_->tok_embd),
               (uint32_t)model_->tok_embd->rows(), E, view(W.win_ids), 0, act, A.h, m);
    stage("embed");
    norm(model_->layers[0].attn_norm, A.h, A.xn, m);
    stage("norm");
    record_layers(*model_, A, chain);
    // xn holds the output norm of every row.
    const Tensor* head = model_->output;
    if (all) {
        to_f16(A.xn, hp.n_embd);
        gemm(head, A.xn, view(W.win_logits), 0, false);
    } else {  // only the last row: one GEMV
        K.gemv(cl, head->type, W.matrix(plan_, head), (uint32_t)head->rows(),
               (uint32_t)head->cols(), act, A.xn + (m - 1) * E, view(s.logits), 0, false);
    }
    cl.host_barrier();
    cl.mark("head");
    cl.end();
    if (group != groups.size())
        fail("the window recorded {} of its {} GEMM groups", group, groups.size());
    log::debug(
        "vulkan: the window command of {} rows recorded in {:.3f} ms", m,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return *s.window_cmds.emplace(key, std::move(cmd)).first->second;
}

namespace {

struct DeviceSnapshot : SessionSnapshot {
    const void* owner = nullptr;
    std::vector<Buffer> k, v, state, ring;  // per layer, empty where the layer has none
};

}  // namespace

std::unique_ptr<SessionSnapshot> ResidentDriver::snapshot(const SessionState& st) {
    const Session& s = static_cast<const Session&>(st);
    const Hparams& hp = model_->hp;
    Device& D = *dev_;
    auto snap = std::make_unique<DeviceSnapshot>();
    snap->owner = this;
    snap->n_past = s.n_past;
    const uint64_t kv_row = (uint64_t)hp.n_head_kv * hp.head_dim * 2;
    const uint64_t kv_bytes = std::max<uint64_t>((uint64_t)s.n_past * kv_row, 4);
    CommandList cl(D);
    cl.begin();
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        snap->k.emplace_back();
        snap->v.emplace_back();
        snap->state.emplace_back();
        snap->ring.emplace_back();
        if (hp.is_recurrent(il)) {
            snap->state.back() = D.create_buffer(s.state[il].size(), MemoryKind::device);
            snap->ring.back() = D.create_buffer(s.ring[il].size(), MemoryKind::device);
            cl.copy(s.state[il], 0, snap->state.back(), 0, s.state[il].size());
            cl.copy(s.ring[il], 0, snap->ring.back(), 0, s.ring[il].size());
        } else if (s.n_past > 0) {
            snap->k.back() = D.create_buffer(kv_bytes, MemoryKind::device);
            snap->v.back() = D.create_buffer(kv_bytes, MemoryKind::device);
            cl.copy(s.k_cache[il], 0, snap->k.back(), 0, (uint64_t)s.n_past * kv_row);
            cl.copy(s.v_cache[il], 0, snap->v.back(), 0, (uint64_t)s.n_past * kv_row);
        }
    }
    cl.end();
    cl.submit_and_wait();
    return snap;
}

bool ResidentDriver::restore(SessionState& st, const SessionSnapshot& base) {
    Session& s = static_cast<Session&>(st);
    const auto* snap = dynamic_cast<const DeviceSnapshot*>(&base);
    if (!snap || snap->owner != this) fail("the snapshot was made by another executor");
    if (snap->n_past > s.n_ctx)
        fail("the snapshot holds {} tokens; the session has room for {}", snap->n_past, s.n_ctx);
    const Hparams& hp = model_->hp;
    const uint64_t kv_row = (uint64_t)hp.n_head_kv * hp.head_dim * 2;
    CommandList cl(*dev_);
    cl.begin();
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        if (hp.is_recurrent(il)) {
            cl.copy(snap->state[il], 0, s.state[il], 0, s.state[il].size());
            cl.copy(snap->ring[il], 0, s.ring[il], 0, s.ring[il].size());
        } else if (snap->n_past > 0) {
            cl.copy(snap->k[il], 0, s.k_cache[il], 0, (uint64_t)snap->n_past * kv_row);
            cl.copy(snap->v[il], 0, s.v_cache[il], 0, (uint64_t)snap->n_past * kv_row);
        }
    }
    cl.end();
    cl.submit_and_wait();
    s.n_past = snap->n_past;
    return true;
}

// One pass reads every slab once; a first pass warms the pipelines and the page tables, then
// kPasses back to back are timed. The best of three submissions, so a momentary neighbour does not
// count. Without device timestamps, the host's clock around a submission (all its passes).
Executor::ReadRate ResidentDriver::measure_read_rate() {
    Kernels& K = *w_->kernels;
    constexpr int kPasses = 4;
    auto whole_words = [](const Buffer& b) { return b.size() / 16 * 16; };  // what a pass reads
    uint64_t bytes = 0;
    uint32_t groups = 0;
    for (const Buffer& b : w_->slabs) {
        bytes += whole_words(b);
        groups += K.stream_read_groups(whole_words(b));
    }
    if (bytes == 0) return {};
    Buffer out = dev_->create_buffer((uint64_t)groups * 4 * (kPasses + 1), MemoryKind::device);
    CommandList cl(*dev_);
    cl.enable_timestamps(2);
    cl.begin(true);  // submitted three times
    uint32_t out_off = 0;
    auto pass = [&] {
        for (const Buffer& b : w_->slabs) {
            const uint64_t n = whole_words(b);
            if (n == 0) continue;
            K.stream_read(cl, view(b), n, view(out), out_off);
            out_off += K.stream_read_groups(n);
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
    return {best, fmt::format("measured on the device (every weight read {} times, {:.0f} MiB)",
                              kPasses, double(bytes) / double(1 << 20))};
}

void ResidentDriver::run_token(Session& s, int32_t token, bool logits, const SampleArgs& args) {
    if (s.n_past >= s.n_ctx) fail("the session is full ({} tokens)", s.n_ctx);
    if (token < 0 || token >= model_->hp.n_vocab)
        fail("token id {} is outside the vocabulary of {}", token, model_->hp.n_vocab);
    auto* t = static_cast<uint32_t*>(s.tok.mapped());
    t[0] = (uint32_t)s.n_past;
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

namespace {
// The id sample.comp chose; it gives none (0xffffffff) when the logits hold a NaN.
int32_t sampled_token(const void* tok) {
    const uint32_t id = static_cast<const uint32_t*>(tok)[2];
    if (id == 0xffffffffu)
        fail("the logits hold NaN values (the model's weights or activations are broken)");
    return (int32_t)id;
}
}  // namespace

int32_t ResidentDriver::decode_greedy(SessionState& st, int32_t token) {
    Session& s = static_cast<Session&>(st);
    run_token(s, token, false, SampleArgs{});
    return sampled_token(s.tok.mapped());
}

ResidentDriver::CommandCounts ResidentDriver::token_command_counts(const SessionState& st) const {
    const Session& s = static_cast<const Session&>(st);
    const CommandList& cmd = *s.token_cmds[Session::token_slot(s.short_until > 0, false, false)];
    return {cmd.n_dispatches(), cmd.n_barriers(),   s.rounded_reads, s.gated_reads,
            s.gated_rounded,    s.normed_roundings, s.attn_rounded,  s.attn_gated_form};
}

int64_t ResidentDriver::short_attention_until(const SessionState& st) const {
    return static_cast<const Session&>(st).short_until;
}

bool ResidentDriver::samples_on_device(const SamplerParams& p) const {
    return p.repeat_penalty == 1.0f &&
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
        if (profile_) profile_->add("prefill", m, cmd.times());
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

}  // namespace dl::vk

namespace dl::vk {

void register_device_driver() {
    static bool done = false;
    if (done) return;
    done = true;
    DeviceDriver d;
    d.name = "vulkan";
    d.make = [](std::shared_ptr<const Model> model, int index, int64_t n_ctx,
                std::string* reason) -> std::unique_ptr<Executor> {
        DriverOptions o;
        if (index >= 0) o.device.index = index;
        if (n_ctx > 0) o.plan.n_ctx = n_ctx;
        auto r = ResidentDriver::create(std::move(model), o);
        if (!r) {
            if (reason) *reason = r.reason();
            return nullptr;
        }
        return std::move(*r);
    };
    d.describe = [](const Model& model, int64_t n_ctx, int index) -> std::string {
        auto devs = list_devices();
        if (!devs) return "vulkan: " + devs.reason();
        if (index >= (int)devs->size())
            return fmt::format("vulkan:{}: no such device ({} found)\n", index, devs->size());
        std::string out;
        for (const DeviceSummary& s : *devs) {
            if (index >= 0 && (int)s.index != index) continue;
            PlanOptions o;
            if (n_ctx > 0) o.n_ctx = n_ctx;
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
