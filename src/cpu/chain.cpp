// The CPU chain's driver: parameter conversion, sessions, and the per-window walk of the forward
// pass's steps (model/forward_pass.h).
#include "cpu/chain.h"

#include <unistd.h>

#include <algorithm>

#include "core/bytes.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/threads.h"
#include "cpu/forward.h"
#include "cpu/ops.h"
#include "model/rope.h"
#include "quant/quant.h"

namespace dl::cpu {

namespace {

std::vector<float> to_f32(const Tensor* t) {
    if (!t) return {};
    std::vector<float> v(static_cast<size_t>(t->n_elements()));
    quant::dequantize(t->type, t->data, v.data(), t->n_elements());
    return v;
}

}  // namespace

Chain::Chain(std::shared_ptr<const Model> model, ChainOptions options, ThreadPool* pool)
    : model_(std::move(model)),
      options_(options),
      pool_(pool ? pool : &ThreadPool::global()),
      weights_(std::make_unique<ChainWeights>()),
      ws_(std::make_unique<Workspace>()) {
    if (options_.window < 1) fail("the prefill window must hold at least one token");
    if (options_.deltanet_chunk < 1) fail("the DeltaNet chunk must hold at least one token");
    const Model& m = *model_;
    const Hparams& hp = m.hp;
    ChainWeights& w = *weights_;
    w.pass = ForwardPass::build(m);
    w.layers.resize(static_cast<size_t>(hp.n_layer));
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        const Layer& L = m.layers[il];
        LayerParams& lp = w.layers[il];
        lp.attn_norm = to_f32(L.attn_norm);
        lp.ffn_norm = to_f32(L.ffn_norm);
        lp.q_norm = to_f32(L.q_norm);
        lp.k_norm = to_f32(L.k_norm);
        lp.conv1d = to_f32(L.ssm_conv1d);
        lp.dt_bias = to_f32(L.ssm_dt_bias);
        lp.ssm_a = to_f32(L.ssm_a);
        lp.ssm_norm = to_f32(L.ssm_norm);
        lp.slot = hp.is_recurrent(il) ? w.n_gdn_layers++ : w.n_attn_layers++;
        if (L.ffn_down_exps) {
            for (int64_t e = 0; e < hp.n_expert; ++e) {
                if (L.ffn_gate_up_exps) {
                    // Gate rows first, then up rows, in each expert's matrix.
                    const Tensor both = L.ffn_gate_up_exps->matrix(e);
                    Tensor g = both, u = both;
                    g.ne[1] = u.ne[1] = hp.n_ff_exp;
                    g.nbytes = u.nbytes = both.nbytes / 2;
                    u.data = both.data + g.nbytes;
                    lp.gate_e.push_back(g);
                    lp.up_e.push_back(u);
                } else {
                    lp.gate_e.push_back(L.ffn_gate_exps->matrix(e));
                    lp.up_e.push_back(L.ffn_up_exps->matrix(e));
                }
                lp.down_e.push_back(L.ffn_down_exps->matrix(e));
            }
            lp.shexp_gate = to_f32(L.ffn_gate_inp_shexp);
        }
    }
    w.ffn_width = hp.ffn_kind == FfnKind::experts ? hp.n_ff_shexp : hp.n_ff;
    w.output_norm = to_f32(m.output_norm);
    w.inv_freq = rope_inv_freq(m, hp.rope_dims);
    w.gdn = {hp.ssm_n_k_heads, hp.ssm_n_v_heads, hp.ssm_d_state, hp.ssm_d_state};
    w.q_width = hp.q_width();
    w.kv_width = hp.n_head_kv * hp.head_dim;
}

Chain::~Chain() = default;

namespace {

// The scratch widths, one place for new_session and session_bytes.
struct ScratchWidths {
    int64_t x, q, kv, o, qkv, z, h, ff, rope, act;
    int64_t experts, ff_exp;  // router logits and an expert's hidden width (MoE)
};

ScratchWidths widths(const Hparams& hp, const ChainWeights& w) {
    ScratchWidths s{};
    s.x = hp.n_embd;
    bool attn = w.n_attn_layers > 0, gdn = w.n_gdn_layers > 0;
    s.q = attn ? w.q_width : 0;
    s.kv = attn ? w.kv_width : 0;
    s.o = attn ? hp.n_head * hp.head_dim : 0;
    s.qkv = gdn ? w.gdn.conv_dim() : 0;
    s.z = gdn ? w.gdn.v_width() : 0;
    s.h = gdn ? w.gdn.n_v_heads : 0;
    s.ff = w.ffn_width;
    s.rope = hp.rope_dims / 2;
    s.experts = hp.ffn_kind == FfnKind::experts ? hp.n_expert : 0;
    s.ff_exp = hp.ffn_kind == FfnKind::experts ? hp.n_ff_exp : 0;
    s.act = std::max({s.x, s.o, s.z, s.ff});
    return s;
}

}  // namespace

uint64_t Chain::session_bytes(int64_t n_ctx) const {
    const Hparams& hp = model_->hp;
    const ChainWeights& w = *weights_;
    uint64_t kv = 2ull * static_cast<uint64_t>(w.n_attn_layers * n_ctx * w.kv_width) *
                  (options_.f32_kv_cache ? 4 : 2);
    uint64_t gdn = 4ull * static_cast<uint64_t>(w.n_gdn_layers) *
                   static_cast<uint64_t>((hp.ssm_conv_kernel - 1) * w.gdn.conv_dim() +
                                         w.gdn.n_v_heads * w.gdn.d_k * w.gdn.d_v);
    return kv + gdn + 4ull * static_cast<uint64_t>(hp.n_vocab);
}

uint64_t Chain::workspace_bytes(int64_t n_ctx) const {
    const ChainWeights& w = *weights_;
    const ScratchWidths sw = widths(model_->hp, w);
    const uint64_t W = static_cast<uint64_t>(options_.window);
    uint64_t rows = static_cast<uint64_t>(3 * sw.x + sw.q + 2 * sw.kv + sw.o + sw.qkv + 2 * sw.z +
                                          2 * sw.h + 2 * sw.ff + 2 * sw.rope + 4);
    if (sw.experts > 0)  // router, shared, the gathered rows, their gate, up and down
        rows += static_cast<uint64_t>(sw.experts + 3 * sw.x + 2 * sw.ff_exp +
                                      4 * model_->hp.n_expert_used + 2);
    return 4ull * W * rows + 4ull * W * static_cast<uint64_t>(4 * sw.act + 64) +
           4ull * static_cast<uint64_t>(pool_->size() * n_ctx);
}

std::unique_ptr<SessionState> Chain::new_session(int64_t n_ctx) {
    if (n_ctx < 1) fail("a session needs a context of at least one token, not {}", n_ctx);
    // A session larger than the machine's memory would end in an allocation failure with no
    // numbers; say what it needs instead.
    const uint64_t ram = usable_memory_bytes();  // available memory and the cgroup's room
    const uint64_t need = session_bytes(n_ctx) + (ws_->rows == 0 ? workspace_bytes(n_ctx) : 0);
    if (ram > 0 && need > ram)
        fail(
            "a session of {} tokens needs {} (KV cache, recurrent state, scratch), more than the "
            "{} of memory available: give a smaller context (-c)",
            n_ctx, human_bytes(need), human_bytes(ram));
    const Hparams& hp = model_->hp;
    const ChainWeights& w = *weights_;
    auto s = std::make_unique<ChainSession>();
    s->owner = this;
    s->n_ctx = n_ctx;
    for (int64_t i = 0; i < w.n_attn_layers; ++i) {
        if (options_.f32_kv_cache) {
            s->k32.emplace_back();
            s->v32.emplace_back();
        } else {
            s->k16.emplace_back();
            s->v16.emplace_back();
        }
    }
    for (int64_t i = 0; i < w.n_gdn_layers; ++i) {
        s->conv_state.emplace_back(static_cast<size_t>((hp.ssm_conv_kernel - 1) * w.gdn.conv_dim()),
                                   0.f);
        s->ssm_state.emplace_back(static_cast<size_t>(w.gdn.n_v_heads * w.gdn.d_k * w.gdn.d_v),
                                  0.f);
    }
    reserve_workspace(n_ctx);
    return s;
}

void Chain::reserve_workspace(int64_t n_ctx) {
    Workspace& ws = *ws_;
    const size_t scores = static_cast<size_t>(pool_->size() * n_ctx);
    if (ws.scores.size() < scores) ws.scores.assign(scores, 0.f);
    if (ws.rows > 0) return;
    const int64_t W = options_.window;
    ws.rows = W;
    const ScratchWidths sw = widths(model_->hp, *weights_);
    auto rows = [W](std::vector<float>& v, int64_t width) {
        v.assign(static_cast<size_t>(W * width), 0.f);
    };
    rows(ws.x, sw.x);
    rows(ws.xn, sw.x);
    rows(ws.out, sw.x);
    rows(ws.q, sw.q);
    rows(ws.k, sw.kv);
    rows(ws.v, sw.kv);
    rows(ws.o, sw.o);
    rows(ws.qkv, sw.qkv);
    rows(ws.z, sw.z);
    rows(ws.y, sw.z);
    rows(ws.beta, sw.h);
    rows(ws.g, sw.h);
    rows(ws.gate, sw.ff);
    rows(ws.up, sw.ff);
    rows(ws.rope_cos, sw.rope);
    rows(ws.rope_sin, sw.rope);
    ws.pos.assign(static_cast<size_t>(W), 0);
    ws.segment.assign(static_cast<size_t>(W), 0);
    ws.act.reserve(W, sw.act);
    if (sw.experts > 0) {
        const int64_t K = model_->hp.n_expert_used;
        rows(ws.router, sw.experts);
        rows(ws.shared, sw.x);
        rows(ws.xe, sw.x);
        rows(ws.de, sw.x);
        rows(ws.ge, sw.ff_exp);
        rows(ws.ue, sw.ff_exp);
        rows(ws.expert_weights, K);
        ws.expert_ids.assign(static_cast<size_t>(W * K), 0);
        ws.expert_rows.assign(static_cast<size_t>(W), 0);
        ws.expert_weights_row.assign(static_cast<size_t>(W), 0.f);
        ws.act_e.reserve(W, std::max(sw.x, sw.ff_exp));
    }
}

void Chain::grow_kv(ChainSession& s, int64_t rows) const {
    if (rows <= s.kv_rows) return;
    const ChainWeights& w = *weights_;
    constexpr int64_t kMinRows = 256;
    const int64_t want = std::min(s.n_ctx, std::max({rows, 2 * s.kv_rows, kMinRows}));
    const uint64_t row_bytes =
        2ull * (uint64_t)(w.n_attn_layers * w.kv_width) * (options_.f32_kv_cache ? 4 : 2);
    const uint64_t more = (uint64_t)(want - s.kv_rows) * row_bytes;
    const uint64_t ram = usable_memory_bytes();
    if (ram > 0 && more > ram)
        fail("the KV cache needs {} more for {} tokens, more than the {} of memory available",
             human_bytes(more), want, human_bytes(ram));
    const size_t elems = static_cast<size_t>(want * w.kv_width);
    for (auto& l : s.k16) l.resize(elems);
    for (auto& l : s.v16) l.resize(elems);
    for (auto& l : s.k32) l.resize(elems);
    for (auto& l : s.v32) l.resize(elems);
    s.kv_rows = want;
}

ChainSession& Chain::own(SessionState& state) const {
    auto* s = dynamic_cast<ChainSession*>(&state);
    if (!s || s->owner != this) fail("this session was made by another executor");
    return *s;
}

void Chain::prefill(SessionState& state, std::span<const int32_t> tokens, LogitsRows rows,
                    std::vector<float>& logits) {
    if (tokens.empty()) fail("prefill needs at least one token");
    if (state.n_past + (int64_t)tokens.size() > state.n_ctx)
        fail("the prompt of {} tokens does not fit: {} of the context of {} are used",
             tokens.size(), state.n_past, state.n_ctx);
    StepItem it;
    it.session = &own(state);
    it.tokens = tokens;
    it.want = rows == LogitsRows::all ? StepItem::Want::all_logits : StepItem::Want::last_logits;
    step(std::span(&it, 1));
    logits.assign(it.logits.begin(), it.logits.end());
}

std::span<const float> Chain::decode(SessionState& state, int32_t token) {
    ChainSession& s = own(state);
    if (s.n_past + 1 > s.n_ctx) fail("the context of {} tokens is full", s.n_ctx);
    StepItem it;
    it.session = &s;
    it.tokens = std::span(&token, 1);
    step(std::span(&it, 1));
    s.logits.assign(it.logits.begin(), it.logits.end());
    return s.logits;
}

// The items' tokens, concatenated, go through the layers in passes of at most `window` rows; an
// item longer than what is left of a pass continues in the next one.
void Chain::step(std::span<StepItem> items) {
    check_step(items);
    for (StepItem& it : items) {
        ChainSession& s = own(*it.session);
        grow_kv(s, s.n_past + (int64_t)it.tokens.size());
    }
    const int64_t V = model_->hp.n_vocab;
    if (results_.size() < items.size()) results_.resize(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
        const StepItem& it = items[i];
        const int64_t rows = it.want == StepItem::Want::all_logits ? (int64_t)it.tokens.size()
                             : it.want == StepItem::Want::nothing  ? 0
                                                                   : 1;
        results_[i].resize(static_cast<size_t>(rows * V));
    }
    int64_t max_ctx = 0;
    for (const StepItem& it : items) max_ctx = std::max(max_ctx, it.session->n_ctx);
    reserve_workspace(max_ctx);
    Workspace& ws = *ws_;
    const int64_t W = ws.rows;

    std::vector<int32_t> tokens;
    std::vector<Segment> segs;
    std::vector<LogitRow> logit_rows;
    size_t i = 0;
    int64_t off = 0;  // tokens of items[i] already run
    while (i < items.size()) {
        tokens.clear();
        segs.clear();
        logit_rows.clear();
        int64_t T = 0;
        while (T < W && i < items.size()) {
            const StepItem& it = items[i];
            const int64_t n_item = (int64_t)it.tokens.size();
            const int64_t take = std::min(n_item - off, W - T);
            auto& s = static_cast<ChainSession&>(*it.session);
            segs.push_back({&s, T, take, s.n_past});
            for (int64_t t = 0; t < take; ++t) {
                tokens.push_back(it.tokens[(size_t)(off + t)]);
                ws.pos[(size_t)(T + t)] = s.n_past + t;
                ws.segment[(size_t)(T + t)] = (int32_t)segs.size() - 1;
            }
            float* out = results_[i].data();
            if (it.want == StepItem::Want::all_logits)
                for (int64_t t = 0; t < take; ++t)
                    logit_rows.push_back({T + t, out + (off + t) * V});
            else if (it.want != StepItem::Want::nothing && off + take == n_item)
                logit_rows.push_back({T + take - 1, out});
            T += take;
            off += take;
            if (off == n_item) {
                ++i;
                off = 0;
            }
        }
        forward(tokens.data(), T, segs, logit_rows);
    }
    for (size_t k = 0; k < items.size(); ++k) {
        items[k].logits = results_[k];
        items[k].token = -1;
    }
}

bool Chain::truncate(SessionState& state, int64_t n) {
    ChainSession& s = own(state);
    if (n == s.n_past) return true;
    if (n < 0 || n > s.n_past || weights_->n_gdn_layers > 0) return false;
    s.n_past = n;  // later rows of the KV cache are overwritten as tokens arrive
    return true;
}

namespace {

struct ChainSnapshot : SessionSnapshot {
    const Chain* owner = nullptr;
    std::vector<std::vector<uint16_t>> k16, v16;  // the first n_past rows of each layer
    std::vector<std::vector<float>> k32, v32, conv_state, ssm_state;
};

// The first `rows` rows of `width` values of a per-layer cache.
template <typename T>
std::vector<std::vector<T>> first_rows(const std::vector<std::vector<T>>& layers, int64_t rows,
                                       int64_t width) {
    std::vector<std::vector<T>> out;
    for (const auto& l : layers) out.emplace_back(l.begin(), l.begin() + (ptrdiff_t)(rows * width));
    return out;
}

template <typename T>
void put_rows(const std::vector<std::vector<T>>& from, std::vector<std::vector<T>>& to) {
    for (size_t i = 0; i < from.size() && i < to.size(); ++i)
        std::copy(from[i].begin(), from[i].end(), to[i].begin());
}

}  // namespace

std::unique_ptr<SessionSnapshot> Chain::snapshot(const SessionState& state) {
    const auto* s = dynamic_cast<const ChainSession*>(&state);
    if (!s || s->owner != this) fail("this session was made by another executor");
    auto snap = std::make_unique<ChainSnapshot>();
    snap->owner = this;
    snap->n_past = s->n_past;
    const int64_t kvw = weights_->kv_width;
    snap->k16 = first_rows(s->k16, s->n_past, kvw);
    snap->v16 = first_rows(s->v16, s->n_past, kvw);
    snap->k32 = first_rows(s->k32, s->n_past, kvw);
    snap->v32 = first_rows(s->v32, s->n_past, kvw);
    snap->conv_state = s->conv_state;
    snap->ssm_state = s->ssm_state;
    for (const auto* l : {&snap->k16, &snap->v16})
        for (const auto& v : *l) snap->bytes += v.size() * sizeof(uint16_t);
    for (const auto* l : {&snap->k32, &snap->v32, &snap->conv_state, &snap->ssm_state})
        for (const auto& v : *l) snap->bytes += v.size() * sizeof(float);
    return snap;
}

bool Chain::restore(SessionState& state, const SessionSnapshot& base) {
    ChainSession& s = own(state);
    const auto* snap = dynamic_cast<const ChainSnapshot*>(&base);
    if (!snap || snap->owner != this) fail("the snapshot was made by another executor");
    if (snap->n_past > s.n_ctx)
        fail("the snapshot holds {} tokens; the session has room for {}", snap->n_past, s.n_ctx);
    grow_kv(s, snap->n_past);
    put_rows(snap->k16, s.k16);
    put_rows(snap->v16, s.v16);
    put_rows(snap->k32, s.k32);
    put_rows(snap->v32, s.v32);
    put_rows(snap->conv_state, s.conv_state);
    put_rows(snap->ssm_state, s.ssm_state);
    s.n_past = snap->n_past;
    return true;
}

namespace {

// Where the workspace keeps the rows of each activation.
float* rows(Workspace& s, Act a) {
    switch (a) {
        case Act::h:
            return s.x.data();
        case Act::xn:
            return s.xn.data();
        case Act::q:
            return s.q.data();
        case Act::k:
            return s.k.data();
        case Act::v:
            return s.v.data();
        case Act::o:
            return s.o.data();
        case Act::qkv:
            return s.qkv.data();
        case Act::z:
            return s.z.data();
        case Act::beta:
            return s.beta.data();
        case Act::alpha:
            return s.g.data();
        case Act::y:
            return s.y.data();
        case Act::gate:
            return s.gate.data();
        case Act::up:
            return s.up.data();
        case Act::ffn:
            return s.gate.data();  // SwiGLU writes over the gate rows
        case Act::out:
            return s.out.data();
        case Act::router:
            return s.router.data();
        case Act::shared:
            return s.shared.data();
        case Act::logits:
            break;
    }
    fail("the chain keeps no rows for activation {}", act_name(a));
}

const std::vector<float>& norm_weights(const ChainWeights& w, const Model& m, const Step& st) {
    if (st.layer < 0) return w.output_norm;
    const Layer& L = m.layers[st.layer];
    const LayerParams& lp = w.layers[st.layer];
    return st.w == L.attn_norm ? lp.attn_norm : lp.ffn_norm;
}

}  // namespace

void Chain::forward(const int32_t* tokens, int64_t T, std::span<const Segment> segs,
                    std::span<const LogitRow> logit_rows) {
    const Model& m = *model_;
    const Hparams& hp = m.hp;
    const ChainWeights& w = *weights_;
    Workspace& s = *ws_;
    ThreadPool& pool = *pool_;
    const int64_t E = hp.n_embd, V = hp.n_vocab;
    Pass p{m, w, options_, s, pool, T, segs};
    // The output norm and the head run only on the rows whose logits are asked for.
    const int64_t n_out = (int64_t)logit_rows.size();
    const Step* prev = nullptr;
    for (const Step& st : w.pass.steps) {
        const bool tail = st.layer < 0 && st.op != Op::embed;
        if (tail && n_out == 0) break;
        const LayerParams* lp = st.layer >= 0 ? &w.layers[st.layer] : nullptr;
        switch (st.op) {
            case Op::embed:
                for (int64_t t = 0; t < T; ++t)
                    quant::dequantize(st.w->type, st.w->row(tokens[t]), s.x.data() + t * E, E);
                break;
            case Op::rms_norm: {
                const float* nw = norm_weights(w, m, st).data();
                if (tail)
                    for (int64_t j = 0; j < n_out; ++j)
                        rmsnorm(s.x.data() + logit_rows[j].row * E, nw, s.xn.data() + j * E, E,
                                hp.rms_eps);
                else
                    for (int64_t t = 0; t < T; ++t)
                        rmsnorm(s.x.data() + t * E, nw, s.xn.data() + t * E, E, hp.rms_eps);
                break;
            }
            case Op::project:
                // Matrices that read the same rows share their conversion to the dot formats.
                if (!prev || prev->op != Op::project || prev->in != st.in)
                    s.act.set(rows(s, st.in), T, st.w->cols());
                matmul(*st.w, s.act, rows(s, st.out), st.w->rows(), pool);
                break;
            case Op::residual: {
                const float* add = rows(s, st.in);
                for (int64_t i = 0; i < T * E; ++i) s.x[i] += add[i];
                break;
            }
            case Op::qk_norm:
                qk_norm(p, *lp);
                break;
            case Op::rope:
                rope(p);
                break;
            case Op::attention:
                attention(p, *lp);
                break;
            case Op::output_gate:
                output_gate(p);
                break;
            case Op::deltanet_gates:
                deltanet_gates(p, *lp);
                break;
            case Op::deltanet_conv:
                deltanet_conv(p, *lp);
                break;
            case Op::deltanet_qk_norm:
                deltanet_qk_norm(p);
                break;
            case Op::deltanet_scan:
                deltanet_scan(p, *lp);
                break;
            case Op::deltanet_out_norm:
                deltanet_out_norm(p, *lp);
                break;
            case Op::swiglu:
                swiglu(s.gate.data(), s.up.data(), s.gate.data(), T * w.ffn_width);
                break;
            case Op::moe_experts:
                moe_experts(p, *lp);
                break;
            case Op::shared_expert_gate:
                shared_expert_gate(p, *lp);
                break;
            case Op::head: {
                // One matrix product for every row that asked, straight into place when the rows
                // go to consecutive rows of one buffer (one sequence's prompt), else through the
                // workspace to each owner.
                bool direct = true;
                for (int64_t j = 1; j < n_out && direct; ++j)
                    direct = logit_rows[j].dest == logit_rows[0].dest + j * V;
                float* out = direct ? logit_rows[0].dest : nullptr;
                if (!direct) {
                    s.head_out.resize(static_cast<size_t>(n_out * V));
                    out = s.head_out.data();
                }
                s.act.set(s.xn.data(), n_out, E);
                matmul(*st.w, s.act, out, V, pool);
                if (!direct)
                    for (int64_t j = 0; j < n_out; ++j)
                        std::copy_n(out + j * V, V, logit_rows[j].dest);
                break;
            }
        }
        prev = &st;
    }
    for (const Segment& sg : segs) sg.s->n_past += sg.n;
}

}  // namespace dl::cpu
