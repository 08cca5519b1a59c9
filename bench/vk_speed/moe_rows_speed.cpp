// A batched decode step's expert GEMVs alone (MoeDecodeSpeed.Rows; moe_speed.cpp has a single
// token's mixture stages and a window's expert GEMMs).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "moe_speed.h"
#include "speed.h"

namespace dl::vk {
namespace {

// A batched decode step's expert GEMVs: m rows (sequences) each choosing 8 experts at random, in
// the rows' order as the step runs them (unsorted: few pairs an expert), at the 35B-A3B's and the
// Qwen3-30B-A3B's shapes: the gate GEMV (Q4_K, each slot over its row's xn) and the down GEMV
// (Q6_K) forming each slot's SwiGLU as it reads and summing the row's slots, then the down GEMV
// over the SwiGLU formed before it (F32, and rounded to bytes). Each with the bytes of the
// distinct experts it reads and their rate; at 8 rows in each of the batched GEMV's forms.
// Why: in a Qwen3-30B-A3B step of 8 sequences the two stages took 70 and 100 us a layer
// (docs/perf/data/2026-12-07-h100-r42-profile.txt), where the distinct experts' bytes take 25-35 at
// the H100's bandwidth; alone (r43) they read at a third of it. The down GEMV over an input
// formed before it says what a SwiGLU formed once (in the gate and up GEMV) would save it.
TEST(MoeDecodeSpeed, Rows) {
    VK_SPEED_DEVICE();
    const bool cpu = dev.features().cpu;
    const uint32_t E = cpu ? 256 : 2048, k = 8, rounds = cpu ? 2 : 40;
    test::OtherWork other(dev, K);
    std::mt19937 rng(31);
    struct Case {
        uint32_t n_ff, n_expert;
    };
    const std::vector<Case> cases =
        cpu ? std::vector<Case>{{256, 32}} : std::vector<Case>{{512, 256}, {768, 128}};
    const std::vector<uint32_t> row_counts =
        cpu ? std::vector<uint32_t>{1, 4} : std::vector<uint32_t>{1, 8, 32};
    for (const auto& [n_ff, n_expert] : cases) {
        const test::RepeatedMatrix gate =
            test::repeated_rows(dev, QType::Q4_K, n_expert * n_ff, E, rng, 96);
        const test::RepeatedMatrix down =
            test::repeated_rows(dev, QType::Q6_K, n_expert * E, n_ff, rng, 96);
        for (const uint32_t m : row_counts) {
            // Each row's k experts in ascending order, then their weights (as moe_route writes
            // them; each row's sum to one).
            std::vector<uint32_t> route((size_t)m * 2 * k);
            const std::vector<uint32_t> ids = random_choice(rng, m, n_expert, k);
            std::vector<float> weights((size_t)m * k);
            std::vector<bool> used(n_expert, false);
            for (uint32_t r = 0; r < m; ++r)
                for (uint32_t j = 0; j < k; ++j) {
                    route[r * 2 * k + j] = ids[r * k + j];
                    used[ids[r * k + j]] = true;
                    weights[r * k + j] = 1.f / (float)k;
                    route[r * 2 * k + k + j] = std::bit_cast<uint32_t>(weights[r * k + j]);
                }
            const uint64_t distinct = (uint64_t)std::count(used.begin(), used.end(), true);
            Buffer routes = test::to_device(dev, route);
            const std::vector<float> xn = test::randn((size_t)m * E, 37 + m, 1.f);
            Buffer xb = test::to_device(dev, xn);
            // The gates, then the ups (random: the down GEMV's input), as one buffer.
            const size_t slots = (size_t)m * k * n_ff;
            Buffer gates = test::poisoned(dev, 2 * slots);
            const std::vector<float> ups = test::randn(slots, 41 + m, 1.f);
            Buffer out = test::poisoned(dev, (size_t)m * E);
            auto experts_gate = [&](CommandList& cl) {
                K.gemv_experts(cl, {.type = QType::Q4_K,
                                    .w = view(gate.w),
                                    .rows = n_ff,
                                    .cols = E,
                                    .n_expert = n_expert,
                                    .k = k,
                                    .route = view(routes),
                                    .route_off = 0,
                                    .x = view(xb),
                                    .x_off = 0,
                                    .y = view(gates),
                                    .y_off = 0,
                                    .n_rows = m});
            };
            // The down GEMV over the slots' inputs in x: their SwiGLU's gates and ups (up_off),
            // or the SwiGLU formed before it, in F32 or rounded to bytes.
            auto down_over = [&](Buffer& x, bool bytes, uint32_t up_off) {
                return [&, bytes, up_off](CommandList& cl) {
                    K.gemv_experts(cl, {.type = QType::Q6_K,
                                        .w = view(down.w),
                                        .rows = E,
                                        .cols = n_ff,
                                        .n_expert = n_expert,
                                        .k = k,
                                        .route = view(routes),
                                        .route_off = 0,
                                        .x = view(x),
                                        .x_off = 0,
                                        .x_per_slot = true,
                                        .x_bytes = bytes,
                                        .up_off = up_off,
                                        .y = view(out),
                                        .y_off = 0,
                                        .sum = true,
                                        .n_rows = m});
                };
            };
            auto experts_down = down_over(gates, false, (uint32_t)slots);
            auto rate = [&](const std::string& us, uint64_t bytes) {
                // (the report's first figure: after itself)
                const size_t at = us.find_first_of("0123456789");
                const double t =
                    at == std::string::npos ? 0 : std::strtod(us.c_str() + at, nullptr);
                return fmt::format("{:.1f} MB of {} distinct experts, {:.0f} GB/s", bytes / 1e6,
                                   distinct, t > 0 ? bytes / (t * 1e-6) / 1e9 : 0.0);
            };
            // (at 8 rows in every form of the batched GEMV's switches)
            const std::vector<BatchForm> forms =
                !cpu && m == 8 ? all_batch_forms() : std::vector<BatchForm>{{}};
            std::vector<float> g;
            for (const BatchForm& form : forms) {
                const BatchFormScope scope(K, form);
                const std::string gate_us = other.report(rounds, experts_gate);
                fmt::print(
                    "expert gate GEMV, {} rows x {} of {} x {} Q4_K, {} experts{}: {} us ({})\n", m,
                    k, n_ff, E, n_expert, form.name(), gate_us,
                    rate(gate_us, distinct * n_ff * gate.row_bytes));
                g = test::from_device<float>(dev, gates, slots);
                for (size_t v = 0; v < (size_t)m * k; v += 3)
                    for (uint32_t r = 0; r < n_ff; r += 67) {
                        const float* w = gate.row((uint64_t)ids[v] * n_ff + r);
                        const auto [ref, mag] = dot_and_magnitude(w, xn.data() + (v / k) * E, E);
                        ASSERT_NEAR(g[v * n_ff + r], ref, 1e-5 * (1 + mag))
                            << m << " rows, pair " << v << " row " << r << form.name();
                    }
            }
            // The down GEMV over these gates and the random ups; the slots' SwiGLU outputs, and
            // each output of the down GEMV checked against the host over them (or their bytes).
            g.insert(g.end(), ups.begin(), ups.end());
            dev.upload(gates, 0, g.data(), g.size() * sizeof(float));
            std::vector<float> act(slots);
            for (size_t i = 0; i < slots; ++i) {
                const double a = g[i];
                act[i] = (float)(a / (1 + std::exp(-a)) * g[slots + i]);
            }
            auto check_down = [&](const std::vector<float>& in, const std::string& what) {
                const std::vector<float> o = test::from_device<float>(dev, out, (size_t)m * E);
                for (uint32_t row = 0; row < m; ++row)
                    for (uint32_t r = row % 53; r < E; r += 53) {
                        double ref = 0, mag = 0;
                        for (uint32_t j = 0; j < k; ++j) {
                            const size_t v = (size_t)row * k + j;
                            const auto [d, dm] = dot_and_magnitude(
                                down.row((uint64_t)ids[v] * E + r), in.data() + v * n_ff, n_ff);
                            ref += weights[v] * d;
                            mag += weights[v] * dm;
                        }
                        ASSERT_NEAR(o[(size_t)row * E + r], ref, 1e-4 * (1 + mag))
                            << m << " rows, row " << row << " output " << r << what;
                    }
            };
            for (const BatchForm& form : forms) {
                const BatchFormScope scope(K, form);
                const std::string down_us = other.report(rounds, experts_down);
                fmt::print(
                    "expert down GEMV, {} rows x {} of {} x {} Q6_K, weighted sum, {} "
                    "experts{}: {} us ({})\n",
                    m, k, E, n_ff, n_expert, form.name(), down_us,
                    rate(down_us, distinct * E * down.row_bytes));
                check_down(act, form.name());
                if (HasFatalFailure()) return;
            }
            // The same down GEMV over the slots' SwiGLU outputs formed before it: in F32, and
            // rounded to bytes as the dense down projection reads its input (with integer dot
            // products); and that rounding's own time (round_rows forming the SwiGLU from the
            // gates and ups, as a batched step runs it with DELTALLM_VK_EXPERT_DOWN_ROUNDED).
            Buffer actb = test::to_device(dev, act);
            const uint32_t nvec = m * k;
            Buffer act_bytes = test::poisoned(dev, (size_t)nvec * Kernels::rounding_floats(n_ff));
            auto round_act = [&](CommandList& cl) {
                K.round_rows(cl, view(gates), 0, view(act_bytes), 0, n_ff, nvec, (uint32_t)slots);
            };
            // (over bytes wherever the device has integer dot products, as a GPU with fast ones
            // runs them, so that lavapipe checks the form too)
            const test::Scoped<Kernels::GemvX> policy(K.tuning.gemv_x, dev.features().integer_dot
                                                                           ? Kernels::GemvX::bytes
                                                                           : K.tuning.gemv_x);
            const bool bytes = K.experts_read_bytes(QType::Q6_K, n_ff);
            std::vector<float> act_rounded = act;
            if (bytes) {
                fmt::print("their SwiGLU rounded to bytes, {} rows x {} of {} values: {} us\n", m,
                           k, n_ff, other.report(rounds, round_act));
                act_rounded = test::round_x_bytes(act.data(), act.size()).values;
            }
            for (const bool over_bytes : {false, true}) {
                if (over_bytes && !bytes) continue;
                auto down_over_act = over_bytes ? down_over(act_bytes, true, Kernels::kNone)
                                                : down_over(actb, false, Kernels::kNone);
                const std::string us = other.report(rounds, down_over_act);
                fmt::print(
                    "expert down GEMV, {} rows x {} of {} x {} Q6_K, weighted sum, {} experts, "
                    "over the SwiGLU formed before{}: {} us ({})\n",
                    m, k, E, n_ff, n_expert, over_bytes ? " and rounded to bytes" : "", us,
                    rate(us, distinct * E * down.row_bytes));
                check_down(over_bytes ? act_rounded : act,
                           over_bytes ? " over bytes" : " over F32");
                if (HasFatalFailure()) return;
            }
        }
    }
}

}  // namespace
}  // namespace dl::vk
