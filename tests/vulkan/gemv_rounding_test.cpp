// x rounded to bytes once, by the GEMV that writes it (Kernels::GemvRounding, gemv.comp
// ROUND_OUT and XPRE): the rounding a GEMV writes against the same rounding done on the CPU
// from the rows it stored, and the FFN's pair and down projection over that rounding against
// the same pair and a down projection that rounds x itself. Outputs poisoned before the run,
// every element checked, NaN failing.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <random>

#include "quant/quant.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using test::randn;

// Random weights of type t, quantized by the CPU code, on the device.
Buffer device_matrix(Device& dev, QType t, uint32_t rows, uint32_t cols, uint32_t seed) {
    auto [wq, deq] = test::quantize_rows(t, randn((size_t)rows * cols, seed), rows, cols);
    (void)deq;
    return test::to_device(dev, wq);
}

// Norm weights near 1, spread so a missing multiply shows.
std::vector<float> norm_weights(uint32_t n, uint32_t seed) {
    std::vector<float> w = randn(n, seed, 0.5f);
    for (float& v : w) v += 1.f;
    return w;
}

struct RoundCase {
    QType type;
    uint32_t rows, cols;
};

// Records a GEMV of rows x cols of type t over x (from float 0) into y[y_off ..] that rounds
// its rows to y[xr_off ..].
using RoundRecord = std::function<void(CommandList&, View w, View x, View y, uint32_t y_off,
                                       bool acc, uint32_t xr_off)>;

// A GEMV (in write and in accumulate mode) that also rounds its rows: its bytes, block scales
// and scaled sums are the CPU's rounding of the rows it stored, byte for byte but for values a
// hair from a half, and nothing outside the rows and the rounding is written.
void check_round_out(Device& dev, const RoundRecord& record, QType t, uint32_t rows,
                     uint32_t cols) {
    Buffer w = device_matrix(dev, t, rows, cols, 11 + rows);
    const std::vector<float> x = randn(cols, 3);
    Buffer xb = test::to_device(dev, x);
    const uint32_t y_off = 4, xr_off = (y_off + rows + 3) / 4 * 4 + 4;
    const uint32_t n_r = Kernels::rounding_floats(rows);
    const size_t total = xr_off + n_r + 8;
    for (bool acc : {false, true}) {
        Buffer y = test::poisoned(dev, total);
        const std::vector<float> init = randn(rows, 9, 4.f);
        if (acc) dev.upload(y, y_off * 4, init.data(), rows * 4);
        test::run(dev, [&](CommandList& cl) {
            record(cl, view(w), view(xb), view(y), y_off, acc, xr_off);
        });
        const auto out = test::from_device<float>(dev, y, total);
        const auto words = test::from_device<uint32_t>(dev, y, total);
        const std::string what = std::string(qtype_name(t)) + " " + std::to_string(rows) + "x" +
                                 std::to_string(cols) + (acc ? " acc" : "");
        for (uint32_t i = 0; i < y_off; ++i)
            ASSERT_EQ(test::bits(out[i]), test::kPoison) << what << ": wrote before y";
        for (uint32_t i = y_off + rows; i < xr_off; ++i)
            ASSERT_EQ(test::bits(out[i]), test::kPoison) << what << ": wrote between y and bytes";
        for (uint32_t i = 0; i < rows; ++i) ASSERT_TRUE(std::isfinite(out[y_off + i])) << what;
        const uint32_t xd = xr_off + rows / 4;
        for (uint32_t b = 0; b < rows / 16; ++b) {
            const float* v = &out[y_off + 16 * b];
            float amax = 0.f;
            for (uint32_t i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(v[i]));
            const float id = amax > 0.f ? 127.f / amax : 0.f, d = amax / 127.f;
            int sum = 0;
            for (uint32_t i = 0; i < 16; ++i) {
                const int want = (int)std::nearbyint(v[i] * id);
                const int got = (int8_t)((words[xr_off + 4 * b + i / 4] >> (8 * (i % 4))) & 0xff);
                sum += got;
                // A product a hair from a half may round the other way on a device whose
                // division is not exact.
                const double m = std::fabs((double)v[i] * id);
                if (got != want) {
                    ASSERT_TRUE(std::abs(got - want) == 1 &&
                                std::fabs(m - std::floor(m) - 0.5) < 1e-4)
                        << what << " block " << b << " value " << i << ": " << got << " vs "
                        << want;
                }
            }
            ASSERT_NEAR(out[xd + 2 * b], d, 1e-6 * d) << what << " block " << b;
            ASSERT_NEAR(out[xd + 2 * b + 1], d * sum, 1e-6 * std::fabs(d * sum) + 1e-30)
                << what << " block " << b;
        }
        for (size_t i = xr_off + n_r; i < total; ++i)
            ASSERT_EQ(test::bits(out[i]), test::kPoison) << what << ": wrote past the rounding";
    }
}

class GemvRoundOut : public ::testing::TestWithParam<RoundCase> {};

// Through the launcher (Kernels::gemv with a GemvRounding).
TEST_P(GemvRoundOut, WritesTheRoundingOfItsRows) {
    VK_TEST_DEVICE();
    const auto [t, rows, cols] = GetParam();
    test::Scoped bytes(K.tuning.gemv_x, Kernels::GemvX::bytes);
    if (!K.gemv_rounds(t, rows, cols, false, false)) GTEST_SKIP() << "not on this device or build";
    check_round_out(
        dev,
        [&](CommandList& cl, View w, View x, View y, uint32_t y_off, bool acc, uint32_t xr_off) {
            Kernels::GemvRounding r;
            r.out_off = xr_off;
            K.gemv(cl, {.type = t,
                        .w = w,
                        .rows = rows,
                        .cols = cols,
                        .x = x,
                        .x_off = 0,
                        .y = y,
                        .y_off = y_off,
                        .accumulate = acc,
                        .share = {},
                        .rounding = &r});
        },
        t, rows, cols);
}

// The byte module without subgroup operations (a device without subgroup arithmetic): its rows
// reduced through shared memory, then rounded one thread a 16-value block; and the subgroup
// module over a block of more rows than a subgroup holds. Four row groups of 32 threads and 4
// rows each: 16 rows a block.
TEST(GemvRoundOutModule, WritesTheRoundingOfItsRows) {
    VK_TEST_DEVICE();
    if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
    Pipelines& pipes = *test::env().pipes;
    for (auto [t, rows, cols] :
         {std::tuple{QType::Q8_0, 96u, 64u}, std::tuple{QType::Q4_K, 48u, 512u}}) {
        for (auto [sg, k_rows] : {std::pair{false, 4u}, std::pair{true, 16u}}) {
            std::string name = "gemv_" + std::string(qtype_name(t)) + "_i8" + (sg ? "_sg" : "");
            for (char& c : name) c = (char)std::tolower((unsigned char)c);
            if (find_module(name).empty()) continue;
            if (sg && (!dev.features().subgroup_arithmetic || !dev.features().subgroup_shuffle))
                continue;
            SCOPED_TRACE(name);
            const uint32_t groups = 4, wg = 32 * groups;
            check_round_out(
                dev,
                [&](CommandList& cl, View w, View x, View y, uint32_t y_off, bool acc,
                    uint32_t xr_off) {
                    struct Push {  // gemv.comp's push constants
                        uint32_t ncols, nrows, row_bytes, x_off, y_off, mode, xr_off;
                    } p{cols, rows, (uint32_t)row_size(t, cols), 0, y_off, acc ? 1u : 0u, xr_off};
                    const Kernel& k =
                        pipes.get(name, 3, sizeof(Push),
                                  {wg, k_rows, 1, 1, cols / 32, 0, groups, 0, 0, 0, 1});
                    cl.dispatch(k, {w, x, y}, p, (rows + k_rows * groups - 1) / (k_rows * groups));
                },
                t, rows, cols);
            if (HasFatalFailure()) return;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, GemvRoundOut,
    ::testing::Values(RoundCase{QType::Q8_0, 96, 64}, RoundCase{QType::Q4_K, 256, 512},
                      RoundCase{QType::Q4_K, 1024, 3584}, RoundCase{QType::Q6_K, 512, 1024},
                      RoundCase{QType::Q5_K, 272, 256}, RoundCase{QType::Q4_0, 4096, 64},
                      // 12288 rows: the 9B's FFN rows, many row blocks a workgroup.
                      RoundCase{QType::Q4_K, 12288, 256}),
    test::TypeRowsColsName());

struct LayerCase {
    QType type;
    uint32_t embd, ff;
};

class GemvRoundedChain : public ::testing::TestWithParam<LayerCase> {};

// The FFN of a layer as the token command runs it: the gate and up pair over h's norm (or over
// the normalized h) writes the SwiGLU rows and rounds them, and the down projection adds to h
// from that rounding; against the same pair and a down projection that rounds the rows itself.
// The bytes are the same either way (the same formula over the same floats on one device), so
// h agrees to F32 rounding.
TEST_P(GemvRoundedChain, ReaderOfARoundingMatchesAReaderThatRounds) {
    VK_TEST_DEVICE();
    const auto [t, N, F] = GetParam();
    test::Scoped bytes(K.tuning.gemv_x, Kernels::GemvX::bytes);
    for (bool norm : {true, false}) {
        if (!K.gemv_rounds(t, F, N, true, norm) ||
            K.gemv_path(t, N, F, false, false) != Kernels::GemvX::bytes)
            GTEST_SKIP() << "not on this device or build";
        Buffer wd = device_matrix(dev, t, N, F, 2);
        // The gate and up matrices back to back in one view.
        const size_t gb = row_size(t, N) * F;
        auto [gq, gdeq] = test::quantize_rows(t, randn((size_t)2 * F * N, 3), 2 * F, N);
        (void)gdeq;
        Buffer wgu = test::to_device(dev, gq);
        Buffer n_ffn = test::to_device(dev, norm_weights(N, 6));
        // act: h, the FFN rows, their rounding.
        const uint32_t h = 0, ffn = N, fr = (N + F + 3) / 4 * 4;
        const uint32_t total = fr + Kernels::rounding_floats(F) + 8;
        const std::vector<float> h0 = randn(N, 8, 2.f);
        const Kernels::GemvNormIn nin{view(n_ffn), 1e-6f};
        auto run_chain = [&](bool once) {
            Buffer act = test::poisoned(dev, total);
            dev.upload(act, h * 4, h0.data(), N * 4);
            const View a = view(act);
            Kernels::GemvRounding out, in;
            out.out_off = fr;
            in.x_rounded = true;
            test::run(dev, [&](CommandList& cl) {
                K.gemv_swiglu(cl,
                              {.type = t,
                               .w = view(wgu),
                               .rows = F,
                               .cols = N,
                               .x = a,
                               .x_off = h,
                               .y = a,
                               .y_off = ffn,
                               .rounding = once ? &out : nullptr},
                              0, gb, norm ? &nin : nullptr);
                cl.barrier();
                K.gemv(cl, {.type = t,
                            .w = view(wd),
                            .rows = N,
                            .cols = F,
                            .x = a,
                            .x_off = once ? fr : ffn,
                            .y = a,
                            .y_off = h,
                            .accumulate = true,
                            .share = {},
                            .rounding = once ? &in : nullptr});
            });
            return test::from_device<float>(dev, act, total);
        };
        const auto a = run_chain(true), b = run_chain(false);
        const std::string what = std::string(qtype_name(t)) + " " + std::to_string(N) + "/" +
                                 std::to_string(F) + (norm ? " norm" : "");
        for (auto [from, n, part] : {std::tuple{h, N, "h"}, std::tuple{ffn, F, "FFN rows"}}) {
            double scale = 0;
            for (uint32_t i = from; i < from + n; ++i)
                scale = std::max(scale, std::fabs((double)b[i]));
            for (uint32_t i = from; i < from + n; ++i) {
                ASSERT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i])) << what << " " << part;
                ASSERT_NEAR(a[i], b[i], 1e-5 * scale) << what << " " << part << " " << i - from;
            }
        }
        // The pair that did not round wrote nothing there; the one that did, every float.
        for (uint32_t i = fr; i < total; ++i) ASSERT_EQ(test::bits(b[i]), test::kPoison) << what;
        for (uint32_t i = fr; i < fr + Kernels::rounding_floats(F); ++i)
            ASSERT_NE(test::bits(a[i]), test::kPoison) << what << " rounding " << i - fr;
        for (uint32_t i = fr + Kernels::rounding_floats(F); i < total; ++i)
            ASSERT_EQ(test::bits(a[i]), test::kPoison) << what << ": wrote past the rounding";
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemvRoundedChain,
                         ::testing::Values(LayerCase{QType::Q8_0, 64, 96},
                                           LayerCase{QType::Q4_K, 256, 512},
                                           LayerCase{QType::Q4_K, 1024, 3584},
                                           LayerCase{QType::Q6_K, 512, 1536},
                                           LayerCase{QType::Q4_K, 256, 12288}),
                         [](const auto& info) {
                             return std::string(qtype_name(info.param.type)) + "_" +
                                    std::to_string(info.param.embd) + "_" +
                                    std::to_string(info.param.ff);
                         });

// What a rounding cannot be: rows that are not whole 16-value blocks, a destination past its
// view or not 16-byte aligned, a reader over x as F32 or over a norm's input: a clear error at
// recording.
// The rows of a batched GEMV over bytes rounded once (Kernels::round_rows): each row's blocks
// in the layout above at its stride (rounding_floats), the CPU's rounding byte for byte but for
// values a hair from a half, a block of zeros with scale 0, a NaN making its block's scale NaN,
// and nothing written before or past the rows.
TEST(RoundRows, EachRowInTheRoundingLayout) {
    VK_TEST_DEVICE();
    const uint32_t cols = 96, rows = 3, x_off = 3, out_off = 8;
    const uint32_t stride = Kernels::rounding_floats(cols);
    std::vector<float> x = randn(x_off + rows * cols, 41, 3.f);
    for (uint32_t i = 0; i < 16; ++i) x[x_off + cols + 32 + i] = 0.f;  // row 1, block 2
    x[x_off + 2 * cols + 70] = NAN;                                    // row 2, block 4
    Buffer xb = test::to_device(dev, x);
    const size_t total = out_off + rows * stride + 8;
    Buffer out = test::poisoned(dev, total);
    test::run(dev, [&](CommandList& cl) {
        K.round_rows(cl, view(xb), x_off, view(out), out_off, cols, rows);
    });
    const auto got = test::from_device<float>(dev, out, total);
    for (uint32_t i = 0; i < out_off; ++i) ASSERT_EQ(test::bits(got[i]), test::kPoison) << i;
    for (size_t i = out_off + rows * stride; i < total; ++i)
        ASSERT_EQ(test::bits(got[i]), test::kPoison) << "wrote past the rows at " << i;
    for (uint32_t r = 0; r < rows; ++r) {
        const std::vector<float> row(x.begin() + x_off + r * cols,
                                     x.begin() + x_off + (r + 1) * cols);
        const test::Rounded want = test::rounding_layout(row);
        for (uint32_t e = 0; e < cols / 16; ++e) {
            const std::string what = "row " + std::to_string(r) + " block " + std::to_string(e);
            const uint32_t off = out_off + r * stride;
            if (r == 2 && e == 4) {
                EXPECT_TRUE(std::isnan(got[off + cols / 4 + 2 * e])) << what;
                continue;
            }
            test::RoundedBlock b;
            test::read_rounded_block(got, off, cols, e, what, b);
            if (HasFatalFailure()) return;
            EXPECT_FLOAT_EQ(b.d, want.layout[cols / 4 + 2 * e]) << what;
            const float wd = want.layout[cols / 4 + 2 * e];
            for (uint32_t j = 0; j < 16; ++j) {
                const int q = wd == 0.f ? 0 : (int)std::lround(want.values[16 * e + j] / wd);
                if (b.q[j] == q) continue;
                const double m = std::fabs((double)row[16 * e + j] / wd);
                EXPECT_TRUE(std::abs(b.q[j] - q) == 1 && std::fabs(m - std::floor(m) - 0.5) < 1e-4)
                    << what << " value " << j << ": " << (int)b.q[j] << " vs " << q;
            }
        }
    }
}

TEST(GemvRounding, RefusesWhatItCannotRun) {
    VK_TEST_DEVICE();
    test::Scoped bytes(K.tuning.gemv_x, Kernels::GemvX::bytes);
    if (K.gemv_x_for(QType::Q8_0, 64) != Kernels::GemvX::bytes)
        GTEST_SKIP() << "not on this device or build";
    Buffer w = dev.create_buffer(1 << 16, MemoryKind::device);
    Buffer a = test::poisoned(dev, 4096);
    Buffer nw = test::to_device(dev, norm_weights(64, 1));
    CommandList cl(dev);
    cl.begin(false);
    auto refuses = [&](uint32_t rows, uint32_t x_off, const Kernels::GemvRounding& r,
                       Kernels::GemvX x = Kernels::GemvX::bytes, bool norm = false) {
        test::Scoped path(K.tuning.gemv_x, x);
        try {
            if (norm)
                K.gemv_normed(cl,
                              {.type = QType::Q8_0,
                               .w = view(w),
                               .rows = rows,
                               .cols = 64,
                               .x = view(a),
                               .x_off = x_off,
                               .y = view(a),
                               .y_off = 0,
                               .accumulate = false,
                               .share = {},
                               .rounding = &r},
                              {view(nw), 1e-6f});
            else
                K.gemv(cl, {.type = QType::Q8_0,
                            .w = view(w),
                            .rows = rows,
                            .cols = 64,
                            .x = view(a),
                            .x_off = x_off,
                            .y = view(a),
                            .y_off = 0,
                            .accumulate = false,
                            .share = {},
                            .rounding = &r});
        } catch (const Error& e) {
            return std::string(e.what()).find("round") != std::string::npos;
        }
        return false;
    };
    Kernels::GemvRounding out;
    out.out_off = 1024;
    EXPECT_TRUE(refuses(24, 2048, out)) << "24 rows: a block and a half";
    out.out_off = 1026;
    EXPECT_TRUE(refuses(32, 2048, out)) << "destination not 16-byte aligned";
    out.out_off = 4096 - 8;
    EXPECT_TRUE(refuses(32, 2048, out)) << "destination past the view";
    Kernels::GemvRounding read;
    read.x_rounded = true;
    EXPECT_TRUE(refuses(32, 2050, read)) << "rounding not 16-byte aligned";
    EXPECT_TRUE(refuses(32, 2048, read, Kernels::GemvX::global)) << "a reader over F32 x";
    EXPECT_TRUE(refuses(32, 2048, read, Kernels::GemvX::bytes, true)) << "a reader over a norm";
    cl.end();
}

}  // namespace
}  // namespace dl::vk
