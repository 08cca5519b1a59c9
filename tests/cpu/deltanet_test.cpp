// Tests of the Gated DeltaNet kernels against naive double-precision formulas written out here,
// against numbers worked out by hand, and the chunked form against the one-token form.
// DISABLED_Benchmark measures both forms at Qwen3.5-9B sizes (run it with
// --gtest_also_run_disabled_tests --gtest_filter='*Benchmark*').
#include "cpu/deltanet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/threads.h"

namespace dl::cpu::deltanet {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> x(n);
    for (float& v : x) v = dist(rng);
    return x;
}

void expect_finite(const std::vector<float>& x, const char* what) {
    for (size_t i = 0; i < x.size(); ++i)
        ASSERT_TRUE(std::isfinite(x[i])) << what << "[" << i << "] = " << x[i];
}

// max |a - b| / max |b|
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
    double diff = 0.0, mag = 1e-30;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
        mag = std::max(mag, std::abs(b[i]));
    }
    return diff / mag;
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
    return rel_err(a, std::vector<double>(b.begin(), b.end()));
}

// Inputs for T tokens of the recurrence, shaped like real ones: unit keys, queries of norm
// 1/sqrt(d_k), beta in (0, 1), log decays from mild to strong.
struct Tokens {
    Shape s;
    int64_t T;
    std::vector<float> q, k, v, g, beta, S0;
};

void unit_rows(std::vector<float>& x, int64_t d, float norm) {
    for (size_t r = 0; r < x.size() / d; ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < d; ++i) ss += double(x[r * d + i]) * x[r * d + i];
        for (int64_t i = 0; i < d; ++i) x[r * d + i] = float(x[r * d + i] * norm / std::sqrt(ss));
    }
}

Tokens make_tokens(const Shape& s, int64_t T, uint32_t seed) {
    std::mt19937 rng(seed);
    Tokens x{s, T, {}, {}, {}, {}, {}, {}};
    x.q = uniform(T * s.qk_width(), -1, 1, rng);
    x.k = uniform(T * s.qk_width(), -1, 1, rng);
    unit_rows(x.q, s.d_k, 1.0f / std::sqrt(float(s.d_k)));
    unit_rows(x.k, s.d_k, 1.0f);
    x.v = uniform(T * s.v_width(), -2, 2, rng);
    x.g = uniform(T * s.n_v_heads, -1.5f, -0.01f, rng);
    for (size_t i = 0; i < x.g.size(); i += 7) x.g[i] = -8.0f;  // near-reset tokens
    x.beta = uniform(T * s.n_v_heads, 0.05f, 0.99f, rng);
    x.S0 = uniform(s.n_v_heads * s.d_k * s.d_v, -1, 1, rng);
    return x;
}

// The recurrence exactly as written in the model, in double: outputs [T][H_v][d_v], S updated.
std::vector<double> naive_recurrence(const Tokens& x, std::vector<double>& S) {
    const Shape& s = x.s;
    std::vector<double> o(x.T * s.v_width());
    for (int64_t t = 0; t < x.T; ++t) {
        for (int64_t h = 0; h < s.n_v_heads; ++h) {
            const int64_t j = h % s.n_k_heads;
            const float* q = &x.q[t * s.qk_width() + j * s.d_k];
            const float* k = &x.k[t * s.qk_width() + j * s.d_k];
            const float* v = &x.v[t * s.v_width() + h * s.d_v];
            double* Sh = &S[h * s.d_k * s.d_v];
            const double decay = std::exp(double(x.g[t * s.n_v_heads + h]));
            const double beta = x.beta[t * s.n_v_heads + h];
            for (int64_t i = 0; i < s.d_k * s.d_v; ++i) Sh[i] *= decay;
            for (int64_t c = 0; c < s.d_v; ++c) {
                double kv = 0.0;
                for (int64_t i = 0; i < s.d_k; ++i) kv += Sh[i * s.d_v + c] * k[i];
                const double d = beta * (v[c] - kv);
                for (int64_t i = 0; i < s.d_k; ++i) Sh[i * s.d_v + c] += k[i] * d;
                double out = 0.0;
                for (int64_t i = 0; i < s.d_k; ++i) out += Sh[i * s.d_v + c] * q[i];
                o[t * s.v_width() + h * s.d_v + c] = out;
            }
        }
    }
    return o;
}

// step() applied token by token.
std::vector<float> step_loop(const Tokens& x, std::vector<float>& S, ThreadPool* pool) {
    const Shape& s = x.s;
    std::vector<float> o(x.T * s.v_width(), kNaN);
    for (int64_t t = 0; t < x.T; ++t)
        step(s, S.data(), &x.q[t * s.qk_width()], &x.k[t * s.qk_width()], &x.v[t * s.v_width()],
             &x.g[t * s.n_v_heads], &x.beta[t * s.n_v_heads], &o[t * s.v_width()], pool);
    return o;
}

TEST(DeltaNet, StepMatchesNaiveRecurrence) {
    ThreadPool pool(2);
    for (const Shape s : {Shape{2, 6, 16, 16}, Shape{2, 6, 32, 32}, Shape{3, 3, 16, 37}}) {
        Tokens x = make_tokens(s, 40, 11);
        std::vector<double> S_ref(x.S0.begin(), x.S0.end());
        const std::vector<double> o_ref = naive_recurrence(x, S_ref);
        std::vector<float> S = x.S0;
        const std::vector<float> o = step_loop(x, S, &pool);
        expect_finite(o, "o");
        expect_finite(S, "S");
        EXPECT_LT(rel_err(o, o_ref), 1e-5) << "d_v " << s.d_v;
        EXPECT_LT(rel_err(S, S_ref), 1e-5) << "d_v " << s.d_v;
    }
}

TEST(DeltaNet, ChunkedMatchesStepLoop) {
    ThreadPool pool(2);
    // H_v != H_k throughout; d_v = 20 exercises the scalar column tails.
    for (const Shape s : {Shape{2, 6, 16, 16}, Shape{2, 6, 32, 32}, Shape{2, 4, 16, 20}}) {
        for (int64_t T : {1, 2, 3, 63, 64, 65, 130, 200}) {
            for (int64_t C : {16, 64}) {
                SCOPED_TRACE(testing::Message()
                             << "d_k " << s.d_k << " d_v " << s.d_v << " T " << T << " C " << C);
                Tokens x = make_tokens(s, T, uint32_t(T * 131 + C));
                std::vector<float> S_step = x.S0;
                const std::vector<float> o_step = step_loop(x, S_step, nullptr);
                std::vector<double> S_ref(x.S0.begin(), x.S0.end());
                const std::vector<double> o_ref = naive_recurrence(x, S_ref);

                std::vector<float> S = x.S0, o(T * s.v_width(), kNaN);
                chunked(s, T, C, S.data(), x.q.data(), x.k.data(), x.v.data(), x.g.data(),
                        x.beta.data(), o.data(), T % 2 ? &pool : nullptr);
                expect_finite(o, "o");
                expect_finite(S, "S");
                EXPECT_LT(rel_err(o, o_step), 2e-5);
                EXPECT_LT(rel_err(S, S_step), 2e-5);
                EXPECT_LT(rel_err(o, o_ref), 2e-5);
                EXPECT_LT(rel_err(S, S_ref), 2e-5);
            }
        }
    }
}

// Chunk sizes that do not divide anything: 1 (pure recurrence), 5, 7, and larger than T.
TEST(DeltaNet, ChunkedOddChunkSizes) {
    const Shape s{2, 6, 16, 16};
    for (int64_t C : {1, 5, 7, 300}) {
        Tokens x = make_tokens(s, 45, uint32_t(C));
        std::vector<float> S_step = x.S0;
        const std::vector<float> o_step = step_loop(x, S_step, nullptr);
        std::vector<float> S = x.S0, o(x.T * s.v_width(), kNaN);
        chunked(s, x.T, C, S.data(), x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.beta.data(),
                o.data());
        EXPECT_LT(rel_err(o, o_step), 2e-5) << "C " << C;
        EXPECT_LT(rel_err(S, S_step), 2e-5) << "C " << C;
    }
}

// Decays strong enough to underflow inside a chunk (g down to -60, as ssm_a = -16 allows) must
// neither produce NaN nor drift from the token-by-token form.
TEST(DeltaNet, ChunkedWithStrongDecays) {
    const Shape s{2, 6, 32, 32};
    const int64_t T = 150;
    Tokens x = make_tokens(s, T, 77);
    std::mt19937 rng(78);
    const std::vector<float> strong = uniform(x.g.size(), -60.0f, -5.0f, rng);
    for (size_t i = 0; i < x.g.size(); i += 3) x.g[i] = strong[i];
    x.g[0] = -200.0f;  // exp underflows to exactly zero
    std::vector<float> S_step = x.S0;
    const std::vector<float> o_step = step_loop(x, S_step, nullptr);
    std::vector<double> S_ref(x.S0.begin(), x.S0.end());
    const std::vector<double> o_ref = naive_recurrence(x, S_ref);
    EXPECT_LT(rel_err(o_step, o_ref), 1e-5);
    for (int64_t C : {16, 64}) {
        std::vector<float> S = x.S0, o(T * s.v_width(), kNaN);
        chunked(s, T, C, S.data(), x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.beta.data(),
                o.data());
        expect_finite(o, "o");
        expect_finite(S, "S");
        EXPECT_LT(rel_err(o, o_ref), 2e-5) << "C " << C;
        EXPECT_LT(rel_err(S, S_ref), 2e-5) << "C " << C;
    }
}

TEST(DeltaNet, ChunkedQkvReadsConvRows) {
    const Shape s{2, 6, 16, 24};
    const int64_t T = 70;
    Tokens x = make_tokens(s, T, 5);
    std::vector<float> qkv(T * s.conv_dim());
    for (int64_t t = 0; t < T; ++t) {
        float* r = &qkv[t * s.conv_dim()];
        std::copy_n(&x.q[t * s.qk_width()], s.qk_width(), r);
        std::copy_n(&x.k[t * s.qk_width()], s.qk_width(), r + s.qk_width());
        std::copy_n(&x.v[t * s.v_width()], s.v_width(), r + 2 * s.qk_width());
    }
    std::vector<float> S1 = x.S0, S2 = x.S0;
    std::vector<float> o1(T * s.v_width(), kNaN), o2(T * s.v_width(), kNaN);
    chunked(s, T, 16, S1.data(), x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.beta.data(),
            o1.data());
    chunked_qkv(s, T, 16, S2.data(), qkv.data(), x.g.data(), x.beta.data(), o2.data());
    EXPECT_EQ(o1, o2);
    EXPECT_EQ(S1, S2);
}

// Two tokens, one head, d_k = d_v = 2, worked out by hand from the recurrence.
//   S0 = [[1, 2], [3, 4]]  (rows: key index i, columns: value index c)
//   token 1: exp(g) = 0.5, beta = 0.5, k = (1, 0), v = (1, 1), q = (0, 1)
//     S = 0.5 S0 = [[0.5, 1], [1.5, 2]];  S^T k = (0.5, 1);  d = 0.5 ((1, 1) - (0.5, 1)) = (0.25,
//     0) S += k (x) d = [[0.75, 1], [1.5, 2]];  o = S^T q = (1.5, 2)
//   token 2: exp(g) = 1, beta = 1, k = (0.6, 0.8), v = (2, 0), q = (1, 0)
//     S^T k = 0.6 (0.75, 1) + 0.8 (1.5, 2) = (1.65, 2.2);  d = (0.35, -2.2)
//     S += k (x) d = [[0.96, -0.32], [1.78, 0.24]];  o = S^T q = (0.96, -0.32)
TEST(DeltaNet, HandComputedTwoTokens) {
    const Shape s{1, 1, 2, 2};
    const float q[] = {0, 1, 1, 0}, k[] = {1, 0, 0.6f, 0.8f}, v[] = {1, 1, 2, 0};
    const float g[] = {std::log(0.5f), 0.0f}, beta[] = {0.5f, 1.0f};
    const float S0[] = {1, 2, 3, 4};
    const float o_hand[] = {1.5f, 2, 0.96f, -0.32f}, S_hand[] = {0.96f, -0.32f, 1.78f, 0.24f};

    std::vector<float> S(S0, S0 + 4), o(4, kNaN);
    for (int t = 0; t < 2; ++t)
        step(s, S.data(), q + 2 * t, k + 2 * t, v + 2 * t, g + t, beta + t, o.data() + 2 * t);
    for (int i = 0; i < 4; ++i) {
        EXPECT_NEAR(o[i], o_hand[i], 1e-6) << "step o " << i;
        EXPECT_NEAR(S[i], S_hand[i], 1e-6) << "step S " << i;
    }
    for (int64_t C : {1, 2, 64}) {
        std::vector<float> Sc(S0, S0 + 4), oc(4, kNaN);
        chunked(s, 2, C, Sc.data(), q, k, v, g, beta, oc.data());
        for (int i = 0; i < 4; ++i) {
            EXPECT_NEAR(oc[i], o_hand[i], 1e-6) << "chunked C " << C << " o " << i;
            EXPECT_NEAR(Sc[i], S_hand[i], 1e-6) << "chunked C " << C << " S " << i;
        }
    }
}

// A value head must read q/k head h mod H_k (the GGUF order), not h / (H_v / H_k).
TEST(DeltaNet, ValueHeadReadsKeyHeadModulo) {
    const Shape s{2, 4, 2, 1};
    // q/k head 0 has k = (1, 0), head 1 has k = (0, 1); q = k.
    const float qk[] = {1, 0, 0, 1};
    const float v[] = {1, 2, 3, 4}, g[] = {0, 0, 0, 0}, beta[] = {1, 1, 1, 1};
    std::vector<float> S(4 * 2, 0.0f), o(4, kNaN);
    step(s, S.data(), qk, qk, v, g, beta, o.data());
    // From S = 0 with beta = 1, S_h = k_j (x) v_h and o_h = (q_j . k_j) v_h = v_h; the state row
    // that holds v_h tells which key head was used: head h mod 2.
    for (int h = 0; h < 4; ++h) {
        EXPECT_FLOAT_EQ(o[h], v[h]);
        EXPECT_FLOAT_EQ(S[h * 2 + (h % 2)], v[h]) << "value head " << h;
        EXPECT_FLOAT_EQ(S[h * 2 + 1 - (h % 2)], 0.0f) << "value head " << h;
    }
    std::vector<float> Sc(4 * 2, 0.0f), oc(4, kNaN);
    chunked(s, 1, 4, Sc.data(), qk, qk, v, g, beta, oc.data());
    EXPECT_EQ(Sc, S);
    EXPECT_EQ(oc, o);
}

TEST(DeltaNet, ZeroTokensLeavesStateAlone) {
    const Shape s{1, 1, 4, 4};
    std::vector<float> S(16, 3.0f);
    chunked(s, 0, 8, S.data(), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    EXPECT_EQ(S, std::vector<float>(16, 3.0f));
    EXPECT_THROW(
        chunked(s, 1, 0, S.data(), S.data(), S.data(), S.data(), S.data(), S.data(), S.data()),
        Error);
}

// --- conv ---

double silu_d(double x) {
    return x / (1.0 + std::exp(-x));
}

// out[t][c] = silu(sum_j w[c][j] * in[t - (K-1) + j][c]) over [state; x].
std::vector<double> naive_conv(int64_t T, int64_t ch, int64_t K, const std::vector<float>& x,
                               const std::vector<float>& w, const std::vector<float>& state) {
    std::vector<double> out(T * ch);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < ch; ++c) {
            double acc = 0.0;
            for (int64_t j = 0; j < K; ++j) {
                const int64_t r = t - (K - 1) + j;
                const float in = r < 0 ? state[(K - 1 + r) * ch + c] : x[r * ch + c];
                acc += double(w[c * K + j]) * in;
            }
            out[t * ch + c] = silu_d(acc);
        }
    return out;
}

// The last K-1 rows of [state; x].
std::vector<float> naive_conv_state(int64_t T, int64_t ch, int64_t K, const std::vector<float>& x,
                                    const std::vector<float>& state) {
    std::vector<float> all(state);
    all.insert(all.end(), x.begin(), x.end());
    return std::vector<float>(all.end() - (K - 1) * ch, all.end());
}

TEST(DeltaNet, ConvSiluMatchesNaive) {
    ThreadPool pool(2);
    const int64_t K = 4;
    for (int64_t ch : {5, 70, 300}) {
        for (int64_t T : {1, 2, 3, 10}) {
            SCOPED_TRACE(testing::Message() << "channels " << ch << " T " << T);
            std::mt19937 rng(uint32_t(ch * 10 + T));
            const std::vector<float> x = uniform(T * ch, -3, 3, rng),
                                     w = uniform(ch * K, -1, 1, rng);
            const std::vector<float> state0 = uniform((K - 1) * ch, -3, 3, rng);
            const std::vector<double> ref = naive_conv(T, ch, K, x, w, state0);
            const std::vector<float> state_ref = naive_conv_state(T, ch, K, x, state0);

            std::vector<float> state = state0, out(T * ch, kNaN);
            conv_silu(T, ch, K, x.data(), w.data(), state.data(), out.data(), &pool);
            expect_finite(out, "out");
            EXPECT_LT(rel_err(out, ref), 1e-6);
            EXPECT_EQ(state, state_ref);

            // In place: out is x.
            std::vector<float> state2 = state0, xo = x;
            conv_silu(T, ch, K, xo.data(), w.data(), state2.data(), xo.data(), nullptr);
            EXPECT_EQ(xo, out);
            EXPECT_EQ(state2, state_ref);
        }
    }
}

// Feeding rows in two calls (the first shorter than K-1 or not) equals one call on all of them.
TEST(DeltaNet, ConvSiluStateCarriesAcrossCalls) {
    const int64_t K = 4, ch = 70, T = 10;
    std::mt19937 rng(3);
    const std::vector<float> x = uniform(T * ch, -3, 3, rng), w = uniform(ch * K, -1, 1, rng);
    const std::vector<float> state0 = uniform((K - 1) * ch, -3, 3, rng);
    std::vector<float> state_once = state0, out_once(T * ch, kNaN);
    conv_silu(T, ch, K, x.data(), w.data(), state_once.data(), out_once.data());
    for (int64_t first : {1, 2, 3, 7}) {
        std::vector<float> state = state0, out(T * ch, kNaN);
        conv_silu(first, ch, K, x.data(), w.data(), state.data(), out.data());
        conv_silu(T - first, ch, K, x.data() + first * ch, w.data(), state.data(),
                  out.data() + first * ch);
        EXPECT_EQ(out, out_once) << "first call " << first << " rows";
        EXPECT_EQ(state, state_once) << "first call " << first << " rows";
    }
    // Token by token, as decode feeds it.
    std::vector<float> state = state0, out(T * ch, kNaN);
    for (int64_t t = 0; t < T; ++t)
        conv_silu(1, ch, K, x.data() + t * ch, w.data(), state.data(), out.data() + t * ch);
    EXPECT_EQ(out, out_once);
    EXPECT_EQ(state, state_once);
}

TEST(DeltaNet, ConvRejectsBadKernel) {
    float x = 0, w = 0, st = 0, out = 0;
    EXPECT_THROW(conv_silu(1, 1, 0, &x, &w, &st, &out), Error);
    EXPECT_THROW(conv_silu(1, 1, 17, &x, &w, &st, &out), Error);
}

// --- q/k preparation, gates, output norm ---

TEST(DeltaNet, NormalizeQkMatchesReferenceFormula) {
    const Shape s{2, 6, 16, 8};
    const int64_t T = 5, W = s.conv_dim();
    std::mt19937 rng(8);
    std::vector<float> rows = uniform(T * W, -2, 2, rng);
    for (int i = 0; i < 16; ++i) rows[2 * 16 + i] = 0.0f;  // an all-zero k head stays zero
    const std::vector<float> in = rows;
    normalize_qk(s, T, rows.data(), nullptr);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < 2 * s.n_k_heads; ++h) {
            const float* x = &in[t * W + h * s.d_k];
            double ss = 0.0;
            for (int64_t i = 0; i < s.d_k; ++i) ss += double(x[i]) * x[i];
            const double f = 1.0 / std::sqrt(ss + 1e-6) / (h < s.n_k_heads ? 4.0 : 1.0);
            for (int64_t i = 0; i < s.d_k; ++i)
                EXPECT_NEAR(rows[t * W + h * s.d_k + i], x[i] * f, 1e-6);
        }
    for (int64_t t = 0; t < T; ++t)  // v untouched
        for (int64_t i = 2 * s.qk_width(); i < W; ++i) EXPECT_EQ(rows[t * W + i], in[t * W + i]);
    expect_finite(rows, "rows");
}

TEST(DeltaNet, GatesMatchFormulas) {
    const int64_t T = 3, H = 4;
    const std::vector<float> b = {-30, -1, 0, 2, 5, 40, -0.5f, 0.25f, 1, 2, 3, 4};
    const std::vector<float> a = {-50, -3, 0, 1, 19, 25, 100, -0.1f, 0.5f, 2, -2, 3};
    const std::vector<float> dt_bias = {0.5f, -0.5f, 1.0f, 0.0f};
    const std::vector<float> ssm_a = {-0.1f, -1.0f, -5.0f, -16.0f};
    std::vector<float> beta(T * H, kNaN), g(T * H, kNaN);
    gates(T, H, b.data(), a.data(), dt_bias.data(), ssm_a.data(), beta.data(), g.data());
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t i = t * H + h;
            const double x = double(a[i]) + dt_bias[h];
            const double sp = x > 20.0 ? x : std::log(1.0 + std::exp(x));
            EXPECT_NEAR(beta[i], 1.0 / (1.0 + std::exp(-double(b[i]))), 1e-7) << i;
            EXPECT_NEAR(g[i], sp * ssm_a[h], 1e-6 * std::max(1.0, std::abs(sp * ssm_a[h]))) << i;
            EXPECT_LE(g[i], 0.0f);
        }
    expect_finite(beta, "beta");
    expect_finite(g, "g");
    // In place.
    std::vector<float> b2 = b, a2 = a;
    gates(T, H, b2.data(), a2.data(), dt_bias.data(), ssm_a.data(), b2.data(), a2.data());
    EXPECT_EQ(b2, beta);
    EXPECT_EQ(a2, g);
}

TEST(DeltaNet, GatedNormMatchesFormula) {
    ThreadPool pool(2);
    const Shape s{2, 6, 16, 24};
    const int64_t T = 7;
    const float eps = 1e-6f;
    std::mt19937 rng(9);
    const std::vector<float> o = uniform(T * s.v_width(), -3, 3, rng);
    std::vector<float> z = uniform(T * s.v_width(), -6, 6, rng);
    z[5] = -200.0f;  // silu far in the tail must not give NaN
    const std::vector<float> w = uniform(s.d_v, 0.5f, 1.5f, rng);
    std::vector<float> y(o.size(), kNaN);
    gated_norm(s, T, o.data(), z.data(), w.data(), eps, y.data(), &pool);
    expect_finite(y, "y");
    std::vector<double> ref(o.size());
    for (int64_t i = 0; i < T * s.n_v_heads; ++i) {
        double ss = 0.0;
        for (int64_t c = 0; c < s.d_v; ++c) ss += double(o[i * s.d_v + c]) * o[i * s.d_v + c];
        const double r = 1.0 / std::sqrt(ss / double(s.d_v) + eps);
        for (int64_t c = 0; c < s.d_v; ++c) {
            const int64_t n = i * s.d_v + c;
            ref[n] = o[n] * r * w[c] * silu_d(z[n]);
        }
    }
    EXPECT_LT(rel_err(y, ref), 1e-6);
    std::vector<float> inplace = o;
    gated_norm(s, T, inplace.data(), z.data(), w.data(), eps, inplace.data(), nullptr);
    EXPECT_EQ(inplace, y);
}

// --- speed (not a timed assertion) ---

TEST(DeltaNet, DISABLED_Benchmark) {
    const Shape s{16, 32, 128, 128};  // Qwen3.5-9B
    const int64_t T = 512;
    Tokens x = make_tokens(s, T, 1);
    using clock = std::chrono::steady_clock;
    // Best of three runs, each from the same initial state.
    auto best_seconds = [&](auto&& fn) {
        double best = 1e30;
        for (int rep = 0; rep < 3; ++rep) {
            const auto t0 = clock::now();
            fn();
            best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
        }
        return best;
    };
    ThreadPool& global = ThreadPool::global();
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &global}) {
        const int threads = p ? p->size() : 1;
        std::vector<float> S, o_step, o(T * s.v_width());
        const double t_step = best_seconds([&] {
            S = x.S0;
            o_step = step_loop(x, S, p);
        });
        std::printf("threads %2d  step loop    T=%lld: %8.0f tokens/s (%.3f ms/token)\n", threads,
                    (long long)T, T / t_step, 1e3 * t_step / T);
        for (int64_t C : {16, 32, 64}) {
            const double t = best_seconds([&] {
                S = x.S0;
                chunked(s, T, C, S.data(), x.q.data(), x.k.data(), x.v.data(), x.g.data(),
                        x.beta.data(), o.data(), p);
            });
            std::printf(
                "threads %2d  chunked C=%-2lld T=%lld: %8.0f tokens/s (%.2fx the step loop)"
                "  rel err %.1e\n",
                threads, (long long)C, (long long)T, T / t, t_step / t, rel_err(o, o_step));
        }
    }
}

}  // namespace
}  // namespace dl::cpu::deltanet
