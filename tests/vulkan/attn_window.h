// The window attention tests' fixture, shared with the window attention speed report
// (bench/vk_speed): one window's buffers and its double-precision reference, and the paths the
// kernel runs on.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "vk_test.h"

namespace dl::vk::test {

struct WindowCase {
    uint32_t head_dim, n_head, n_kv;
    uint32_t start;                  // tok[0]: cache rows [0, start) come from earlier windows
    uint32_t row_tiles, extra_rows;  // rows = row_tiles · (query rows a workgroup) + extra_rows
    bool gate;
};

// One window's buffers: act holds the q projection (with the gate after each head's q when
// gated), k, v, then room for the prepared queries and the output, whose rows are spaced by a gap
// that must stay untouched; the paged KV cache (test::paged_cache) holds `start` rows of earlier
// windows and poison (NaN) after them. Kh/Vh are the host F16 cache, in the sequence's order, as
// the window leaves it.
struct Window {
    WindowCase c;
    uint32_t n, n_ctx, hd, q_stride, q_row, kv_row, o_row, q_off, k_off, v_off, qo_off, o_off,
        n_act;
    size_t row_halves;
    std::vector<float> in;
    std::vector<uint16_t> Kh, Vh;
    Buffer act, params;
    PagedCache kv;
    Kernels::AttentionRows args{};

    Window(Device& dev, const WindowCase& wc, uint32_t rows) : c(wc), n(rows) {
        hd = c.head_dim;
        n_ctx = c.start + n + 5;  // rows past the window stay poisoned
        q_stride = c.gate ? 2 * hd : hd;
        q_row = c.n_head * q_stride;
        kv_row = c.n_kv * hd;
        o_row = c.n_head * hd + 6;
        q_off = 0;
        k_off = q_off + n * q_row;
        v_off = k_off + n * kv_row;
        qo_off = v_off + n * kv_row;
        o_off = qo_off + n * c.n_head * hd;
        n_act = o_off + n * o_row;
        std::mt19937 rng(hd * 131 + c.n_head * 17 + c.n_kv * 7 + c.start + n);
        // Queries three times larger than the keys make the softmax peaked, so a wrong running
        // max or a missed key shows.
        in = test::randn(n_act, rng, 3.f);
        for (uint32_t i = qo_off; i < n_act; ++i) std::memcpy(&in[i], &test::kPoison, 4);
        act = test::to_device(dev, in);

        row_halves = (size_t)c.n_kv * hd;
        Kh.resize(n_ctx * row_halves);
        Vh.resize(Kh.size());
        std::normal_distribution<float> nd(0.f, 1.f);
        for (size_t i = 0; i < c.start * row_halves; ++i) {
            Kh[i] = f32_to_f16(nd(rng));
            Vh[i] = f32_to_f16(nd(rng));
        }
        kv = test::paged_cache(dev, n_ctx, c.n_kv, hd);
        std::vector<uint32_t> kw(kv.pool_words, test::kPoison), vw(kv.pool_words, test::kPoison);
        for (uint32_t r = 0; r < c.start; ++r) {
            std::memcpy(&kw[kv.row(r) * kv.row_words], &Kh[r * row_halves], row_halves * 2);
            std::memcpy(&vw[kv.row(r) * kv.row_words], &Vh[r * row_halves], row_halves * 2);
        }
        dev.upload(kv.k, 0, kw.data(), kw.size() * 4);
        dev.upload(kv.v, 0, vw.data(), vw.size() * 4);
        // The window's rows as the prep stores them (no norms, no rope: q passes through).
        for (uint32_t r = 0; r < n; ++r)
            for (uint32_t i = 0; i < kv_row; ++i) {
                Kh[(c.start + r) * row_halves + i] = f32_to_f16(in[k_off + r * kv_row + i]);
                Vh[(c.start + r) * row_halves + i] = f32_to_f16(in[v_off + r * kv_row + i]);
            }

        params = dev.create_buffer(16, MemoryKind::device);
        static_cast<uint32_t*>(kv.tok.mapped())[0] = c.start;
        args.a = Kernels::Attention{c.n_head, c.n_kv,         hd,
                                    0,        n_ctx,          q_off,
                                    q_stride, k_off,          v_off,
                                    qo_off,   o_off,          c.gate ? q_off + hd : Kernels::kNone,
                                    q_stride, Kernels::kNone, Kernels::kNone,
                                    0,        1e-6f};
        args.q_row = q_row;
        args.kv_row = kv_row;
        args.o_row = o_row;
        args.gate_row = q_row;
    }

    void record(Kernels& K, CommandList& cl, Variant v = Variant::scalar,
                Kernels::SplitScratch split = {}) {
        K.attention_rows(cl, args, view(act), view(params), view(kv.k), view(kv.v), view(kv.tok), n,
                         v, split);
    }

    // Row r, head h in double precision: softmax(q · K / sqrt(head_dim)) · V over cache rows
    // 0 .. start + r, times sigmoid(gate) when gated. half_q: q / sqrt(head_dim) rounded to F16
    // first, as the cooperative-matrix kernels feed it to their products.
    std::vector<double> reference(uint32_t r, uint32_t h, bool half_q = false) const {
        const uint32_t pos = c.start + r;
        const float* q = &in[q_off + r * q_row + h * q_stride];
        const size_t kv = (size_t)(h / (c.n_head / c.n_kv)) * hd;
        const double scale = 1.0 / std::sqrt((double)hd);
        std::vector<double> qs(hd), s(pos + 1), o(hd, 0.0);
        for (uint32_t d = 0; d < hd; ++d)
            qs[d] = half_q ? f16_to_f32(f32_to_f16(q[d] * (float)scale)) : q[d] * scale;
        double mx = -INFINITY;
        for (uint32_t j = 0; j <= pos; ++j) {
            double dot = 0;
            for (uint32_t d = 0; d < hd; ++d)
                dot += qs[d] * f16_to_f32(Kh[j * row_halves + kv + d]);
            s[j] = dot;
            mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (uint32_t j = 0; j <= pos; ++j)
            for (uint32_t d = 0; d < hd; ++d)
                o[d] += s[j] / sum * f16_to_f32(Vh[j * row_halves + kv + d]);
        if (c.gate)
            for (uint32_t d = 0; d < hd; ++d) o[d] /= 1.0 + std::exp(-(double)q[hd + d]);
        return o;
    }

    // Row r, head h of the device's output against reference(): every element finite and close.
    // The cooperative-matrix kernels (tensor_cores: NV cooperative matrix 2 or KHR) multiply F16
    // queries and F16 softmax weights: their reference rounds the queries the same way, and the
    // weights' rounding (2^-11 relative, twice where the weights are rounded again on their way
    // to the products) moves the output by up to that much of the largest value weighed (about
    // 3.5 over a few hundred N(0, 1) values: an H100 showed 1.66e-3 on the KHR kernel and 2.49e-3
    // on the NV one at 203 keys of heads of 96).
    void check(const std::vector<float>& out, uint32_t r, uint32_t h,
               bool tensor_cores = false) const {
        const std::vector<double> want = reference(r, h, tensor_cores);
        double vmax = 0;
        const size_t kv = (size_t)(h / (c.n_head / c.n_kv)) * hd;
        for (uint32_t j = 0; j <= c.start + r; ++j)
            for (uint32_t d = 0; d < hd; ++d)
                vmax = std::max(vmax, (double)std::fabs(f16_to_f32(Vh[j * row_halves + kv + d])));
        for (uint32_t d = 0; d < hd; ++d) {
            const float got = out[o_off + r * o_row + h * hd + d];
            ASSERT_TRUE(std::isfinite(got)) << "row " << r << " head " << h << " dim " << d;
            const double tol = tensor_cores
                                   ? 1e-4 * (1 + std::fabs(want[d])) + std::ldexp(vmax, -10)
                                   : 1e-4 * (1 + std::fabs(want[d]));
            ASSERT_NEAR(got, want[d], tol) << "row " << r << " head " << h << " dim " << d;
        }
    }
};

// Scores from queries in shared memory, summed over subgroup lanes (where the device can), or
// both products on NV cooperative matrix 2 or on KHR cooperative matrices (where the device has
// them).
enum class Path { plain, shuffle, cm2, khr };

// The variant attention_rows() is called with on each path.
inline Variant path_variant(Path path) {
    return path == Path::cm2   ? Variant::nv_coopmat2
           : path == Path::khr ? Variant::khr_coopmat
                               : Variant::scalar;
}

}  // namespace dl::vk::test
