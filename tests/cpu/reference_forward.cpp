// The naive double-precision reference forward (see reference_forward.h). Written from the
// model's equations (shared/design/QWEN35.md and the llama/qwen3 blocks), not from the chain.
#include "cpu/reference_forward.h"

#include <cmath>

#include "quant/quant.h"

namespace dl::test {

namespace {

using Vec = std::vector<double>;

struct Mat {
    int64_t rows = 0, cols = 0;
    std::vector<double> w;  // row-major [rows][cols]
};

Mat load(const Tensor* t) {
    Mat m;
    m.cols = t->cols();
    m.rows = t->n_elements() / m.cols;
    std::vector<float> f(static_cast<size_t>(t->n_elements()));
    quant::dequantize(t->type, t->data, f.data(), t->n_elements());
    m.w.assign(f.begin(), f.end());
    return m;
}

Vec vec(const Tensor* t) {
    return load(t).w;
}

// Rows [r0, r0 + n) of m times x (n = -1: every row).
Vec mul(const Mat& m, const Vec& x, int64_t r0 = 0, int64_t n = -1) {
    if (n < 0) n = m.rows;
    Vec y(static_cast<size_t>(n), 0.0);
    for (int64_t r = 0; r < n; ++r) {
        double s = 0;
        for (int64_t c = 0; c < m.cols; ++c) s += m.w[(r0 + r) * m.cols + c] * x[c];
        y[r] = s;
    }
    return y;
}

// RMS norm of x[off, off + n) in place, times w (when given).
void rms(Vec& x, size_t off, size_t n, const Vec* w, double eps) {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
    double r = 1.0 / std::sqrt(ss / double(n) + eps);
    for (size_t i = 0; i < n; ++i) x[off + i] = x[off + i] * r * (w ? (*w)[i] : 1.0);
}

double sigm(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}
double silu(double x) {
    return x * sigm(x);
}
double softplus(double x) {
    return x > 20 ? x : std::log1p(std::exp(x));
}

// Rotates a head at x[off..]: pairs (a_j, b_j) by angle pos * theta_j.
void rotate(Vec& x, size_t off, int64_t n_rot, int64_t pos, double base, bool neox,
            const Vec* divisors) {
    for (int64_t j = 0; j < n_rot / 2; ++j) {
        double theta = std::pow(base, -2.0 * double(j) / double(n_rot));
        if (divisors) theta /= (*divisors)[j];
        double c = std::cos(double(pos) * theta), s = std::sin(double(pos) * theta);
        size_t a = off + (neox ? j : 2 * j), b = off + (neox ? j + n_rot / 2 : 2 * j + 1);
        double xa = x[a], xb = x[b];
        x[a] = xa * c - xb * s;
        x[b] = xb * c + xa * s;
    }
}

struct LayerW {
    Vec attn_norm, ffn_norm, q_norm, k_norm, conv, dt_bias, ssm_a, ssm_norm;
    Mat gate, up, down, wq, wk, wv, wo, qkv, z, beta, alpha, out;
    // Mixture of experts: the router, the stacks (gate and up in one when fused), the shared
    // expert and its gate.
    Mat router, gate_exps, up_exps, down_exps, gate_sh, up_sh, down_sh;
    bool fused = false;
    Vec gate_inp_sh;
};

struct LayerState {
    std::vector<Vec> K, V;  // attention: one row per past token
    std::vector<Vec> conv;  // DeltaNet: last K-1 inputs, oldest first
    std::vector<Vec> S;     // DeltaNet: per value head [d_k][d_v]
};

}  // namespace

std::vector<std::vector<double>> reference_forward(const Model& m,
                                                   const std::vector<int32_t>& tokens) {
    const Hparams& hp = m.hp;
    const int64_t E = hp.n_embd, D = hp.head_dim, H = hp.n_head, Hkv = hp.n_head_kv;
    const double eps = hp.rms_eps;
    const bool qwen35 = hp.arch == Arch::qwen35;
    const int64_t Hk = hp.ssm_n_k_heads, Hv = hp.ssm_n_v_heads, dk = hp.ssm_d_state,
                  dv = hp.ssm_d_state, Kc = hp.ssm_conv_kernel;
    const int64_t conv_dim = 2 * Hk * dk + Hv * dv;

    std::vector<LayerW> lw(static_cast<size_t>(hp.n_layer));
    std::vector<LayerState> st(static_cast<size_t>(hp.n_layer));
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        const Layer& L = m.layers[il];
        LayerW& w = lw[il];
        w.attn_norm = vec(L.attn_norm);
        w.ffn_norm = vec(L.ffn_norm);
        if (hp.ffn_kind == FfnKind::experts) {
            w.router = load(L.ffn_gate_inp);
            w.fused = L.ffn_gate_up_exps != nullptr;
            w.gate_exps = load(w.fused ? L.ffn_gate_up_exps : L.ffn_gate_exps);
            if (!w.fused) w.up_exps = load(L.ffn_up_exps);
            w.down_exps = load(L.ffn_down_exps);
            if (L.ffn_gate_shexp) {
                w.gate_sh = load(L.ffn_gate_shexp);
                w.up_sh = load(L.ffn_up_shexp);
                w.down_sh = load(L.ffn_down_shexp);
                w.gate_inp_sh = vec(L.ffn_gate_inp_shexp);
            }
        } else {
            w.gate = load(L.ffn_gate);
            w.up = load(L.ffn_up);
            w.down = load(L.ffn_down);
        }
        if (hp.is_recurrent(il)) {
            w.qkv = load(L.ssm_qkv);
            w.z = load(L.ssm_z);
            w.beta = load(L.ssm_beta);
            w.alpha = load(L.ssm_alpha);
            w.out = load(L.ssm_out);
            w.conv = vec(L.ssm_conv1d);
            w.dt_bias = vec(L.ssm_dt_bias);
            w.ssm_a = vec(L.ssm_a);
            w.ssm_norm = vec(L.ssm_norm);
            st[il].conv.assign(static_cast<size_t>(Kc - 1),
                               Vec(static_cast<size_t>(conv_dim), 0.0));
            st[il].S.assign(static_cast<size_t>(Hv), Vec(static_cast<size_t>(dk * dv), 0.0));
        } else {
            w.wq = load(L.wq);
            w.wk = load(L.wk);
            w.wv = load(L.wv);
            w.wo = load(L.wo);
            if (L.q_norm) w.q_norm = vec(L.q_norm);
            if (L.k_norm) w.k_norm = vec(L.k_norm);
        }
    }
    const Mat embd = load(m.tok_embd);
    const Mat head = load(m.output);
    const Vec out_norm = vec(m.output_norm);
    Vec divisors;
    if (m.rope_freqs) divisors = vec(m.rope_freqs);

    std::vector<std::vector<double>> logits;
    for (size_t pos = 0; pos < tokens.size(); ++pos) {
        Vec h(embd.w.begin() + tokens[pos] * E, embd.w.begin() + (tokens[pos] + 1) * E);
        for (int64_t il = 0; il < hp.n_layer; ++il) {
            LayerW& w = lw[il];
            LayerState& s = st[il];
            Vec x = h;
            rms(x, 0, E, &w.attn_norm, eps);
            Vec mix;
            if (hp.is_recurrent(il)) {
                Vec qkv = mul(w.qkv, x), z = mul(w.z, x), b = mul(w.beta, x), a = mul(w.alpha, x);
                // Causal depthwise conv over [conv state..., this input], then SiLU.
                Vec c(static_cast<size_t>(conv_dim));
                for (int64_t ch = 0; ch < conv_dim; ++ch) {
                    double acc = 0;
                    for (int64_t i = 0; i < Kc; ++i) {
                        double in = i < Kc - 1 ? s.conv[i][ch] : qkv[ch];
                        acc += w.conv[ch * Kc + i] * in;
                    }
                    c[ch] = silu(acc);
                }
                for (int64_t i = 0; i + 1 < Kc - 1; ++i) s.conv[i] = s.conv[i + 1];
                if (Kc > 1) s.conv[Kc - 2] = qkv;
                // l2 norm of every q and k head: x / sqrt(sum x^2 + 1e-6); q scaled.
                for (int64_t part = 0; part < 2; ++part)
                    for (int64_t j = 0; j < Hk; ++j) {
                        size_t off = static_cast<size_t>(part * Hk * dk + j * dk);
                        double ss = 0;
                        for (int64_t i = 0; i < dk; ++i) ss += c[off + i] * c[off + i];
                        double r = 1.0 / std::sqrt(ss + 1e-6);
                        if (part == 0) r /= std::sqrt(double(dk));
                        for (int64_t i = 0; i < dk; ++i) c[off + i] *= r;
                    }
                Vec y(static_cast<size_t>(Hv * dv));
                for (int64_t hh = 0; hh < Hv; ++hh) {
                    const int64_t j =
                        hh % Hk;  // GGUF order pairs value head h with q/k head h mod H_k
                    const double* q = &c[j * dk];
                    const double* k = &c[Hk * dk + j * dk];
                    const double* v = &c[2 * Hk * dk + hh * dv];
                    double beta = sigm(b[hh]);
                    double g = softplus(a[hh] + w.dt_bias[hh]) * w.ssm_a[hh];
                    Vec& S = s.S[hh];
                    for (auto& e : S) e *= std::exp(g);
                    for (int64_t col = 0; col < dv; ++col) {
                        double kv = 0;
                        for (int64_t r = 0; r < dk; ++r) kv += S[r * dv + col] * k[r];
                        double d = beta * (v[col] - kv);
                        for (int64_t r = 0; r < dk; ++r) S[r * dv + col] += k[r] * d;
                    }
                    for (int64_t col = 0; col < dv; ++col) {
                        double o = 0;
                        for (int64_t r = 0; r < dk; ++r) o += S[r * dv + col] * q[r];
                        y[hh * dv + col] = o;
                    }
                    rms(y, static_cast<size_t>(hh * dv), static_cast<size_t>(dv), &w.ssm_norm, eps);
                    for (int64_t col = 0; col < dv; ++col)
                        y[hh * dv + col] *= silu(z[hh * dv + col]);
                }
                mix = mul(w.out, y);
            } else {
                Vec qf = mul(w.wq, x), k = mul(w.wk, x), v = mul(w.wv, x);
                // qwen35: per head [q | gate]; split them.
                Vec q(static_cast<size_t>(H * D)), gate;
                if (qwen35) {
                    gate.resize(static_cast<size_t>(H * D));
                    for (int64_t hh = 0; hh < H; ++hh)
                        for (int64_t i = 0; i < D; ++i) {
                            q[hh * D + i] = qf[hh * 2 * D + i];
                            gate[hh * D + i] = qf[hh * 2 * D + D + i];
                        }
                } else {
                    q = qf;
                }
                const bool neox = hp.arch != Arch::llama;
                for (int64_t hh = 0; hh < H; ++hh) {
                    if (!w.q_norm.empty()) rms(q, static_cast<size_t>(hh * D), D, &w.q_norm, eps);
                    rotate(q, static_cast<size_t>(hh * D), hp.rope_dims, static_cast<int64_t>(pos),
                           hp.rope_base, neox, divisors.empty() ? nullptr : &divisors);
                }
                for (int64_t hh = 0; hh < Hkv; ++hh) {
                    if (!w.k_norm.empty()) rms(k, static_cast<size_t>(hh * D), D, &w.k_norm, eps);
                    rotate(k, static_cast<size_t>(hh * D), hp.rope_dims, static_cast<int64_t>(pos),
                           hp.rope_base, neox, divisors.empty() ? nullptr : &divisors);
                }
                s.K.push_back(k);
                s.V.push_back(v);
                Vec o(static_cast<size_t>(H * D), 0.0);
                for (int64_t hh = 0; hh < H; ++hh) {
                    const int64_t kvh = hh / (H / Hkv);
                    std::vector<double> sc(s.K.size());
                    double mx = -1e300;
                    for (size_t r = 0; r < s.K.size(); ++r) {
                        double d = 0;
                        for (int64_t i = 0; i < D; ++i) d += q[hh * D + i] * s.K[r][kvh * D + i];
                        sc[r] = d / std::sqrt(double(D));
                        mx = std::max(mx, sc[r]);
                    }
                    double sum = 0;
                    for (auto& e : sc) sum += (e = std::exp(e - mx));
                    for (size_t r = 0; r < s.K.size(); ++r)
                        for (int64_t i = 0; i < D; ++i)
                            o[hh * D + i] += sc[r] / sum * s.V[r][kvh * D + i];
                    if (qwen35)
                        for (int64_t i = 0; i < D; ++i) o[hh * D + i] *= sigm(gate[hh * D + i]);
                }
                mix = mul(w.wo, o);
            }
            for (int64_t i = 0; i < E; ++i) h[i] += mix[i];
            Vec u = h;
            rms(u, 0, E, &w.ffn_norm, eps);
            if (hp.ffn_kind == FfnKind::experts) {
                // softmax over every expert, the top k (ties: the lower index), renormalised.
                const int64_t X = hp.n_expert, F = hp.n_ff_exp;
                Vec logit = mul(w.router, u), p(static_cast<size_t>(X));
                double mx = -1e300, sum = 0;
                for (double l : logit) mx = std::max(mx, l);
                for (int64_t e = 0; e < X; ++e) sum += (p[e] = std::exp(logit[e] - mx));
                for (double& x : p) x /= sum;
                std::vector<int64_t> chosen;
                std::vector<bool> taken(static_cast<size_t>(X), false);
                for (int64_t j = 0; j < hp.n_expert_used; ++j) {
                    int64_t best = -1;
                    for (int64_t e = 0; e < X; ++e)
                        if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
                    taken[best] = true;
                    chosen.push_back(best);
                }
                double total = 0;
                for (int64_t e : chosen) total += p[e];
                Vec d(static_cast<size_t>(E), 0.0);
                for (int64_t e : chosen) {
                    Vec g =
                        w.fused ? mul(w.gate_exps, u, e * 2 * F, F) : mul(w.gate_exps, u, e * F, F);
                    Vec up = w.fused ? mul(w.gate_exps, u, e * 2 * F + F, F)
                                     : mul(w.up_exps, u, e * F, F);
                    for (int64_t i = 0; i < F; ++i) g[i] = silu(g[i]) * up[i];
                    Vec de = mul(w.down_exps, g, e * E, E);
                    for (int64_t i = 0; i < E; ++i) d[i] += p[e] / total * de[i];
                }
                if (!w.gate_inp_sh.empty()) {
                    double z = 0;
                    for (int64_t i = 0; i < E; ++i) z += w.gate_inp_sh[i] * u[i];
                    Vec g = mul(w.gate_sh, u), up = mul(w.up_sh, u);
                    for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * up[i];
                    Vec ds = mul(w.down_sh, g);
                    for (int64_t i = 0; i < E; ++i) d[i] += sigm(z) * ds[i];
                }
                for (int64_t i = 0; i < E; ++i) h[i] += d[i];
                continue;
            }
            Vec g = mul(w.gate, u), up = mul(w.up, u);
            for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * up[i];
            Vec d = mul(w.down, g);
            for (int64_t i = 0; i < E; ++i) h[i] += d[i];
        }
        rms(h, 0, E, &out_norm, eps);
        logits.push_back(mul(head, h));
    }
    return logits;
}

}  // namespace dl::test
