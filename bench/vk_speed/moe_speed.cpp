// What the kernels of a mixture-of-experts token and window cost alone at Qwen3.5-35B-A3B's shapes
// (rows of 2048 values, 256 experts of which 8 are chosen, an expert FFN of 512): the router's GEMV
// with its choice in the last workgroup, the chosen experts' gate GEMV (Q4_K), their down GEMV
// (Q6_K) forming the SwiGLU as it reads and summing the slots, and a plain GEMV over as many bytes
// as the gate's chosen rows. Each is timed as a token meets it (OtherWork: after itself, after a
// stream over more than the L2, after GEMVs of other types). Why: in a 35B-A3B token each of these
// stages takes 15-22 us (docs/perf/history.md, 2026-12-06 (17:15)) where its bytes take 1-3; this
// says how much of that is the kernel's own. The last run of each is checked against the host.
// ExpertGemmSpeed: a prefill window's expert GEMMs at the same shapes, by form (why: in the
// 35B-A3B's pp512 the down GEMM took twice the gate's and up's together, 2026-12-06 (16:30)).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include "moe_reference.h"
#include "moe_speed.h"
#include "speed.h"

namespace dl::vk {
namespace {
TEST(MoeDecodeSpeed, Stages) {
    VK_SPEED_DEVICE();
    const bool cpu = dev.features().cpu;
    const uint32_t E = cpu ? 256 : 2048, n_expert = cpu ? 32 : 256, k = 8, n_ff = cpu ? 256 : 512;
    const uint32_t rounds = cpu ? 2 : 40;
    test::OtherWork other(dev, K);
    std::mt19937 rng(17);

    const std::vector<BatchForm> batch_forms = cpu ? std::vector<BatchForm>{{}} : all_batch_forms();

    // act: xn at 0, the router's logits at E, the route after them; the gates, ups and outputs
    // in buffers of their own.
    const uint32_t logit_off = E, route_off = E + n_expert + 4;
    std::vector<float> act_init(route_off + 2 * k + 4, 0.f);
    const std::vector<float> xn = test::randn(E, 4, 1.f);
    std::copy(xn.begin(), xn.end(), act_init.begin());
    Buffer act = test::to_device(dev, act_init);
    Buffer counter = dev.create_buffer(8, MemoryKind::device);
    dev.fill(counter, 0, 8, 0);

    // The router: F32 rows, as llama-quantize leaves it.
    const std::vector<float> wr = test::randn((size_t)n_expert * E, 3, 1.f / std::sqrt((float)E));
    Buffer wrb = test::to_device(dev, wr);
    auto router = [&](CommandList& cl) {
        K.moe_router(cl, {.w = view(wrb),
                          .act = view(act),
                          .route = view(act),
                          .counter = view(counter),
                          .gate_w = view(wrb),
                          .n_expert = n_expert,
                          .k = k,
                          .n_embd = E,
                          .xn_off = 0,
                          .logit_off = logit_off,
                          .route_off = route_off,
                          .counter_idx = 0,
                          .gate_off = Kernels::kNone});
    };
    fmt::print("router {} x {} and its top {}: {} us\n", n_expert, E, k,
               other.report(rounds, router));
    const std::vector<float> f = test::from_device<float>(dev, act, act_init.size());
    const std::vector<uint32_t> u = test::from_device<uint32_t>(dev, act, act_init.size());
    for (uint32_t e = 0; e < n_expert; ++e) {
        const auto [ref, mag] = dot_and_magnitude(wr.data() + (size_t)e * E, xn.data(), E);
        ASSERT_NEAR(f[logit_off + e], ref, 1e-5 * (1 + mag)) << "logit " << e;
    }
    std::vector<uint32_t> ids;
    std::vector<double> weights;
    test::reference_route(f.data() + logit_off, n_expert, k, ids, weights);
    for (uint32_t j = 0; j < k; ++j) {
        ASSERT_EQ(u[route_off + j], ids[j]) << "slot " << j;
        ASSERT_NEAR(f[route_off + k + j], weights[j], 1e-6 * (1 + weights[j])) << "slot " << j;
    }

    // Its two halves apart: the router's GEMV alone (a plain F32 GEMV) and the choice alone
    // (moe_route.comp, one workgroup, by subgroups and by the shared-memory tree): which half the
    // fused stage's time is.
    auto router_gemv = [&](CommandList& cl) {
        K.gemv(cl, {.type = QType::F32,
                    .w = view(wrb),
                    .rows = n_expert,
                    .cols = E,
                    .x = view(act),
                    .x_off = 0,
                    .y = view(act),
                    .y_off = logit_off,
                    .accumulate = false});
    };
    fmt::print("router GEMV alone, {} x {} F32: {} us\n", n_expert, E,
               other.report(rounds, router_gemv));
    // The route each form wrote: the fused router's choice.
    auto same_choice = [&](const char* form) {
        const std::vector<uint32_t> c = test::from_device<uint32_t>(dev, act, act_init.size());
        for (uint32_t j = 0; j < k; ++j)
            ASSERT_EQ(c[route_off + j], ids[j]) << "slot " << j << ", " << form;
    };
    using F = Tuning::RouteForm;
    const std::pair<const char*, F> forms[] = {{"by ranks", F::rank},
                                               {"by subgroups' lists merged", F::merge},
                                               {"by subgroups", F::rounds},
                                               {"by the shared tree", F::rounds}};
    for (const auto& [form, route_form] : forms) {
        const std::string_view f(form);
        test::Scoped sg_scope(K.tuning.moe_route_subgroups, f != "by the shared tree");
        test::Scoped form_scope(K.tuning.moe_route_form, route_form);
        auto choice = [&](CommandList& cl) {
            K.moe_route(cl, view(act), logit_off, n_expert, k, view(act), route_off, 1);
        };
        fmt::print("router's top {} alone, {}: {} us\n", k, form, other.report(rounds, choice));
        ASSERT_NO_FATAL_FAILURE(same_choice(form));
    }
    for (const auto& [form, route_form] : {forms[0], forms[1]}) {  // and the fused router
        test::Scoped form_scope(K.tuning.moe_route_form, route_form);
        fmt::print("router {} x {} and its top {}, {}: {} us\n", n_expert, E, k, form,
                   other.report(rounds, router));
        ASSERT_NO_FATAL_FAILURE(same_choice(form));
    }

    // The chosen experts' gate rows (Q4_K; 96 distinct rows, so experts differ) over xn.
    const test::RepeatedMatrix gate =
        test::repeated_rows(dev, QType::Q4_K, n_expert * n_ff, E, rng, 96);
    Buffer gates = test::poisoned(dev, (size_t)k * n_ff);
    auto experts_gate = [&](CommandList& cl) {
        K.gemv_experts(cl, {.type = QType::Q4_K,
                            .w = view(gate.w),
                            .rows = n_ff,
                            .cols = E,
                            .n_expert = n_expert,
                            .k = k,
                            .route = view(act),
                            .route_off = route_off,
                            .x = view(act),
                            .x_off = 0,
                            .y = view(gates),
                            .y_off = 0});
    };
    std::vector<float> g;
    for (const BatchForm& form : batch_forms) {
        const BatchFormScope scope(K, form);
        fmt::print("expert gate GEMV, {} of {} x {} Q4_K{}: {} us\n", k, n_ff, E, form.name(),
                   other.report(rounds, experts_gate));
        g = test::from_device<float>(dev, gates, (size_t)k * n_ff);
        for (uint32_t j = 0; j < k; ++j)
            for (uint32_t r = 0; r < n_ff; r += 37) {
                const float* w = gate.row((uint64_t)ids[j] * n_ff + r);
                const auto [ref, mag] = dot_and_magnitude(w, xn.data(), E);
                ASSERT_NEAR(g[(size_t)j * n_ff + r], ref, 1e-5 * (1 + mag))
                    << "slot " << j << " row " << r << form.name();
            }
    }

    // Their down rows (Q6_K) over SiLU(gate) · up, weighted and summed into one row of E.
    const std::vector<float> ups_host = test::randn((size_t)k * n_ff, 6, 1.f);
    Buffer ups = test::to_device(dev, ups_host);
    std::vector<float> gu((size_t)2 * k * n_ff);  // the gates, then the ups, as one buffer
    std::copy(g.begin(), g.end(), gu.begin());
    std::copy(ups_host.begin(), ups_host.end(), gu.begin() + (size_t)k * n_ff);
    Buffer gub = test::to_device(dev, gu);
    const test::RepeatedMatrix down =
        test::repeated_rows(dev, QType::Q6_K, n_expert * E, n_ff, rng, 96);
    Buffer out = test::poisoned(dev, E);
    auto experts_down = [&](CommandList& cl) {
        K.gemv_experts(cl, {.type = QType::Q6_K,
                            .w = view(down.w),
                            .rows = E,
                            .cols = n_ff,
                            .n_expert = n_expert,
                            .k = k,
                            .route = view(act),
                            .route_off = route_off,
                            .x = view(gub),
                            .x_off = 0,
                            .x_per_slot = true,
                            .up_off = k * n_ff,
                            .y = view(out),
                            .y_off = 0,
                            .sum = true});
    };
    for (const BatchForm& form : batch_forms) {
        const BatchFormScope scope(K, form);
        fmt::print("expert down GEMV, {} of {} x {} Q6_K, weighted sum{}: {} us\n", k, E, n_ff,
                   form.name(), other.report(rounds, experts_down));
        const std::vector<float> o = test::from_device<float>(dev, out, E);
        for (uint32_t r = 0; r < E; r += 41) {
            double ref = 0, mag = 0;
            for (uint32_t j = 0; j < k; ++j) {
                const float wt = f[route_off + k + j];
                const float* w = down.row((uint64_t)ids[j] * E + r);
                for (uint32_t c = 0; c < n_ff; ++c) {
                    const double a = g[(size_t)j * n_ff + c];
                    const double x = a / (1 + std::exp(-a)) * ups_host[(size_t)j * n_ff + c];
                    ref += wt * (double)w[c] * x;
                    mag += std::fabs(wt * (double)w[c] * x);
                }
            }
            ASSERT_NEAR(o[r], ref, 1e-4 * (1 + mag)) << "row " << r << form.name();
        }
    }

    // A plain GEMV over as many rows of Q4_K as the gate's chosen ones.
    Buffer plain = test::poisoned(dev, (size_t)k * n_ff);
    auto dense = [&](CommandList& cl) {
        K.gemv(cl, {.type = QType::Q4_K,
                    .w = view(gate.w),
                    .rows = k * n_ff,
                    .cols = E,
                    .x = view(act),
                    .x_off = 0,
                    .y = view(plain),
                    .y_off = 0,
                    .accumulate = false});
    };
    fmt::print("plain GEMV, {} x {} Q4_K: {} us\n", k * n_ff, E, other.report(rounds, dense));
    const std::vector<float> d = test::from_device<float>(dev, plain, (size_t)k * n_ff);
    for (uint32_t r = 0; r < k * n_ff; r += 53) {
        const auto [ref, mag] = dot_and_magnitude(gate.row(r), xn.data(), E);
        // (Within a percent: the decode GEMV may read xn rounded to bytes.)
        ASSERT_NEAR(d[r], ref, 1e-2 * (1 + mag)) << "row " << r;
    }
}

// Windows of 512 and 2048 rows, each choosing 8 of the experts at random, in the 35B-A3B's shape
// (256 experts of 512 rows) and the Qwen3-30B-A3B's (128 of 768): the experts' gate GEMM (Q4_K,
// n_ff x 2048, each pair over its row's input) and their down GEMM (Q6_K and Q4_K, 2048 x n_ff,
// each pair over its own input), as the grouped GEMM tiles, as the skinny GEMM's grouped form
// (and that with Q4_K decoded to halves by bit operations). Each run's time, the weights' GB/s
// (every expert's bytes: each is chosen) and TFLOP/s; a spread of outputs checked against the host.
TEST(ExpertGemmSpeed, Window) {
    VK_SPEED_DEVICE();
    const bool cpu = dev.features().cpu;
    const uint32_t E = cpu ? 256 : 2048, k = 8, runs = cpu ? 1 : 10;
    std::mt19937 rng(23);
    // A mixture's expert width and count, and the window's rows.
    struct Case {
        uint32_t n_ff, n_expert, n_rows;
    };
    const std::vector<Case> cases =
        cpu ? std::vector<Case>{{256, 16, 16}}
            : std::vector<Case>{
                  {512, 256, 512}, {512, 256, 2048}, {768, 128, 512}, {768, 128, 2048}};
    for (const auto& [n_ff, n_expert, n_rows] : cases) {
        const uint32_t n_pairs = n_rows * k;

        // The route: each row's k experts in ascending order (weights unused by the GEMMs), then
        // the permutation and the table of tiles moe_sort writes.
        const uint32_t route_off = 4, perm_off = route_off + n_rows * 2 * k + 4;
        const uint32_t tiles_off = perm_off + n_pairs + 4;
        // (and each pair's position in that order, for the sorted NV tiles)
        const uint32_t inv_off = tiles_off + Kernels::expert_tiles_words(n_pairs, n_expert) + 4;
        // (and their table, cut at their tiles' pairs)
        const uint32_t sorted_tiles_off = inv_off + n_pairs + 4;
        std::vector<uint32_t> route(
            sorted_tiles_off + Kernels::expert_tiles_words(n_pairs, n_expert), 0);
        const std::vector<uint32_t> ids = random_choice(rng, n_rows, n_expert, k);
        for (uint32_t r = 0; r < n_rows; ++r)
            for (uint32_t j = 0; j < k; ++j) route[route_off + r * 2 * k + j] = ids[r * k + j];
        Buffer routes = test::to_device(dev, route);
        test::run(dev, [&](CommandList& cl) {
            K.moe_sort(cl, view(routes), route_off, k, n_expert, n_rows, perm_off, tiles_off,
                       inv_off);
            cl.barrier();
            K.moe_sort(cl, view(routes), route_off, k, n_expert, n_rows, perm_off, sorted_tiles_off,
                       inv_off, Kernels::kSortedTilePairs);
        });
        const std::vector<uint32_t> placed = test::from_device<uint32_t>(dev, routes, route.size());
        const bool cm2 = GemmKernels::gemm_uses_cm2(dev.features(), dev.variant());

        struct Form {
            const char* name;
            bool skinny, half;
        };
        std::vector<Form> forms = {{"tiles", false, false}};
        if (GemmKernels::gemm_uses_skinny(dev.features(), dev.variant()))
            forms.insert(forms.end(),
                         {{"skinny", true, false}, {"skinny, Q4_K to halves", true, true}});
        struct Shape {
            const char* name;
            QType type;
            uint32_t rows, cols;
            bool own;  // each pair over its own input row
        };
        for (const Shape& s :
             {Shape{"gate", QType::Q4_K, n_ff, E, false}, Shape{"down", QType::Q6_K, E, n_ff, true},
              Shape{"down", QType::Q4_K, E, n_ff, true}}) {
            const test::RepeatedMatrix w =
                test::repeated_rows(dev, s.type, n_expert * s.rows, s.cols, rng, 96);
            const uint32_t n_x = s.own ? n_pairs : n_rows;
            const std::vector<float> x = test::randn((size_t)n_x * s.cols, 29 + s.cols, 1.f);
            Buffer xb = test::to_device(dev, x);
            Buffer y = test::poisoned(dev, (size_t)n_pairs * s.rows);
            // A form's time, and every 61st pair's every 89th output against the host (pair
            // pr's output at row at(pr) of y).
            auto report = [&](const std::string& form, double ms) {
                fmt::print(
                    "expert {} GEMM {} {} x {}, {} pairs over {} experts, {}: {:.3f} ms, {:.1f} "
                    "GB/s of weights, {:.1f} TFLOP/s\n",
                    s.name, qtype_name(s.type), s.rows, s.cols, n_pairs, n_expert, form, ms,
                    (double)w.row_bytes * s.rows * n_expert / (ms * 1e-3) / 1e9,
                    2.0 * n_pairs * s.rows * s.cols / (ms * 1e-3) / 1e12);
            };
            auto check = [&](const std::string& form, const std::function<size_t(uint32_t)>& at) {
                const std::vector<float> out =
                    test::from_device<float>(dev, y, (size_t)n_pairs * s.rows);
                for (uint32_t pr = 0; pr < n_pairs; pr += 61)
                    for (uint32_t r = 0; r < s.rows; r += 89) {
                        const float* in = x.data() + (size_t)(s.own ? pr : pr / k) * s.cols;
                        const auto [ref, mag] =
                            dot_and_magnitude(w.row((uint64_t)ids[pr] * s.rows + r), in, s.cols);
                        ASSERT_NEAR(out[at(pr) * s.rows + r], ref, 2e-3 * mag + 1e-4)
                            << s.name << " " << qtype_name(s.type) << " " << form << " pair " << pr
                            << " row " << r;
                    }
            };
            const Kernels::ExpertGemv g{.type = s.type,
                                        .w = view(w.w),
                                        .rows = s.rows,
                                        .cols = s.cols,
                                        .n_expert = n_expert,
                                        .k = k,
                                        .perm_off = perm_off,
                                        .route = view(routes),
                                        .route_off = route_off,
                                        .x = view(xb),
                                        .x_off = 0,
                                        .x_per_slot = s.own,
                                        .y = view(y),
                                        .y_off = 0,
                                        .n_rows = n_rows};
            // The sorted NV tiles (gemm_experts_cm2.comp) over the pairs' rows gathered as F16
            // (each pair its own row: the gather with one slot a row), outputs at positions.
            if (cm2) {
                const uint32_t x_rows = n_pairs + Kernels::kSortedTilePairs;
                Buffer h = dev.create_buffer((uint64_t)x_rows * s.cols * 2, MemoryKind::device);
                const uint32_t gk = s.own ? 1 : k;
                auto gather = [&](CommandList& cl) {
                    K.moe_gather(cl, view(xb), 0, s.cols, gk, view(routes), perm_off, n_pairs,
                                 view(h), 0);
                };
                const double gather_ms = test::device_ms_per_run(dev, runs, gather);
                test::run(dev, gather);
                // Over the blocks, and over the stack expanded to F16 (as a window runs them).
                const uint32_t all_rows = n_expert * s.rows;
                Buffer w16 = dev.create_buffer((uint64_t)all_rows * s.cols * 2, MemoryKind::device);
                auto expand = [&](CommandList& cl) {
                    K.dequant_f16(cl, s.type, view(w.w), all_rows, s.cols, view(w16));
                };
                const double expand_ms = test::device_ms_per_run(dev, runs, expand);
                // (also 64 values a thread, dequant_f16_q4k.comp and _q6k.comp)
                double wide_ms = 0;
                {
                    test::Scoped wide_scope(K.tuning.dequant_k_wide, true);
                    wide_ms = test::device_ms_per_run(dev, runs, expand);
                }
                test::run(dev, expand);
                for (bool expanded : {false, true}) {
                    Kernels::ExpertGemv gs = g;
                    gs.x = view(h);
                    if (expanded) {
                        gs.type = QType::F16;
                        gs.w = view(w16);
                    }
                    const double ms = test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
                        K.gemm_experts_sorted(cl, gs, x_rows, sorted_tiles_off);
                    });
                    const std::string form =
                        expanded ? fmt::format(
                                       "sorted NV tiles over F16 (its gather {:.3f} ms, "
                                       "the expansion {:.3f} ms{})",
                                       gather_ms, expand_ms,
                                       wide_ms > 0
                                           ? fmt::format(", 64 values a thread {:.3f} ms", wide_ms)
                                           : std::string())
                                 : fmt::format("sorted NV tiles (its gather {:.3f} ms)", gather_ms);
                    report(form, ms);
                    check(form, [&](uint32_t pr) { return (size_t)placed[inv_off + pr]; });
                }
            }
            for (const Form& form : forms) {
                test::Scoped skinny_scope(K.tuning.expert_skinny, form.skinny);
                test::Scoped half_scope(K.tuning.gemm_skinny_half, form.half);
                if (form.half && s.type != QType::Q4_K) continue;
                const double ms = test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
                    K.gemm_experts(cl, dev.variant(), g, tiles_off);
                });
                report(form.name, ms);
                check(form.name, [](uint32_t pr) { return (size_t)pr; });
            }
        }
    }
}

}  // namespace
}  // namespace dl::vk
