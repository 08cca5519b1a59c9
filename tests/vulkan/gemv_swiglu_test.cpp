// The FFN gate/up GEMV pair with the SwiGLU epilogue (Kernels::gemv_swiglu: gemv.comp built with
// SWIGLU_PAIR) against double-precision references over the CPU-dequantized weights: every weight
// format, x read as floats and rounded to bytes, both matrices in one weight buffer at 16-byte
// and only 4-byte aligned offsets and in either order, odd row counts, poison around the output.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "quant/quant.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using test::randn;

struct PairCase {
    QType type;
    uint32_t rows, cols;
    uint32_t g_off, u_off;  // bytes into the weight buffer
};

double silu(double v) {
    return v / (1.0 + std::exp(-v));
}

// normed: x is the input of an RMSNorm the pair applies first (gemv.comp NORM_IN; x in bytes).
void run_pair(Device& dev, Kernels& K, const PairCase& c, Kernels::GemvX xp, bool normed = false) {
    const std::string what = fmt::format(
        "{} {}x{} gate at {} up at {}{}{}", qtype_name(c.type), c.rows, c.cols, c.g_off, c.u_off,
        xp == Kernels::GemvX::bytes ? ", x in bytes" : "", normed ? ", over a norm's input" : "");
    const uint32_t seed = c.rows * 7 + c.cols + c.g_off;
    auto g =
        test::quantize_rows(c.type, randn((size_t)c.rows * c.cols, seed, 0.5f), c.rows, c.cols);
    auto u =
        test::quantize_rows(c.type, randn((size_t)c.rows * c.cols, seed + 1, 0.5f), c.rows, c.cols);
    const size_t bytes = device_bytes(c.type, c.cols, c.rows);
    std::vector<uint8_t> wbuf(std::max(c.g_off, c.u_off) + bytes + 64, 0xff);
    std::copy_n(g.blocks.data(), bytes, wbuf.begin() + c.g_off);
    std::copy_n(u.blocks.data(), bytes, wbuf.begin() + c.u_off);
    Buffer w = test::to_device(dev, wbuf);

    // x at an offset of 4 floats inside a poisoned activation buffer; y after it with a gap.
    const uint32_t x_off = 4, y_off = x_off + c.cols + 9, total = y_off + c.rows + 6;
    std::vector<float> act(total);
    for (float& v : act) std::memcpy(&v, &test::kPoison, 4);
    std::vector<float> x = randn(c.cols, seed + 2, normed ? 4.f : 1.f);
    std::copy(x.begin(), x.end(), act.begin() + x_off);
    Buffer ab = test::to_device(dev, act);
    std::vector<float> nw = randn(c.cols, seed + 3, 0.5f);
    for (float& v : nw) v += 1.f;
    Buffer nb = test::to_device(dev, nw);
    const Kernels::GemvNormIn norm{view(nb), 1e-6f};

    test::Scoped scope(K.tuning.gemv_x, xp);
    if (K.gemv_x_for(c.type, c.cols) != xp) return;  // not this path here
    test::run(dev, [&](CommandList& cl) {
        K.gemv_swiglu(cl,
                      {.type = c.type,
                       .w = view(w),
                       .rows = c.rows,
                       .cols = c.cols,
                       .x = view(ab),
                       .x_off = x_off,
                       .y = view(ab),
                       .y_off = y_off},
                      c.g_off, c.u_off, normed ? &norm : nullptr);
    });
    auto out = test::from_device<float>(dev, ab, total);

    std::vector<float> xr = normed ? test::rms_normed(x.data(), nw, norm.eps) : x;
    std::vector<float> dx(c.cols, 0.f);
    if (xp == Kernels::GemvX::bytes) {
        test::BytesX b = test::round_x_bytes(xr.data(), c.cols);
        xr = b.values;
        dx = b.scale;
    }
    for (uint32_t r = 0; r < c.rows; ++r) {
        double gs = 0, us = 0, gm = 0, um = 0, gf = 0, uf = 0;
        for (uint32_t i = 0; i < c.cols; ++i) {
            const double wg = g.values[(size_t)r * c.cols + i],
                         wu = u.values[(size_t)r * c.cols + i];
            gs += wg * xr[i];
            us += wu * xr[i];
            gm += std::fabs(wg * xr[i]);
            um += std::fabs(wu * xr[i]);
            gf = std::max(gf, std::fabs(wg) * dx[i]);
            uf = std::max(uf, std::fabs(wu) * dx[i]);
        }
        const double tg = 1e-5 * gm + 1e-5 + 4 * gf, tu = 1e-5 * um + 1e-5 + 4 * uf;
        const double want = silu(gs) * us;
        // silu' stays within 1.1, so an error of tg in the gate moves y by at most 1.1 tg |u|.
        const double tol = 1.1 * tg * (std::fabs(us) + tu) + std::fabs(silu(gs)) * tu + 1e-6;
        const float got = out[y_off + r];
        ASSERT_TRUE(std::isfinite(got)) << what << " row " << r;
        ASSERT_NEAR(got, want, tol) << what << " row " << r;
    }
    for (uint32_t i = 0; i < total; ++i) {
        if (i >= y_off && i < y_off + c.rows) continue;
        ASSERT_EQ(test::bits(out[i]), test::bits(act[i])) << what << " word " << i << " changed";
    }
}

TEST(GemvSwiglu, MatchesReferenceEveryFormat) {
    VK_TEST_DEVICE();
    for (QType t : {QType::F32, QType::F16, QType::Q4_0, QType::Q8_0, QType::Q4_K, QType::Q5_K,
                    QType::Q6_K}) {
        const uint32_t blk = block_size(t) > 1 ? (uint32_t)block_size(t) : 32;
        const uint32_t cols = 2 * std::max(blk, 128u), rows = 37;
        const uint32_t bytes = (uint32_t)device_bytes(t, cols, rows);
        const uint32_t aligned = (bytes + 255) / 256 * 256;
        // Matrices held in tiles lie at multiples of 32 bytes (their rows' handles,
        // tiled_rows.glsl), the others at multiples of 4.
        const uint32_t a = tiled(t) ? 32 : 4, a16 = tiled(t) ? 32 : 16;
        for (const PairCase& c : {PairCase{t, rows, cols, 0, aligned},          // gate, then up
                                  PairCase{t, rows, cols, aligned + 256, a16},  // up first
                                  PairCase{t, 5, cols, a, a + aligned + 2 * a}}) {
            for (Kernels::GemvX xp : {Kernels::GemvX::global, Kernels::GemvX::bytes}) {
                run_pair(dev, K, c, xp);
                if (HasFatalFailure()) return;
            }
            test::Scoped groups(K.tuning.gemv_groups, 2);  // the byte path in row groups
            run_pair(dev, K, c, Kernels::GemvX::bytes);
            if (HasFatalFailure()) return;
            if (Kernels::block_format(t)) {
                run_pair(dev, K, c, Kernels::GemvX::bytes, true);
                if (HasFatalFailure()) return;
            }
            test::Scoped grid(K.tuning.gemv_grid, 2);  // workgroups taking several row blocks
            for (Kernels::GemvX xp : {Kernels::GemvX::global, Kernels::GemvX::bytes}) {
                run_pair(dev, K, c, xp);
                if (HasFatalFailure()) return;
            }
            if (Kernels::block_format(t)) {
                run_pair(dev, K, c, Kernels::GemvX::bytes, true);
                if (HasFatalFailure()) return;
            }
        }
    }
}

// A pair that does not lie in its view, or not where its rows can be found, is a clear error,
// not a read past the binding.
TEST(GemvSwiglu, RefusesAPairOutsideItsView) {
    VK_TEST_DEVICE();
    Buffer w = dev.create_buffer(4096, MemoryKind::device);
    Buffer a = test::poisoned(dev, 1024);
    CommandList cl(dev);
    cl.begin(true);
    EXPECT_THROW(K.gemv_swiglu(cl,
                               {.type = QType::F32,
                                .w = view(w),
                                .rows = 8,
                                .cols = 128,
                                .x = view(a),
                                .x_off = 0,
                                .y = view(a),
                                .y_off = 512},
                               0, 2048),
                 Error);
    EXPECT_THROW(K.gemv_swiglu(cl,
                               {.type = QType::F32,
                                .w = view(w),
                                .rows = 2,
                                .cols = 128,
                                .x = view(a),
                                .x_off = 0,
                                .y = view(a),
                                .y_off = 512},
                               2, 1024),
                 Error);
    // Q4_K rows are held in tiles (weight_layout.h): a matrix 16 bytes past a multiple of 32
    // cannot be found by its rows' handles (a tile of 256-value rows: 4608 bytes).
    Buffer tiles = dev.create_buffer(16384, MemoryKind::device);
    EXPECT_THROW(K.gemv_swiglu(cl,
                               {.type = QType::Q4_K,
                                .w = view(tiles),
                                .rows = 1,
                                .cols = 256,
                                .x = view(a),
                                .x_off = 0,
                                .y = view(a),
                                .y_off = 512},
                               16, 8192),
                 Error);
    cl.end();
}

}  // namespace
}  // namespace dl::vk
