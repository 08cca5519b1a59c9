// The fused decode GEMVs (Kernels::gemv_fused: shaders/gemv.comp built with NORM_EPILOGUE)
// against double-precision references over the CPU-dequantized weights: every weight
// format at odd shapes, x, h and xn in one activation buffer as the token command lays them out,
// poisoned around and in the outputs, the counter word checked back at 0; the same GEMV replayed
// in one command and across submits, GEMVs chained through their norms, and two at once.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <random>

#include <fmt/format.h>

#include "quant/quant.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using test::randn;

// A weight matrix in its GGUF blocks (quantized by the CPU code) and its dequantized values.
struct Matrix {
    QType type;
    uint32_t rows, cols;
    std::vector<uint8_t> blocks;  // padded by a word: the last block's word reads stay inside
    std::vector<float> deq;
};

Matrix make_matrix(QType t, uint32_t rows, uint32_t cols, uint32_t seed, float scale = 1.f) {
    auto q = test::quantize_rows(t, randn((size_t)rows * cols, seed, scale), rows, cols);
    return Matrix{t, rows, cols, std::move(q.blocks), std::move(q.values)};
}

// y / sqrt(mean(y²) + eps) · w, in double.
std::vector<double> rms_norm_ref(const std::vector<double>& y, const std::vector<float>& w,
                                 double eps) {
    double ss = 0;
    for (double v : y) ss += v * v;
    double scale = 1.0 / std::sqrt(ss / (double)y.size() + eps);
    std::vector<double> out(y.size());
    for (size_t i = 0; i < y.size(); ++i) out[i] = y[i] * scale * w[i];
    return out;
}

constexpr float kEps = 1e-6f;

// One activation buffer as the token command uses it: x, the residual stream h and the norm
// output xn, with poisoned words between and around them.
struct Act {
    uint32_t x_off, h_off, xn_off, total;
};

Act act_layout(uint32_t rows, uint32_t cols, uint32_t x_off) {
    Act a{};
    a.x_off = x_off;
    a.h_off = x_off + cols + 7;
    a.xn_off = a.h_off + rows + 5;
    a.total = a.xn_off + rows + 4;
    return a;
}

// Records one fused GEMV: Kernels::gemv_fused, or a module of gemv.comp dispatched directly.
using FusedRecord = std::function<void(CommandList&, const Matrix&, View w, View act, const Act&,
                                       bool acc, View norm_w, View counter, uint32_t counter_idx)>;

struct Expect {
    std::vector<double> y, tol, xn;  // tol: of each y row
};

// The double references of y = h0 + W · x and of its norm.
// x_bytes: the kernel rounds x to bytes (X_INT8), the reference too (see test::round_x_bytes).
Expect reference(const Matrix& m, const std::vector<float>& act, const Act& a, bool acc,
                 const std::vector<float>& norm_w, bool x_bytes = false) {
    std::vector<float> x(act.begin() + a.x_off, act.begin() + a.x_off + m.cols), dx(m.cols, 0.f);
    if (x_bytes) {
        test::BytesX b = test::round_x_bytes(x.data(), m.cols);
        x = b.values;
        dx = b.scale;
    }
    Expect e;
    e.y.assign(m.rows, 0);
    e.tol.assign(m.rows, 0);
    for (uint32_t r = 0; r < m.rows; ++r) {
        double mag = 0, flip = 0;
        for (uint32_t c = 0; c < m.cols; ++c) {
            const double w = m.deq[(size_t)r * m.cols + c];
            const double p = w * x[c];
            e.y[r] += p;
            mag += std::fabs(p);
            flip = std::max(flip, std::fabs(w) * dx[c]);
        }
        if (acc) e.y[r] += act[a.h_off + r];
        e.tol[r] = 1e-5 * mag + 1e-5 + 4 * flip;
    }
    if (!norm_w.empty()) e.xn = rms_norm_ref(e.y, norm_w, kEps);
    return e;
}

// Every poisoned word outside [h, h + rows) and [xn, xn + rows) (when normed) still poisoned,
// the inputs untouched.
void check_untouched(const std::vector<float>& before, const std::vector<float>& out, const Act& a,
                     uint32_t rows, bool normed) {
    for (uint32_t i = 0; i < a.total; ++i) {
        bool h = i >= a.h_off && i < a.h_off + rows;
        bool xn = normed && i >= a.xn_off && i < a.xn_off + rows;
        if (h || xn) continue;
        ASSERT_EQ(test::bits(out[i]), test::bits(before[i])) << "word " << i << " changed";
    }
}

// y within the GEMV tolerance of the existing kernel tests; xn tight against the norm of the
// device's own y (the norm's arithmetic alone), and against the reference through y's error.
void check_outputs(const Expect& e, const std::vector<float>& out, const Act& a,
                   const std::vector<float>& norm_w, const std::string& what) {
    const uint32_t rows = (uint32_t)e.y.size();
    std::vector<double> y_dev(rows);
    for (uint32_t r = 0; r < rows; ++r) {
        float got = out[a.h_off + r];
        ASSERT_TRUE(std::isfinite(got)) << what << " y row " << r;
        ASSERT_NEAR(got, e.y[r], e.tol[r]) << what << " y row " << r;
        y_dev[r] = got;
    }
    if (norm_w.empty()) return;
    std::vector<double> xn_dev = rms_norm_ref(y_dev, norm_w, kEps);
    double ss = 0, err = 0;
    for (uint32_t r = 0; r < rows; ++r) {
        ss += e.y[r] * e.y[r];
        err += e.tol[r];
    }
    const double rms = std::sqrt(ss / rows + kEps);
    for (uint32_t r = 0; r < rows; ++r) {
        float got = out[a.xn_off + r];
        ASSERT_TRUE(std::isfinite(got)) << what << " xn row " << r;
        ASSERT_NEAR(got, xn_dev[r], 2e-5 * std::max(1.0, std::fabs(xn_dev[r])))
            << what << " xn row " << r << " against the norm of the device's y";
        // y's errors move xn by about their size over the rms, and the rms by their mean.
        double tol = (e.tol[r] + err / rows) / rms * std::fabs(norm_w[r]) + 2e-5;
        ASSERT_NEAR(got, e.xn[r], tol) << what << " xn row " << r << " against the reference";
    }
}

// Runs one fused GEMV over random data in the token command's layout and checks it all.
void check_fused(Device& dev, const FusedRecord& record, const Matrix& m, uint32_t x_off, bool acc,
                 bool x_bytes = false) {
    const std::string what = fmt::format("{} {}x{} x_off {} acc {} x in bytes {}",
                                         qtype_name(m.type), m.rows, m.cols, x_off, acc, x_bytes);
    const Act a = act_layout(m.rows, m.cols, x_off);
    std::vector<float> act(a.total);
    for (float& v : act) std::memcpy(&v, &test::kPoison, 4);
    std::mt19937 rng(m.rows * 7 + m.cols + x_off);
    auto fill = [&](uint32_t off, uint32_t n, float scale) {
        std::vector<float> v = randn(n, rng, scale);
        std::copy(v.begin(), v.end(), act.begin() + off);
    };
    fill(a.x_off, m.cols, 1.f);
    if (acc) fill(a.h_off, m.rows, 2.f);  // otherwise h stays poisoned: every row must be written
    const std::vector<float> norm_w = randn(m.rows, rng, 0.5f);
    const Expect e = reference(m, act, a, acc, norm_w, x_bytes);

    Buffer wb = test::to_device(dev, m.blocks);
    Buffer ab = test::to_device(dev, act);
    Buffer nb = test::to_device(dev, norm_w);
    Buffer cb = test::to_device(dev, std::vector<uint32_t>{0, 0, 0, 0});
    test::run(dev, [&](CommandList& cl) {
        record(cl, m, view(wb), view(ab), a, acc, view(nb), view(cb), 2);
    });
    auto out = test::from_device<float>(dev, ab, a.total);
    check_untouched(act, out, a, m.rows, true);
    check_outputs(e, out, a, norm_w, what);
    auto counter = test::from_device<uint32_t>(dev, cb, 4);
    for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(counter[i], 0u) << what << " counter word " << i;
}

void record_launcher(Kernels& K, CommandList& cl, const Matrix& m, View w, View act, const Act& a,
                     bool acc, View norm_w, View counter, uint32_t counter_idx) {
    Kernels::GemvFusion fu;
    fu.norm_w = norm_w;
    fu.counter = counter;
    fu.counter_idx = counter_idx;
    fu.xn_off = a.xn_off;
    fu.eps = kEps;
    K.gemv_fused(cl,
                 {.type = m.type,
                  .w = w,
                  .rows = m.rows,
                  .cols = m.cols,
                  .x = act,
                  .x_off = a.x_off,
                  .y = act,
                  .y_off = a.h_off,
                  .accumulate = acc},
                 fu);
}

// The launcher as check_fused() records it.
auto launcher(Kernels& K) {
    return
        [&K](CommandList& cl, const Matrix& m, View w, View act, const Act& a, bool acc, View nw,
             View cnt, uint32_t idx) { record_launcher(K, cl, m, w, act, a, acc, nw, cnt, idx); };
}

struct FusedCase {
    QType type;
    uint32_t rows, cols;
};

std::string case_name(const FusedCase& c) {
    return std::string(qtype_name(c.type)) + "_" + std::to_string(c.rows) + "x" +
           std::to_string(c.cols);
}

// x_off 5: x read float by float; 8: as vec4s. One of the two a case (a pipeline each, compiled
// at the first run of the suite), alternating so each format and variant sees both.
uint32_t x_offset(const FusedCase& c) {
    return c.rows % 2 ? 5u : 8u;
}

// Accumulating, as the token command does, and writing (h poisoned before); over x rounded to
// bytes where the launcher picks that on this device.
void check_launcher_path(Kernels& K, Device& dev, const FusedCase& c, uint32_t seed) {
    const Matrix m = make_matrix(c.type, c.rows, c.cols, seed + c.rows + c.cols);
    auto rec = launcher(K);
    const bool bytes = K.gemv_x_for(c.type, c.cols) == Kernels::GemvX::bytes;
    for (bool acc : {true, false}) check_fused(dev, rec, m, x_offset(c), acc, bytes);
}

class GemvFused : public ::testing::TestWithParam<FusedCase> {};

TEST_P(GemvFused, NormEpilogueMatchesReference) {
    VK_TEST_DEVICE();
    check_launcher_path(K, dev, GetParam(), 11);
}

// The same over x rounded to bytes (Kernels::gemv_x), where the device and the build have it.
void check_norm_path(Kernels& K, Device& dev, const FusedCase& c, Kernels::GemvX path) {
    test::Scoped scope(K.tuning.gemv_x, path);
    if (K.gemv_x_for(c.type, c.cols) != path) GTEST_SKIP() << "not on this device or build";
    const Matrix m = make_matrix(c.type, c.rows, c.cols, 19 + c.rows + c.cols);
    auto rec = launcher(K);
    for (bool acc : {true, false})
        check_fused(dev, rec, m, x_offset(c), acc, path == Kernels::GemvX::bytes);
}

TEST_P(GemvFused, NormEpilogueOverBytesInRowGroups) {
    VK_TEST_DEVICE();
    test::Scoped groups(K.tuning.gemv_groups, 4);
    check_norm_path(K, dev, GetParam(), Kernels::GemvX::bytes);
}

// Workgroups that each take several row blocks (Kernels::gemv_grid) count themselves once: the
// last of them normalizes every row.
TEST_P(GemvFused, NormEpilogueOverASmallGrid) {
    VK_TEST_DEVICE();
    test::Scoped groups(K.tuning.gemv_groups, 4);
    test::Scoped grid(K.tuning.gemv_grid, 3);
    check_launcher_path(K, dev, GetParam(), 23);
}

TEST_P(GemvFused, NormEpilogueOverBytes) {
    VK_TEST_DEVICE();
    check_norm_path(K, dev, GetParam(), Kernels::GemvX::bytes);
}

// Rows not a multiple of the 4 rows a workgroup (2 rows: one workgroup, which is also the last;
// 603 rows: more than one batch of the norm's loads); rows of several blocks; long rows that take
// several passes of the workgroup. Few cases a format: each is a pipeline per variant, compiled at
// the suite's first run (seconds on lavapipe); GemvFusedModule adds other shapes of Q4_0, Q8_0,
// Q5_K and Q6_K.
INSTANTIATE_TEST_SUITE_P(
    Formats, GemvFused,
    ::testing::Values(FusedCase{QType::F32, 603, 45}, FusedCase{QType::F32, 66, 300},
                      FusedCase{QType::F16, 5, 77}, FusedCase{QType::F16, 34, 200},
                      FusedCase{QType::Q4_0, 2, 32}, FusedCase{QType::Q8_0, 130, 1024},
                      FusedCase{QType::Q4_K, 67, 768}, FusedCase{QType::Q4_K, 258, 4096},
                      FusedCase{QType::Q5_K, 13, 512}, FusedCase{QType::Q6_K, 6, 3072},
                      FusedCase{QType::Q6_K, 70, 2048}),
    [](const auto& info) { return case_name(info.param); });

// gemv.comp's fused modules dispatched directly: the shared-memory reductions (no subgroup
// arithmetic), other workgroup sizes and rows a workgroup, and workgroups past the last row (a
// grid's overshoot), which leave at once and must not be counted.
struct FusedModuleCase {
    QType type;
    uint32_t rows, cols, wg, rows_per_group, extra_groups;
    bool subgroup;
};

class GemvFusedModule : public ::testing::TestWithParam<FusedModuleCase> {};

TEST_P(GemvFusedModule, MatchesReference) {
    VK_TEST_DEVICE();
    const FusedModuleCase s = GetParam();
    if (s.subgroup && !dev.features().subgroup_arithmetic) GTEST_SKIP() << "no subgroup arithmetic";
    if (s.wg > dev.features().max_workgroup_invocations) GTEST_SKIP() << "workgroup too large";
    Pipelines& pipes = *test::env().pipes;
    const Matrix m = make_matrix(s.type, s.rows, s.cols, 19 + s.rows);
    auto rec = [&](CommandList& cl, const Matrix& mm, View w, View act, const Act& a, bool acc,
                   View nw, View cnt, uint32_t idx) {
        struct Push {  // gemv.comp's push constants of the fused variants
            uint32_t ncols, nrows, row_bytes, x_off, y_off, mode, xn_off, counter_idx;
            float eps;
        } p{mm.cols,  mm.rows, (uint32_t)row_size(mm.type, mm.cols),
            a.x_off,  a.h_off, acc ? 1u : 0u,
            a.xn_off, idx,     kEps};
        std::string name = "gemv_" + std::string(qtype_name(mm.type));
        for (char& ch : name) ch = (char)std::tolower((unsigned char)ch);
        name += "_norm";
        if (s.subgroup) name += "_sg";
        uint32_t x16 = a.x_off % 4 == 0 ? 1 : 0;
        const Kernel& k =
            pipes.get(name, 5, sizeof(Push), {s.wg, s.rows_per_group, 0, x16, 1, 0, 1});
        uint32_t groups = (mm.rows + s.rows_per_group - 1) / s.rows_per_group + s.extra_groups;
        cl.dispatch(k, {w, act, act, nw, cnt}, p, groups);
    };
    for (uint32_t x_off : {5u, 8u}) check_fused(dev, rec, m, x_off, true);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemvFusedModule,
    ::testing::Values(FusedModuleCase{QType::Q4_K, 67, 2048, 32, 4, 3, false},
                      FusedModuleCase{QType::Q4_K, 67, 2048, 64, 3, 1, true},
                      FusedModuleCase{QType::Q5_K, 13, 1024, 32, 2, 5, false},
                      FusedModuleCase{QType::Q6_K, 37, 768, 64, 4, 2, false},
                      FusedModuleCase{QType::Q8_0, 11, 96, 16, 5, 1, true},
                      FusedModuleCase{QType::Q4_0, 9, 160, 128, 2, 4, false},
                      FusedModuleCase{QType::F16, 5, 77, 32, 3, 2, false},
                      FusedModuleCase{QType::F32, 7, 45, 64, 1, 3, true},
                      // More rows than the norm's batches of 16 a thread cover at once.
                      FusedModuleCase{QType::Q4_0, 301, 64, 16, 4, 2, false}),
    [](const auto& info) {
        const FusedModuleCase& s = info.param;
        return std::string(qtype_name(s.type)) + "_" + std::to_string(s.rows) + "x" +
               std::to_string(s.cols) + "_wg" + std::to_string(s.wg) + "_r" +
               std::to_string(s.rows_per_group) + "_over" + std::to_string(s.extra_groups) +
               (s.subgroup ? "_sg" : "_tree");
    });

// The same GEMV three times in one command (a barrier between, one counter word), the command
// submitted twice: h gains six products and xn is the norm of the last h, which only a counter
// set back to 0 after each dispatch gives (a stale count never names a last workgroup, and xn
// would keep an older norm).
TEST(GemvFusedReplay, CounterResetsBetweenDispatchesAndSubmits) {
    VK_TEST_DEVICE();
    for (QType t : {QType::Q4_K, QType::Q8_0}) {
        const Matrix m = make_matrix(t, 67, 512, 23, 0.2f);
        const Act a = act_layout(m.rows, m.cols, 8);
        std::vector<float> act(a.total);
        for (float& v : act) std::memcpy(&v, &test::kPoison, 4);
        std::mt19937 rng(5);
        std::vector<float> x = randn(m.cols, rng), h0 = randn(m.rows, rng, 2.f),
                           nw = randn(m.rows, rng, 0.5f);
        std::copy(x.begin(), x.end(), act.begin() + a.x_off);
        std::copy(h0.begin(), h0.end(), act.begin() + a.h_off);
        Expect one = reference(m, act, a, false, {});
        std::vector<double> y(m.rows), tol(m.rows);
        for (uint32_t r = 0; r < m.rows; ++r) {
            y[r] = h0[r] + 6 * one.y[r];
            tol[r] = 6 * one.tol[r] + 1e-5 * std::fabs(h0[r]);
        }
        Expect e{y, tol, rms_norm_ref(y, nw, kEps)};

        Buffer wb = test::to_device(dev, m.blocks);
        Buffer ab = test::to_device(dev, act);
        Buffer nb = test::to_device(dev, nw);
        Buffer cb = test::to_device(dev, std::vector<uint32_t>{0});
        CommandList cl(dev);
        cl.begin(true);
        for (int i = 0; i < 3; ++i) {
            record_launcher(K, cl, m, view(wb), view(ab), a, true, view(nb), view(cb), 0);
            cl.barrier();
        }
        cl.end();
        cl.submit_and_wait();
        cl.submit_and_wait();
        auto out = test::from_device<float>(dev, ab, a.total);
        check_untouched(act, out, a, m.rows, true);
        check_outputs(e, out, a, nw, fmt::format("replayed {}", qtype_name(t)));
        EXPECT_EQ(test::from_device<uint32_t>(dev, cb, 1)[0], 0u);
    }
}

// Two fused GEMVs in a row on one counter word, the second reading the first one's norm as its
// x (as the gate/up GEMVs read ssm_out's); then two in the same stage on distinct words.
TEST(GemvFusedChain, TwoInARowAndTwoAtOnce) {
    VK_TEST_DEVICE();
    // The tolerance below is for F32 x; the other paths share the epilogue.
    test::Scoped scope(K.tuning.gemv_x, Kernels::GemvX::global);
    const uint32_t n = 256;  // h and xn width: both matrices are n × n
    const Matrix m1 = make_matrix(QType::Q4_K, n, n, 29, 0.1f);
    const Matrix m2 = make_matrix(QType::Q6_K, n, n, 31, 0.1f);
    // act: x at 0, h at 300, xn at 600, xn2 at 900; a second h at 1200 for the concurrent pair.
    const uint32_t x_off = 0, h_off = 300, xn_off = 600, xn2_off = 900, h2_off = 1200, total = 1500;
    std::mt19937 rng(3);
    std::vector<float> act(total);
    for (float& v : act) std::memcpy(&v, &test::kPoison, 4);
    std::vector<float> x = randn(n, rng), h = randn(n, rng, 2.f), h2 = randn(n, rng, 2.f),
                       w1 = randn(n, rng, 0.5f), w2 = randn(n, rng, 0.5f);
    std::copy(x.begin(), x.end(), act.begin() + x_off);
    std::copy(h.begin(), h.end(), act.begin() + h_off);
    std::copy(h2.begin(), h2.end(), act.begin() + h2_off);
    auto matvec = [&](const Matrix& m, const std::vector<double>& v) {
        std::vector<double> out(m.rows);
        for (uint32_t r = 0; r < m.rows; ++r)
            for (uint32_t c = 0; c < m.cols; ++c) out[r] += m.deq[(size_t)r * m.cols + c] * v[c];
        return out;
    };
    auto add = [](std::vector<double> a, const std::vector<float>& b) {
        for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
        return a;
    };
    std::vector<double> xd(x.begin(), x.end());
    // In a row: h += W1 x, xn = norm1(h); h += W2 xn, xn2 = norm2(h).
    std::vector<double> y1 = add(matvec(m1, xd), h);
    std::vector<double> xn1 = rms_norm_ref(y1, w1, kEps);
    std::vector<double> y2 = matvec(m2, xn1);
    for (uint32_t i = 0; i < n; ++i) y2[i] += y1[i];
    std::vector<double> xn2 = rms_norm_ref(y2, w2, kEps);
    // At once: h2 += W2 x with norm2 into xn (word 1) while h += W1 x with norm1 into xn2
    // (word 0).
    std::vector<double> y_a = add(matvec(m1, xd), h);
    std::vector<double> xn_a = rms_norm_ref(y_a, w1, kEps);
    std::vector<double> y_b = add(matvec(m2, xd), h2);
    std::vector<double> xn_b = rms_norm_ref(y_b, w2, kEps);

    Buffer b1 = test::to_device(dev, m1.blocks), b2 = test::to_device(dev, m2.blocks);
    Buffer nb1 = test::to_device(dev, w1), nb2 = test::to_device(dev, w2);
    Buffer cb = test::to_device(dev, std::vector<uint32_t>{0, 0});
    auto fused = [&](CommandList& cl, const Matrix& m, const Buffer& wb, View act, uint32_t xo,
                     uint32_t yo, uint32_t xno, const Buffer& nb, uint32_t word) {
        Kernels::GemvFusion fu;
        fu.norm_w = view(nb);
        fu.counter = view(cb);
        fu.counter_idx = word;
        fu.xn_off = xno;
        fu.eps = kEps;
        K.gemv_fused(cl,
                     {.type = m.type,
                      .w = view(wb),
                      .rows = m.rows,
                      .cols = m.cols,
                      .x = act,
                      .x_off = xo,
                      .y = act,
                      .y_off = yo,
                      .accumulate = true},
                     fu);
    };
    auto expect_near = [&](const std::vector<float>& out, uint32_t off,
                           const std::vector<double>& want, const char* what) {
        for (uint32_t i = 0; i < n; ++i) {
            ASSERT_TRUE(std::isfinite(out[off + i])) << what << " " << i;
            ASSERT_NEAR(out[off + i], want[i], 1e-4 * std::max(1.0, std::fabs(want[i])))
                << what << " " << i;
        }
    };
    {
        Buffer ab = test::to_device(dev, act);
        test::run(dev, [&](CommandList& cl) {
            fused(cl, m1, b1, view(ab), x_off, h_off, xn_off, nb1, 0);
            cl.barrier();
            fused(cl, m2, b2, view(ab), xn_off, h_off, xn2_off, nb2, 0);
        });
        auto out = test::from_device<float>(dev, ab, total);
        expect_near(out, h_off, y2, "in a row: h");
        expect_near(out, xn_off, xn1, "in a row: xn");
        expect_near(out, xn2_off, xn2, "in a row: xn2");
        EXPECT_EQ(out[h2_off], h2[0]) << "in a row: the other h changed";
    }
    {
        Buffer ab = test::to_device(dev, act);
        test::run(dev, [&](CommandList& cl) {
            fused(cl, m1, b1, view(ab), x_off, h_off, xn2_off, nb1, 0);
            fused(cl, m2, b2, view(ab), x_off, h2_off, xn_off, nb2, 1);
        });
        auto out = test::from_device<float>(dev, ab, total);
        expect_near(out, h_off, y_a, "at once: h");
        expect_near(out, xn2_off, xn_a, "at once: norm of h");
        expect_near(out, h2_off, y_b, "at once: h2");
        expect_near(out, xn_off, xn_b, "at once: norm of h2");
    }
    auto counter = test::from_device<uint32_t>(dev, cb, 2);
    EXPECT_EQ(counter[0], 0u);
    EXPECT_EQ(counter[1], 0u);
}

}  // namespace
}  // namespace dl::vk
