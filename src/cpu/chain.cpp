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

// Checked before any state changes, so a bad id leaves the session as it was.
void check_tokens(std::span<const int32_t> tokens, int64_t n_vocab) {
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab)
            fail("token id {} is outside the vocabulary of {} tokens", t, n_vocab);
}

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
      weights_(std::make_unique<ChainWeights>()) {
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
    }
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
    s.ff = hp.n_ff;
    s.rope = hp.rope_dims / 2;
    s.act = std::max({s.x, s.o, s.z, s.ff});
    return s;
}

}  // namespace

uint64_t Chain::session_bytes(int64_t n_ctx) const {
    const Hparams& hp = model_->hp;
    const ChainWeights& w = *weights_;
    const ScratchWidths sw = widths(hp, w);
    const uint64_t W = static_cast<uint64_t>(std::min(options_.window, n_ctx));
    uint64_t kv = 2ull * static_cast<uint64_t>(w.n_attn_layers * n_ctx * w.kv_width) *
                  (options_.f32_kv_cache ? 4 : 2);
    uint64_t gdn = 4ull * static_cast<uint64_t>(w.n_gdn_layers) *
                   static_cast<uint64_t>((hp.ssm_conv_kernel - 1) * w.gdn.conv_dim() +
                                         w.gdn.n_v_heads * w.gdn.d_k * w.gdn.d_v);
    uint64_t rows = static_cast<uint64_t>(3 * sw.x + sw.q + 2 * sw.kv + sw.o + sw.qkv + 2 * sw.z +
                                          2 * sw.h + 2 * sw.ff + 2 * sw.rope);
    uint64_t scratch = 4ull * W * rows + 4ull * W * static_cast<uint64_t>(4 * sw.act + 64) +
                       4ull * static_cast<uint64_t>(pool_->size() * n_ctx);
    return kv + gdn + scratch;
}

std::unique_ptr<SessionState> Chain::new_session(int64_t n_ctx) {
    if (n_ctx < 1) fail("a session needs a context of at least one token, not {}", n_ctx);
    // A session larger than the machine's memory would end in an allocation failure with no
    // numbers; say what it needs instead.
    const uint64_t ram = usable_memory_bytes();  // available memory and the cgroup's room
    const uint64_t need = session_bytes(n_ctx);
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
    const size_t kv_elems = static_cast<size_t>(n_ctx * w.kv_width);
    for (int64_t i = 0; i < w.n_attn_layers; ++i) {
        if (options_.f32_kv_cache) {
            s->k32.emplace_back(kv_elems);
            s->v32.emplace_back(kv_elems);
        } else {
            s->k16.emplace_back(kv_elems);
            s->v16.emplace_back(kv_elems);
        }
    }
    for (int64_t i = 0; i < w.n_gdn_layers; ++i) {
        s->conv_state.emplace_back(static_cast<size_t>((hp.ssm_conv_kernel - 1) * w.gdn.conv_dim()),
                                   0.f);
        s->ssm_state.emplace_back(static_cast<size_t>(w.gdn.n_v_heads * w.gdn.d_k * w.gdn.d_v),
                                  0.f);
    }
    const int64_t W = std::min(options_.window, n_ctx);
    s->window = W;
    const ScratchWidths sw = widths(hp, w);
    auto rows = [W](std::vector<float>& v, int64_t width) {
        v.assign(static_cast<size_t>(W * width), 0.f);
    };
    rows(s->x, sw.x);
    rows(s->xn, sw.x);
    rows(s->out, sw.x);
    rows(s->q, sw.q);
    rows(s->k, sw.kv);
    rows(s->v, sw.kv);
    rows(s->o, sw.o);
    rows(s->qkv, sw.qkv);
    rows(s->z, sw.z);
    rows(s->y, sw.z);
    rows(s->beta, sw.h);
    rows(s->g, sw.h);
    rows(s->gate, sw.ff);
    rows(s->up, sw.ff);
    rows(s->rope_cos, sw.rope);
    rows(s->rope_sin, sw.rope);
    s->scores.assign(static_cast<size_t>(pool_->size() * n_ctx), 0.f);
    s->act.reserve(W, sw.act);
    return s;
}

ChainSession& Chain::own(SessionState& state) const {
    auto* s = dynamic_cast<ChainSession*>(&state);
    if (!s || s->owner != this) fail("this session was made by another executor");
    return *s;
}

void Chain::prefill(SessionState& state, std::span<const int32_t> tokens, LogitsRows rows,
                    std::vector<float>& logits) {
    ChainSession& s = own(state);
    const int64_t n = static_cast<int64_t>(tokens.size()), V = model_->hp.n_vocab;
    if (n == 0) fail("prefill needs at least one token");
    if (s.n_past + n > s.n_ctx)
        fail("the prompt of {} tokens does not fit: {} of the context of {} are used", n, s.n_past,
             s.n_ctx);
    check_tokens(tokens, V);
    const bool all = rows == LogitsRows::all;
    logits.resize(static_cast<size_t>((all ? n : 1) * V));
    for (int64_t w0 = 0; w0 < n; w0 += s.window) {
        const int64_t T = std::min(s.window, n - w0);
        const bool last = w0 + T == n;
        float* out = all ? logits.data() + w0 * V : (last ? logits.data() : nullptr);
        forward(s, tokens.data() + w0, T, false, out, all);
    }
}

std::span<const float> Chain::decode(SessionState& state, int32_t token) {
    ChainSession& s = own(state);
    if (s.n_past + 1 > s.n_ctx) fail("the context of {} tokens is full", s.n_ctx);
    check_tokens(std::span(&token, 1), model_->hp.n_vocab);
    s.logits.resize(static_cast<size_t>(model_->hp.n_vocab));
    forward(s, &token, 1, true, s.logits.data(), false);
    return s.logits;
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

// The first `rows` of `rows_total` rows of a per-layer cache.
template <typename T>
std::vector<std::vector<T>> first_rows(const std::vector<std::vector<T>>& layers, int64_t rows,
                                       int64_t rows_total) {
    std::vector<std::vector<T>> out;
    for (const auto& l : layers) {
        const size_t n = rows_total > 0 ? l.size() / (size_t)rows_total * (size_t)rows : 0;
        out.emplace_back(l.begin(), l.begin() + (ptrdiff_t)n);
    }
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
    snap->k16 = first_rows(s->k16, s->n_past, s->n_ctx);
    snap->v16 = first_rows(s->v16, s->n_past, s->n_ctx);
    snap->k32 = first_rows(s->k32, s->n_past, s->n_ctx);
    snap->v32 = first_rows(s->v32, s->n_past, s->n_ctx);
    snap->conv_state = s->conv_state;
    snap->ssm_state = s->ssm_state;
    return snap;
}

bool Chain::restore(SessionState& state, const SessionSnapshot& base) {
    ChainSession& s = own(state);
    const auto* snap = dynamic_cast<const ChainSnapshot*>(&base);
    if (!snap || snap->owner != this) fail("the snapshot was made by another executor");
    if (snap->n_past > s.n_ctx)
        fail("the snapshot holds {} tokens; the session has room for {}", snap->n_past, s.n_ctx);
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

// Where the session keeps the rows of each activation.
float* rows(ChainSession& s, Act a) {
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

void Chain::forward(ChainSession& s, const int32_t* tokens, int64_t T, bool decode, float* logits,
                    bool all_rows) {
    const Model& m = *model_;
    const Hparams& hp = m.hp;
    const ChainWeights& w = *weights_;
    ThreadPool& pool = *pool_;
    const int64_t E = hp.n_embd;
    Pass p{m, w, options_, s, pool, T, s.n_past, decode};
    // The output norm and the head run on the rows whose logits are asked for: every row, the
    // last, or none.
    const int64_t first_logit = all_rows ? 0 : T - 1;
    const Step* prev = nullptr;
    for (const Step& st : w.pass.steps) {
        const bool tail = st.layer < 0 && st.op != Op::embed;
        if (tail && !logits) break;
        const LayerParams* lp = st.layer >= 0 ? &w.layers[st.layer] : nullptr;
        switch (st.op) {
            case Op::embed:
                for (int64_t t = 0; t < T; ++t)
                    quant::dequantize(st.w->type, st.w->row(tokens[t]), s.x.data() + t * E, E);
                break;
            case Op::rms_norm: {
                const int64_t first = tail ? first_logit : 0;
                const float* nw = norm_weights(w, m, st).data();
                for (int64_t t = first; t < T; ++t)
                    rmsnorm(s.x.data() + t * E, nw, s.xn.data() + (t - first) * E, E, hp.rms_eps);
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
                swiglu(s.gate.data(), s.up.data(), s.gate.data(), T * hp.n_ff);
                break;
            case Op::head:
                s.act.set(s.xn.data(), T - first_logit, E);
                matmul(*st.w, s.act, logits, hp.n_vocab, pool);
                break;
        }
        prev = &st;
    }
    s.n_past += T;
}

}  // namespace dl::cpu
