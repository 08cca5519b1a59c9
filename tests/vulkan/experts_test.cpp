// The mixture-of-experts kernels against references written here: the router's choice (ids and
// renormalised weights, ties to the lower index, more experts than threads) and the GEMVs over
// the chosen experts' rows (each slot apart, each slot over its own input, the weighted sum,
// added to what y held), in every weight format, with rows that do not fill the last
// workgroup and outputs poisoned around what must be written.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <tuple>

#include "moe_reference.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using test::randn;
using test::reference_route;

struct RouteCase {
    uint32_t n_expert, k, rows;
    bool ties;
};

class MoeRoute : public ::testing::TestWithParam<RouteCase> {};

// Every form of the top-k: the ranks, the merged lists and the rounds by subgroup reductions
// (where the device has them), the rounds by the shared-memory tree and the ranks without them.
struct RouteForm {
    bool subgroups;
    Tuning::RouteForm form;
    const char* name;
};
constexpr RouteForm kRouteForms[] = {
    {true, Tuning::RouteForm::rank, "ranks"},
    {true, Tuning::RouteForm::merge, "merged lists"},
    {true, Tuning::RouteForm::rounds, "subgroup rounds"},
    {false, Tuning::RouteForm::rounds, "shared tree"},
    {false, Tuning::RouteForm::rank, "ranks, no subgroups"},
};

TEST_P(MoeRoute, MatchesTheReference) {
    VK_TEST_DEVICE();
    const auto [n, k, rows, ties] = GetParam();
    const uint32_t x_off = 5, route_off = 3;
    std::vector<float> x = randn(x_off + (size_t)rows * n, 7 + n + k, 2.f);
    if (ties)  // a few values repeated: among the largest and elsewhere
        for (uint32_t r = 0; r < rows; ++r)
            for (uint32_t e = 0; e < n; e += 3) x[x_off + r * n + e] = (e % 2) ? 1.5f : 3.f;
    Buffer xb = test::to_device(dev, x);
    const size_t words = route_off + (size_t)rows * 2 * k;
    for (const RouteForm& f : kRouteForms) {
        SCOPED_TRACE(f.name);
        test::Scoped subgroups(K.tuning.moe_route_subgroups, f.subgroups);
        test::Scoped form(K.tuning.moe_route_form, f.form);
        Buffer route = test::poisoned(dev, words + 4);
        test::run(dev, [&](CommandList& cl) {
            K.moe_route(cl, view(xb), x_off, n, k, view(route), route_off, rows);
        });
        auto out = test::from_device<uint32_t>(dev, route, words + 4);
        for (uint32_t i = 0; i < route_off; ++i) ASSERT_EQ(out[i], test::kPoison) << "wrote before";
        for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(out[words + i], test::kPoison) << "wrote past";
        std::vector<uint32_t> ids;
        std::vector<double> w;
        for (uint32_t r = 0; r < rows; ++r) {
            reference_route(x.data() + x_off + r * n, n, k, ids, w);
            const uint32_t* o = out.data() + route_off + r * 2 * k;
            for (uint32_t j = 0; j < k; ++j) {
                ASSERT_EQ(o[j], ids[j]) << "row " << r << " slot " << j;
                float got;
                std::memcpy(&got, &o[k + j], 4);
                ASSERT_NEAR(got, w[j], 1e-6 * (1 + w[j])) << "row " << r << " slot " << j;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeRoute,
                         ::testing::Values(RouteCase{64, 8, 3, false}, RouteCase{64, 8, 2, true},
                                           RouteCase{10, 2, 1, false}, RouteCase{8, 8, 2, true},
                                           RouteCase{300, 1, 2, false}, RouteCase{600, 8, 2, true},
                                           RouteCase{128, 8, 4, true}, RouteCase{512, 8, 2, true},
                                           RouteCase{1100, 8, 1, true}),
                         [](const auto& info) {
                             const RouteCase& c = info.param;
                             return fmt::format("e{}k{}r{}{}", c.n_expert, c.k, c.rows,
                                                c.ties ? "_ties" : "");
                         });

// Every logit equal: the k lowest ids (torch.topk's order on ties), each weighted 1/k, by every
// form of the top-k (a subgroup's lanes tie too, not only its winners).
TEST(MoeRouteTies, AllEqualTakeTheLowestIds) {
    VK_TEST_DEVICE();
    const uint32_t n = 300, k = 3;
    Buffer xb = test::to_device(dev, std::vector<float>(n, 0.5f));
    for (const RouteForm& f : kRouteForms) {
        test::Scoped subgroups(K.tuning.moe_route_subgroups, f.subgroups);
        test::Scoped form(K.tuning.moe_route_form, f.form);
        Buffer route = test::poisoned(dev, 2 * k);
        test::run(dev,
                  [&](CommandList& cl) { K.moe_route(cl, view(xb), 0, n, k, view(route), 0, 1); });
        auto out = test::from_device<uint32_t>(dev, route, 2 * k);
        for (uint32_t j = 0; j < k; ++j) {
            EXPECT_EQ(out[j], j) << f.name;
            float w;
            std::memcpy(&w, &out[k + j], 4);
            EXPECT_NEAR(w, 1.0 / k, 1e-6) << f.name;
        }
    }
}

// NaN logits rank below every number in the rank form (its order must be total, or a place of
// the choice goes unwritten and the experts' GEMVs read an id left in memory): the k best of the
// rest, in every group of 32 and across groups; the weights finite and summing to one.
TEST(MoeRouteNaN, RanksBelowEveryNumber) {
    VK_TEST_DEVICE();
    const uint32_t n = 100, k = 8;
    std::vector<float> x = randn(n, 31, 2.f);
    for (uint32_t e = 0; e < n; e += 2) x[e] = std::nanf("");
    x[1] = -std::numeric_limits<float>::infinity();
    std::vector<float> clean = x;
    for (float& v : clean)
        if (std::isnan(v)) v = -std::numeric_limits<float>::infinity();
    std::vector<uint32_t> ids;
    std::vector<double> w;
    reference_route(clean.data(), n, k, ids, w);
    Buffer xb = test::to_device(dev, x);
    for (bool subgroups : {true, false}) {
        test::Scoped sg(K.tuning.moe_route_subgroups, subgroups);
        test::Scoped form(K.tuning.moe_route_form, Tuning::RouteForm::rank);
        Buffer route = test::poisoned(dev, 2 * k);
        test::run(dev,
                  [&](CommandList& cl) { K.moe_route(cl, view(xb), 0, n, k, view(route), 0, 1); });
        auto out = test::from_device<uint32_t>(dev, route, 2 * k);
        double sum = 0;
        for (uint32_t j = 0; j < k; ++j) {
            EXPECT_EQ(out[j], ids[j]) << "subgroups " << subgroups << " slot " << j;
            float got;
            std::memcpy(&got, &out[k + j], 4);
            EXPECT_TRUE(std::isfinite(got)) << "slot " << j;
            sum += got;
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
    }
}

// One token's router GEMV with the choice in its last workgroup (moe_router.comp): the logits
// against double sums, the choice against the reference on those logits, nothing written
// around them, the counter back at 0, and a second token through the same counter; router rows
// that do not fill the last workgroup, more experts than threads, every top-k form, xn read as
// floats and as vec4s.
struct RouterCase {
    uint32_t n_expert, k, n_embd;
};

class MoeRouter : public ::testing::TestWithParam<RouterCase> {};

TEST_P(MoeRouter, LogitsAndChoiceMatchTheReference) {
    VK_TEST_DEVICE();
    const auto [n, k, cols] = GetParam();
    const std::vector<float> w = randn((size_t)n * cols, 3 + n, 1.f / std::sqrt((float)cols));
    Buffer wb = test::to_device(dev, w);
    // The shared expert's gate, at float 7 of a buffer of its own (the driver's parameters).
    const uint32_t gate_off = 7;
    const std::vector<float> gate = randn(gate_off + cols, 11 + n, 1.f / std::sqrt((float)cols));
    Buffer gb = test::to_device(dev, gate);
    // act: xn at 3 (read as floats) or 4 (as vec4s where cols allow), the logits at xn_off + cols
    // + 5, the route after them, poison around all.
    for (int form_gate = 0; form_gate < 20; ++form_gate) {
        const RouteForm& rf = kRouteForms[form_gate / 4];
        const bool with_gate = form_gate & 2;
        const uint32_t xn_off = form_gate & 1 ? 4 : 3, logit_off = xn_off + cols + 5,
                       route_off = logit_off + n + 3;
        const size_t words = route_off + 2 * k + 4;
        SCOPED_TRACE(::testing::Message()
                     << rf.name << " gate " << with_gate << " xn at " << xn_off);
        test::Scoped subgroups(K.tuning.moe_route_subgroups, rf.subgroups);
        test::Scoped form(K.tuning.moe_route_form, rf.form);
        Buffer counter = dev.create_buffer(8, MemoryKind::device);
        dev.fill(counter, 0, 8, 0);
        for (uint32_t token = 0; token < 2; ++token) {
            Buffer act = test::poisoned(dev, words);
            const std::vector<float> xn = randn(cols, 40 + token, 1.f);
            dev.upload(act, (uint64_t)xn_off * 4, xn.data(), (uint64_t)cols * 4);
            test::run(dev, [&](CommandList& cl) {
                K.moe_router(cl, {.w = view(wb),
                                  .act = view(act),
                                  .route = view(act),
                                  .counter = view(counter),
                                  .gate_w = view(gb),
                                  .n_expert = n,
                                  .k = k,
                                  .n_embd = cols,
                                  .xn_off = xn_off,
                                  .logit_off = logit_off,
                                  .route_off = route_off,
                                  .counter_idx = 1,
                                  .gate_off = with_gate ? gate_off : Kernels::kNone});
            });
            auto out = test::from_device<uint32_t>(dev, act, words);
            auto f = test::from_device<float>(dev, act, words);
            for (uint32_t i = xn_off + cols; i < logit_off; ++i)
                ASSERT_EQ(out[i], test::kPoison) << "wrote between xn and the logits";
            for (uint32_t i = logit_off + n + (with_gate ? 1 : 0); i < route_off; ++i)
                ASSERT_EQ(out[i], test::kPoison) << "wrote past the logits";
            if (with_gate) {
                double ref = 0, mag = 0;
                for (uint32_t c = 0; c < cols; ++c) {
                    ref += (double)gate[gate_off + c] * xn[c];
                    mag += std::fabs((double)gate[gate_off + c] * xn[c]);
                }
                ASSERT_NEAR(f[logit_off + n], ref, 1e-5 * (1 + mag)) << "the gate's logit";
            }
            for (size_t i = route_off + 2 * k; i < words; ++i)
                ASSERT_EQ(out[i], test::kPoison) << "wrote past the route";
            for (uint32_t e = 0; e < n; ++e) {
                double ref = 0, mag = 0;
                for (uint32_t c = 0; c < cols; ++c) {
                    ref += (double)w[(size_t)e * cols + c] * xn[c];
                    mag += std::fabs((double)w[(size_t)e * cols + c] * xn[c]);
                }
                ASSERT_NEAR(f[logit_off + e], ref, 1e-5 * (1 + mag)) << "logit " << e;
            }
            std::vector<uint32_t> ids;
            std::vector<double> wt;
            reference_route(f.data() + logit_off, n, k, ids, wt);
            for (uint32_t j = 0; j < k; ++j) {
                ASSERT_EQ(out[route_off + j], ids[j]) << "token " << token << " slot " << j;
                ASSERT_NEAR(f[route_off + k + j], wt[j], 1e-6 * (1 + wt[j])) << "slot " << j;
            }
            const auto c = test::from_device<uint32_t>(dev, counter, 2);
            ASSERT_EQ(c[0], 0u) << "touched another counter";
            ASSERT_EQ(c[1], 0u) << "the counter is not back at 0";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeRouter,
                         ::testing::Values(RouterCase{64, 8, 128}, RouterCase{10, 2, 96},
                                           RouterCase{600, 8, 64}, RouterCase{256, 8, 2048}),
                         [](const auto& info) {
                             const RouterCase& c = info.param;
                             return fmt::format("e{}k{}n{}", c.n_expert, c.k, c.n_embd);
                         });

struct ExpertCase {
    QType type;
    uint32_t rows, cols, n_expert, k;
};

class ExpertGemv : public ::testing::TestWithParam<ExpertCase> {};

// Three window rows, each with its own k experts (written here, ids ascending); every mode of
// gemv_experts against double sums over the dequantized weights.
TEST_P(ExpertGemv, SlotsAndWeightedSumsMatchTheReference) {
    VK_TEST_DEVICE();
    const auto [t, rows, cols, n_expert, k] = GetParam();
    if (!Kernels::experts_supported(t, cols)) GTEST_SKIP();
    const uint32_t n_rows = 3, all_rows = rows * n_expert;
    const auto [wq, deq] =
        test::quantize_rows(t, randn((size_t)all_rows * cols, 31 + rows), all_rows, cols);
    Buffer w = test::to_device(dev, wq);
    // Each row's experts: k distinct ids (the last expert always among the first row's, so the
    // stack's last rows are read), and weights summing to one.
    std::mt19937 rng(5 + k);
    const uint32_t route_off = 2;
    std::vector<uint32_t> route(route_off + n_rows * 2 * k);
    std::vector<std::vector<uint32_t>> ids(n_rows);
    std::vector<std::vector<float>> wt(n_rows);
    for (uint32_t r = 0; r < n_rows; ++r) {
        std::vector<uint32_t> all(n_expert);
        std::iota(all.begin(), all.end(), 0u);
        std::shuffle(all.begin(), all.end(), rng);
        if (r == 0) std::swap(*std::find(all.begin(), all.end(), n_expert - 1), all[0]);
        ids[r].assign(all.begin(), all.begin() + k);
        std::sort(ids[r].begin(), ids[r].end());
        float s = 0;
        for (uint32_t j = 0; j < k; ++j) s += wt[r].emplace_back(0.1f + (float)(j + r) / k);
        for (uint32_t j = 0; j < k; ++j) {
            wt[r][j] /= s;
            route[route_off + r * 2 * k + j] = ids[r][j];
            std::memcpy(&route[route_off + r * 2 * k + k + j], &wt[r][j], 4);
        }
    }
    // After the choice, the pairs in another order (grouped by expert, the highest first): the
    // slot GEMVs read their vectors through it and must still store each at its pair's place.
    const uint32_t perm_off = (uint32_t)route.size();
    for (uint32_t e = n_expert; e-- > 0;)
        for (uint32_t pr = n_rows * k; pr-- > 0;)
            if (ids[pr / k][pr % k] == e) route.push_back(pr);
    Buffer rb = test::to_device(dev, route);
    const uint32_t x_off = 4;
    // Inputs: a row's (n_rows rows) and each slot's own (n_rows · k).
    std::vector<float> x = randn(x_off + (size_t)n_rows * k * cols, 17 + cols);
    Buffer xb = test::to_device(dev, x);
    // The same vectors as the GEMV over bytes reads them (Kernels::round_rows, here from word
    // xr_off of their own buffer), and the values they stand for: each block of 16 rounded to
    // signed bytes, 127 for its largest magnitude.
    const uint32_t xr_off = 8, nvec = n_rows * k;
    Buffer xrb = test::poisoned(dev, xr_off + nvec * Kernels::rounding_floats(cols) + 4);
    std::vector<float> xr(x);
    const test::BytesX rounded = test::round_x_bytes(x.data() + x_off, x.size() - x_off);
    std::copy(rounded.values.begin(), rounded.values.end(), xr.begin() + x_off);
    auto dot = [&](uint32_t e, uint32_t row, const float* in, double& mag) {
        double s = 0;
        mag = 0;
        for (uint32_t c = 0; c < cols; ++c) {
            const double p = (double)deq[((size_t)e * rows + row) * cols + c] * in[c];
            s += p;
            mag += std::fabs(p);
        }
        return s;
    };
    // Slots over the row's x, over their own, the sum; the slots also over the permutation. Each
    // in both forms of the batched GEMV (Tuning::gemv_batch_decode_once: a group whose vectors
    // share an expert decodes its rows once; with one expert, every group does), and over the
    // vectors rounded to bytes (block formats, devices with integer dot products).
    for (int mode = 0; mode < 15; ++mode) {
        const bool bytes = mode >= 10;
        test::Scoped x_form(K.tuning.gemv_x,
                            bytes ? Kernels::GemvX::bytes : Kernels::GemvX::global);
        if (bytes && !K.experts_read_bytes(t, cols)) break;
        test::Scoped once(K.tuning.gemv_batch_decode_once, mode >= 5 && !bytes);
        // The second form also in workgroups of 32 threads over 8 rows (each thread stores
        // several sums).
        test::Scoped threads(K.tuning.gemv_batch_threads, mode >= 5 && mode < 10 ? 32u : 0u);
        test::Scoped rows8(K.tuning.gemv_batch_rows, mode >= 5 && mode < 10 ? 8u : 0u);
        for (bool acc : {false, true}) {
            const bool own = mode % 5 == 1 || mode % 5 == 2 || mode % 5 == 4, sum = mode % 5 == 2;
            const bool permuted = mode % 5 >= 3;
            // Over bytes a product a hair from a half may round the other way.
            const double tol = bytes ? 1e-4 : 1e-5;
            const uint32_t y_off = 3;
            const size_t n_out = (size_t)(sum ? n_rows : n_rows * k) * rows;
            Buffer y = test::poisoned(dev, y_off + n_out + 4);
            std::vector<float> init(n_out, 0.f);
            if (acc) {
                init = randn(n_out, 3);
                dev.upload(y, y_off * 4, init.data(), n_out * 4);
            }
            test::run(dev, [&](CommandList& cl) {
                if (bytes) {
                    K.round_rows(cl, view(xb), x_off, view(xrb), xr_off, cols, nvec);
                    cl.barrier();
                }
                K.gemv_experts(cl, {.type = t,
                                    .w = view(w),
                                    .rows = rows,
                                    .cols = cols,
                                    .n_expert = n_expert,
                                    .k = k,
                                    .perm_off = permuted ? perm_off : Kernels::kNone,
                                    .route = view(rb),
                                    .route_off = route_off,
                                    .x = bytes ? view(xrb) : view(xb),
                                    .x_off = bytes ? xr_off : x_off,
                                    .x_per_slot = own,
                                    .x_bytes = bytes,
                                    .y = view(y),
                                    .y_off = y_off,
                                    .sum = sum,
                                    .accumulate = acc,
                                    .n_rows = n_rows});
            });
            auto out = test::from_device<float>(dev, y, y_off + n_out + 4);
            for (uint32_t i = 0; i < y_off; ++i) ASSERT_EQ(test::bits(out[i]), test::kPoison);
            for (uint32_t i = 0; i < 4; ++i)
                ASSERT_EQ(test::bits(out[y_off + n_out + i]), test::kPoison);
            for (uint32_t r = 0; r < n_rows; ++r)
                for (uint32_t row = 0; row < rows; ++row) {
                    double total = 0, total_mag = 0;
                    for (uint32_t j = 0; j < k; ++j) {
                        const float* in =
                            (bytes ? xr : x).data() + x_off + (size_t)(own ? r * k + j : r) * cols;
                        double mag;
                        const double v = dot(ids[r][j], row, in, mag);
                        if (!sum) {
                            const size_t o = ((size_t)r * k + j) * rows + row;
                            ASSERT_NEAR(out[y_off + o], v + init[o], tol * mag + 1e-5)
                                << qtype_name(t) << " row " << r << " slot " << j << " out " << row
                                << " own " << own << " acc " << acc << " permuted " << permuted
                                << " decode once " << (mode >= 5) << " bytes " << bytes;
                        }
                        total += wt[r][j] * v;
                        total_mag += wt[r][j] * mag;
                    }
                    if (sum) {
                        const size_t o = (size_t)r * rows + row;
                        ASSERT_NEAR(out[y_off + o], total + init[o], tol * total_mag + 1e-5)
                            << qtype_name(t) << " row " << r << " out " << row << " acc " << acc
                            << " decode once " << (mode >= 5) << " bytes " << bytes;
                    }
                }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, ExpertGemv,
    ::testing::Values(ExpertCase{QType::F32, 37, 64, 5, 2}, ExpertCase{QType::F16, 19, 96, 4, 3},
                      ExpertCase{QType::Q8_0, 37, 96, 9, 8}, ExpertCase{QType::Q4_0, 12, 64, 6, 1},
                      ExpertCase{QType::Q4_K, 40, 256, 9, 8}, ExpertCase{QType::Q5_K, 7, 256, 3, 2},
                      ExpertCase{QType::Q6_K, 33, 512, 5, 4},
                      // One expert: every group of the permuted pairs reads the same rows.
                      ExpertCase{QType::Q4_K, 40, 256, 1, 1}),
    [](const auto& info) {
        const ExpertCase& c = info.param;
        return fmt::format("{}_{}x{}_e{}k{}", qtype_name(c.type), c.rows, c.cols, c.n_expert, c.k);
    });

// One token's weighted sum of its experts added to h with the shared expert's gated output
// (ExpertGemv::shared_off): h + Σ_j w_j · W_e(j) · x_j + sigmoid(gate) · shared, all in one
// buffer as the token command lays them out, over both sum forms of the batched GEMV and over
// x in bytes where the device reads them; nothing written but h.
TEST(ExpertGemvShared, TheSharedExpertJoinsTheSum) {
    VK_TEST_DEVICE();
    for (QType t : {QType::F32, QType::Q4_K}) {
        const uint32_t rows = 40, cols = 256, n_expert = 6, k = 3;
        const auto [wq, deq] =
            test::quantize_rows(t, randn((size_t)rows * n_expert * cols, 5), rows * n_expert, cols);
        Buffer w = test::to_device(dev, wq);
        // act: route (k ids, k weights) at 0, x (k slots' inputs) at 8, h, shared, the gate logit.
        const uint32_t x_off = 8, h_off = x_off + k * cols, shared_off = h_off + rows + 1,
                       gate_off = shared_off + rows + 1, n_act = gate_off + 4;
        std::vector<float> act = randn(n_act, 21);
        const uint32_t ids[k] = {0, 2, 5};
        const float wt[k] = {0.5f, 0.3f, 0.2f};
        for (uint32_t j = 0; j < k; ++j) {
            std::memcpy(&act[j], &ids[j], 4);
            act[k + j] = wt[j];
        }
        act[gate_off] = -0.7f;
        for (int form = 0; form < 2; ++form) {
            SCOPED_TRACE(::testing::Message() << qtype_name(t) << " form " << form);
            test::Scoped threads(K.tuning.gemv_batch_threads, form ? 32u : 0u);
            test::Scoped rows8(K.tuning.gemv_batch_rows, form ? 8u : 0u);
            Buffer ab = test::to_device(dev, act);
            test::run(dev, [&](CommandList& cl) {
                K.gemv_experts(cl, {.type = t,
                                    .w = view(w),
                                    .rows = rows,
                                    .cols = cols,
                                    .n_expert = n_expert,
                                    .k = k,
                                    .route = view(ab),
                                    .x = view(ab),
                                    .x_off = x_off,
                                    .x_per_slot = true,
                                    .shared_off = shared_off,
                                    .gate_off = gate_off,
                                    .y = view(ab),
                                    .y_off = h_off,
                                    .sum = true,
                                    .accumulate = true});
            });
            auto out = test::from_device<float>(dev, ab, n_act);
            for (uint32_t i = 0; i < n_act; ++i) {
                if (i < h_off || i >= h_off + rows) {
                    ASSERT_EQ(test::bits(out[i]), test::bits(act[i])) << "wrote at " << i;
                }
            }
            const double g = 1 / (1 + std::exp(0.7));
            for (uint32_t r = 0; r < rows; ++r) {
                double s = act[h_off + r] + g * act[shared_off + r], mag = std::fabs(s);
                for (uint32_t j = 0; j < k; ++j)
                    for (uint32_t c = 0; c < cols; ++c) {
                        const double v = (double)wt[j] *
                                         deq[((size_t)ids[j] * rows + r) * cols + c] *
                                         act[x_off + j * cols + c];
                        s += v;
                        mag += std::fabs(v);
                    }
                ASSERT_NEAR(out[h_off + r], s, 1e-5 * (1 + mag)) << "row " << r;
            }
        }
    }
}

// A stack of experts of 2R rows each (gate and up fused, gate first): each half read alone.
TEST(ExpertGemvFused, EachHalfOfTheExpertsRows) {
    VK_TEST_DEVICE();
    const QType t = QType::Q4_K;
    const uint32_t R = 24, cols = 256, n_expert = 4, k = 2;
    const auto [wq, deq] =
        test::quantize_rows(t, randn((size_t)2 * R * n_expert * cols, 3), 2 * R * n_expert, cols);
    Buffer w = test::to_device(dev, wq);
    const std::vector<uint32_t> route = {1, 3, 0x3f000000u, 0x3f000000u};  // experts 1 and 3
    Buffer rb = test::to_device(dev, route);
    std::vector<float> x = randn(cols, 9);
    Buffer xb = test::to_device(dev, x);
    for (uint32_t half : {0u, 1u}) {
        Buffer y = test::poisoned(dev, k * R + 4);
        test::run(dev, [&](CommandList& cl) {
            K.gemv_experts(cl, {.type = t,
                                .w = view(w),
                                .rows = R,
                                .cols = cols,
                                .n_expert = n_expert,
                                .k = k,
                                .expert_rows = 2 * R,
                                .first_row = half * R,
                                .route = view(rb),
                                .x = view(xb),
                                .y = view(y)});
        });
        auto out = test::from_device<float>(dev, y, k * R + 4);
        for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(test::bits(out[k * R + i]), test::kPoison);
        for (uint32_t j = 0; j < k; ++j)
            for (uint32_t r = 0; r < R; ++r) {
                const size_t row = (size_t)route[j] * 2 * R + half * R + r;
                double s = 0, mag = 0;
                for (uint32_t c = 0; c < cols; ++c) {
                    s += (double)deq[row * cols + c] * x[c];
                    mag += std::fabs((double)deq[row * cols + c] * x[c]);
                }
                ASSERT_NEAR(out[j * R + r], s, 1e-5 * mag + 1e-5)
                    << "half " << half << " slot " << j;
            }
    }
}

// The token's down projection over a SwiGLU's gates and ups (ExpertGemv::up_off): each slot's
// vector SiLU(gate) · up formed as it is read, weighted and summed into y, in F32 x and Q4_K
// weights; a misaligned up_off is refused.
TEST(ExpertGemvSwiGLU, TheWeightedSumOverGatesAndUps) {
    VK_TEST_DEVICE();
    const QType t = QType::Q4_K;
    const uint32_t R = 40, cols = 256, n_expert = 5, k = 3, n_rows = 2;
    const auto [wq, deq] =
        test::quantize_rows(t, randn((size_t)R * n_expert * cols, 21), R * n_expert, cols);
    Buffer w = test::to_device(dev, wq);
    const std::vector<std::vector<uint32_t>> ids = {{0, 2, 4}, {1, 3, 4}};
    const std::vector<std::vector<float>> wt = {{0.5f, 0.3f, 0.2f}, {0.1f, 0.6f, 0.3f}};
    std::vector<uint32_t> route(n_rows * 2 * k);
    for (uint32_t r = 0; r < n_rows; ++r)
        for (uint32_t j = 0; j < k; ++j) {
            route[r * 2 * k + j] = ids[r][j];
            std::memcpy(&route[r * 2 * k + k + j], &wt[r][j], 4);
        }
    Buffer rb = test::to_device(dev, route);
    const uint32_t x_off = 4, slots = n_rows * k * cols, up_off = x_off + slots + 8;
    std::vector<float> x = randn(up_off + slots, 33);
    Buffer xb = test::to_device(dev, x);
    Buffer y = test::poisoned(dev, n_rows * R + 4);
    Kernels::ExpertGemv g{.type = t,
                          .w = view(w),
                          .rows = R,
                          .cols = cols,
                          .n_expert = n_expert,
                          .k = k,
                          .route = view(rb),
                          .x = view(xb),
                          .x_off = x_off,
                          .x_per_slot = true,
                          .up_off = up_off,
                          .y = view(y),
                          .sum = true,
                          .n_rows = n_rows};
    test::run(dev, [&](CommandList& cl) { K.gemv_experts(cl, g); });
    auto out = test::from_device<float>(dev, y, n_rows * R + 4);
    for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(test::bits(out[n_rows * R + i]), test::kPoison);
    for (uint32_t r = 0; r < n_rows; ++r)
        for (uint32_t row = 0; row < R; ++row) {
            double s = 0, mag = 0;
            for (uint32_t j = 0; j < k; ++j)
                for (uint32_t c = 0; c < cols; ++c) {
                    const size_t i = (size_t)(r * k + j) * cols + c;
                    const double gt = x[x_off + i], v = gt / (1 + std::exp(-gt)) * x[up_off + i];
                    const double p = (double)deq[((size_t)ids[r][j] * R + row) * cols + c] * v;
                    s += wt[r][j] * p;
                    mag += wt[r][j] * std::fabs(p);
                }
            ASSERT_NEAR(out[r * R + row], s, 1e-5 * mag + 1e-5) << "row " << r << " out " << row;
        }
    g.up_off = up_off + 1;
    EXPECT_THROW(test::run(dev, [&](CommandList& cl) { K.gemv_experts(cl, g); }), Error);
}

// h += sigmoid(w · xn) · shared, rows of more values than the workgroup has threads; and the
// same followed by xn = RMSNorm(h) · norm_w of the new rows.
TEST(SharedExpertAdd, MatchesTheReference) {
    VK_TEST_DEVICE();
    for (bool with_norm : {false, true})
        for (uint32_t n : {40u, 600u}) {
            const uint32_t rows = 3, w_off = 2, norm_off = w_off + n + 1, xn = 5;
            const uint32_t sh = xn + rows * n, h = sh + rows * n;
            const float eps = 1e-5f;
            std::vector<float> w = randn(norm_off + n, 4, 0.1f), act = randn(h + rows * n + 4, 8);
            Buffer wb = test::to_device(dev, w), ab = test::to_device(dev, act);
            test::run(dev, [&](CommandList& cl) {
                K.shared_expert_add(cl, view(wb), w_off, view(ab), xn, sh, h, n, rows,
                                    with_norm ? norm_off : Kernels::kNone, eps);
            });
            auto out = test::from_device<float>(dev, ab, act.size());
            for (uint32_t i = with_norm ? sh : 0; i < h; ++i)
                ASSERT_EQ(out[i], act[i]) << "changed its inputs";
            for (uint32_t i = h + rows * n; i < act.size(); ++i) ASSERT_EQ(out[i], act[i]);
            for (uint32_t r = 0; r < rows; ++r) {
                double z = 0, ss = 0;
                for (uint32_t i = 0; i < n; ++i) z += (double)w[w_off + i] * act[xn + r * n + i];
                const double g = 1 / (1 + std::exp(-z));
                std::vector<double> hn(n);
                for (uint32_t i = 0; i < n; ++i) {
                    hn[i] = act[h + r * n + i] + g * act[sh + r * n + i];
                    ss += hn[i] * hn[i];
                    ASSERT_NEAR(out[h + r * n + i], hn[i], 1e-5 * (1 + std::fabs(hn[i])))
                        << "n " << n << " row " << r << " norm " << with_norm;
                }
                const double rs = 1 / std::sqrt(ss / n + eps);
                for (uint32_t i = 0; i < n; ++i) {
                    const double want =
                        with_norm ? hn[i] * rs * w[norm_off + i] : act[xn + r * n + i];
                    ASSERT_NEAR(out[xn + r * n + i], want, 1e-5 * (1 + std::fabs(want)))
                        << "xn, n " << n << " row " << r << " norm " << with_norm;
                }
            }
        }
}

// The pairs of a window's choice grouped by expert: a permutation of the pairs along which the
// experts never decrease; many rows, more pairs than the workgroup has threads.
// And the table of the grouped GEMM tiles: each expert's run of pairs cut into tiles of up to
// kExpertTileRows, in expert order (512 experts: two a thread in the sums).
TEST(MoeSort, GroupsThePairsByExpert) {
    VK_TEST_DEVICE();
    for (auto [n_expert, k, rows] :
         {std::tuple{8u, 2u, 5u}, {256u, 8u, 300u}, {3u, 3u, 1u}, {512u, 8u, 700u}}) {
        std::mt19937 rng(n_expert + rows);
        const uint32_t route_off = 7, perm_off = route_off + rows * 2 * k + 3;
        std::vector<uint32_t> route(perm_off + rows * k + 4, test::kPoison);
        std::vector<uint32_t> all(n_expert);
        std::iota(all.begin(), all.end(), 0u);
        for (uint32_t r = 0; r < rows; ++r) {
            std::shuffle(all.begin(), all.end(), rng);
            std::sort(all.begin(), all.begin() + k);
            for (uint32_t j = 0; j < k; ++j) route[route_off + r * 2 * k + j] = all[j];
        }
        const uint32_t tiles_off = (uint32_t)route.size();
        route.resize(tiles_off + Kernels::expert_tiles_words(rows * k, n_expert), test::kPoison);
        Buffer rb = test::to_device(dev, route);
        test::run(dev, [&](CommandList& cl) {
            K.moe_sort(cl, view(rb), route_off, k, n_expert, rows, perm_off, tiles_off);
        });
        auto out = test::from_device<uint32_t>(dev, rb, route.size());
        std::vector<uint32_t> table = {0};  // the host's: count, then (expert, first, end)
        for (uint32_t e = 0, first = 0; e < n_expert; ++e) {
            uint32_t c = 0;
            for (uint32_t i = 0; i < rows * k; ++i)
                c += route[route_off + (i / k) * 2 * k + i % k] == e;
            for (uint32_t r = 0; r < c; r += Kernels::kExpertTileRows) {
                table.insert(table.end(),
                             {e, first + r, first + std::min(r + Kernels::kExpertTileRows, c)});
                ++table[0];
            }
            first += c;
        }
        for (size_t i = 0; i < table.size(); ++i)
            ASSERT_EQ(out[tiles_off + i], table[i]) << n_expert << " experts, table word " << i;
        for (uint32_t i = 0; i < perm_off; ++i) ASSERT_EQ(out[i], route[i]) << "changed " << i;
        for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(out[perm_off + rows * k + i], test::kPoison);
        std::vector<uint32_t> seen(rows * k, 0);
        uint32_t last = 0;
        for (uint32_t v = 0; v < rows * k; ++v) {
            const uint32_t pr = out[perm_off + v];
            ASSERT_LT(pr, rows * k);
            ++seen[pr];
            const uint32_t e = route[route_off + (pr / k) * 2 * k + pr % k];
            ASSERT_GE(e, last) << "experts out of order at " << v;
            last = e;
        }
        for (uint32_t c : seen) ASSERT_EQ(c, 1u) << "not a permutation";
    }
}

// h += the weighted sum of each row's slots, in slot order.
TEST(MoeSum, AddsTheWeightedSlots) {
    VK_TEST_DEVICE();
    const uint32_t n = 300, k = 3, rows = 2, out_off = 5, h_off = out_off + rows * k * n;
    std::vector<float> act = randn(h_off + rows * n + 4, 12);
    std::vector<uint32_t> route(1 + rows * 2 * k);
    std::vector<float> w = {0.5f, 0.3f, 0.2f, 0.1f, 0.6f, 0.3f};
    for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t j = 0; j < k; ++j)
            std::memcpy(&route[1 + r * 2 * k + k + j], &w[r * k + j], 4);
    Buffer ab = test::to_device(dev, act), rb = test::to_device(dev, route);
    test::run(dev, [&](CommandList& cl) {
        K.moe_sum(cl, view(ab), out_off, h_off, view(rb), 1, k, n, rows);
    });
    auto out = test::from_device<float>(dev, ab, act.size());
    for (uint32_t i = 0; i < h_off; ++i) ASSERT_EQ(out[i], act[i]);
    for (uint32_t i = h_off + rows * n; i < act.size(); ++i) ASSERT_EQ(out[i], act[i]);
    for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t i = 0; i < n; ++i) {
            double s = 0;
            for (uint32_t j = 0; j < k; ++j)
                s += (double)w[r * k + j] * act[out_off + (r * k + j) * n + i];
            ASSERT_NEAR(out[h_off + r * n + i], act[h_off + r * n + i] + s, 1e-5) << r << " " << i;
        }
}

}  // namespace
}  // namespace dl::vk
