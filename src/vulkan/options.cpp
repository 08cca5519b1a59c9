// The driver's options and the decode fusions read from the environment (core/env.cpp's table
// declares every variable).
#include "vulkan/driver.h"

#include <initializer_list>
#include <string>

#include "core/env.h"
#include "core/error.h"

namespace dl::vk {

namespace {
// The integer variable `var` within [lo, hi], or one clear error that gives the range.
int64_t int_from_env(const char* var, int64_t lo, int64_t hi) {
    const int64_t v = env::get_int(var);
    if (v < lo || v > hi) fail("{}={}: use {} to {}", var, v, lo, hi);
    return v;
}

// The integer variable `var`, one of `values`, or one clear error that lists them.
int64_t int_of_env(const char* var, std::initializer_list<int64_t> values) {
    const int64_t v = env::get_int(var);
    std::string all;  // "1, 2, 4 or 8"
    for (size_t i = 0; i < values.size(); ++i) {
        const int64_t x = values.begin()[i];
        if (v == x) return v;
        all += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + std::to_string(x);
    }
    fail("{}={}: use {}", var, v, all);
}
}  // namespace

bool DriverOptions::profile_from_env() {
    return env::get_bool("DELTALLM_VK_PROFILE");
}

Fusions Fusions::from_env() {
    Fusions f;
    f.norm_epilogue = env::get_bool("DELTALLM_VK_DECODE_FUSION");
    f.norm_in_readers = env::get_bool("DELTALLM_VK_GEMV_NORM_IN");
    f.ffn_q8_out = env::get_bool("DELTALLM_VK_GEMV_PRE_ROUND");
    f.residual_q8_out = env::get_bool("DELTALLM_VK_GEMV_ROUND_H");
    f.merged_input_projections = env::get_bool("DELTALLM_VK_MERGE_IN");
    f.gated_norm_in_output = env::get_bool("DELTALLM_VK_GATED_IN");
    f.deltanet_q8_out = env::get_bool("DELTALLM_VK_GATED_ROUNDED");
    f.attention_q8_out = env::get_bool("DELTALLM_VK_ATTN_ROUNDED");
    f.shared_output_pipeline = env::get_bool("DELTALLM_VK_ATTN_GATED_FORM");
    f.router_top_k = env::get_bool("DELTALLM_VK_ROUTER_TOPK");
    f.experts_sum_epilogue = env::get_bool("DELTALLM_VK_EXPERTS_SUM_EPILOGUE");
    return f;
}

Fusions Fusions::none() {
    Fusions f;
    f.norm_epilogue = f.norm_in_readers = f.ffn_q8_out = f.residual_q8_out = false;
    f.merged_input_projections = f.gated_norm_in_output = f.deltanet_q8_out = false;
    f.attention_q8_out = f.shared_output_pipeline = f.router_top_k = false;
    f.experts_sum_epilogue = false;
    return f;
}

bool DriverOptions::gemv_balance_from_env() {
    return env::get_bool("DELTALLM_VK_GEMV_BALANCE");
}

bool DriverOptions::expand_ahead_from_env() {
    return env::get_bool("DELTALLM_VK_EXPAND_AHEAD");
}

bool DriverOptions::early_submit_from_env() {
    return env::get_bool("DELTALLM_VK_EARLY_SUBMIT");
}

bool DriverOptions::mixed_steps_from_env() {
    return env::get_bool("DELTALLM_VK_MIXED_STEPS");
}

bool DriverOptions::f16_by_writer_from_env() {
    return env::get_bool("DELTALLM_VK_F16_BY_WRITER");
}

bool DriverOptions::gemm_groups_from_env() {
    return env::get_bool("DELTALLM_VK_GEMM_GROUPS");
}

Kernels::GemmTile DriverOptions::gemm_tile_from_env() {
    const std::string s = env::get_string("DELTALLM_VK_GEMM_TILE");
    if (s.empty()) return {};
    Kernels::GemmTile t;
    char x1 = 0, x2 = 0, x3 = 0, rest = 0;
    const int got = std::sscanf(s.c_str(), "%u%c%u%c%u%c%u%c", &t.bm, &x1, &t.bn, &x2, &t.bk, &x3,
                                &t.wg, &rest);
    const auto ok = [](uint32_t v) { return v >= 32 && v <= 256 && v % 32 == 0; };
    const bool wg_ok =
        got == 5 || (got == 7 && x3 == 'x' && (t.wg == 128 || t.wg == 256 || t.wg == 512));
    if ((got != 5 && got != 7) || x1 != 'x' || x2 != 'x' || !wg_ok || !ok(t.bm) || !ok(t.bn) ||
        !ok(t.bk))
        fail(
            "DELTALLM_VK_GEMM_TILE='{}': use BMxBNxBK, each a multiple of 32 up to 256, "
            "optionally xWG with WG invocations (128, 256 or 512)",
            s);
    return t;
}

uint32_t DriverOptions::gemv_groups_from_env() {
    return (uint32_t)int_of_env("DELTALLM_VK_GEMV_GROUPS", {1, 2, 4, 8});
}

uint32_t DriverOptions::gemv_waves_from_env() {
    return (uint32_t)int_from_env("DELTALLM_VK_GEMV_WAVES", 0, 64);
}

uint32_t DriverOptions::gemm_gemv_rows_from_env() {
    return (uint32_t)int_from_env("DELTALLM_VK_GEMM_GEMV_ROWS", 0, 64);
}

int DriverOptions::gemm_split_from_env() {
    return (int)int_from_env("DELTALLM_VK_GEMM_SPLIT", -1, 16);
}

uint32_t DriverOptions::gemm_expand_rows_from_env() {
    return (uint32_t)int_from_env("DELTALLM_VK_GEMM_EXPAND_ROWS", 1, 2048);
}

uint32_t DriverOptions::expert_tile_pairs_from_env() {
    return (uint32_t)int_from_env("DELTALLM_VK_EXPERT_TILES", 0, 4096);
}

uint32_t DriverOptions::expert_cm2_pairs_from_env() {
    return (uint32_t)int_from_env("DELTALLM_VK_EXPERT_CM2", 0, 4096);
}

uint32_t DriverOptions::expert_sort_pairs_from_env() {
    return (uint32_t)int_from_env("DELTALLM_VK_EXPERT_SORT", 0, 4096);
}

uint32_t DriverOptions::gemv_batch_threads_from_env() {
    return (uint32_t)int_of_env("DELTALLM_VK_GEMV_BATCH_THREADS", {0, 32, 64, 128, 256});
}

uint32_t DriverOptions::gemv_batch_rows_from_env() {
    return (uint32_t)int_of_env("DELTALLM_VK_GEMV_BATCH_ROWS", {0, 1, 2, 4, 8});
}

uint32_t DriverOptions::gemv_split_from_env() {
    return (uint32_t)int_from_env("DELTALLM_VK_GEMV_SPLIT", 0, 4);
}

int64_t DriverOptions::attn_short_from_env() {
    const int64_t v = env::get_int("DELTALLM_VK_ATTN_SHORT");
    if (v < -1) fail("DELTALLM_VK_ATTN_SHORT={}: use -1 (by the cache bytes), 0 or positions", v);
    return v;
}

uint32_t DriverOptions::attn_one_split_from_env() {
    return (uint32_t)int_from_env("DELTALLM_VK_ATTN_ONE_SPLIT", 0, 64);
}

// The value named by the string variable `var`, or one clear error that lists the names.
template <typename E>
static E choice_from_env(const char* var, std::initializer_list<std::pair<const char*, E>> names) {
    const std::string s = env::get_string(var);
    std::string all;
    for (const auto& [name, value] : names) {
        if (s == name) return value;
        all += all.empty() ? name : std::string(", ") + name;
    }
    fail("{}='{}': use one of {}", var, s, all);
}

Kernels::GemvWide DriverOptions::gemv_wide_from_env() {
    using W = Kernels::GemvWide;
    return choice_from_env<W>("DELTALLM_VK_GEMV_WIDE",
                              {{"auto", W::automatic}, {"off", W::off}, {"all", W::all}});
}

Kernels::GemvTiled DriverOptions::gemv_tiled_from_env() {
    using T = Kernels::GemvTiled;
    return choice_from_env<T>("DELTALLM_VK_GEMV_TILED", {{"on", T::on}, {"off", T::off}});
}

uint32_t DriverOptions::deltanet_columns_from_env() {
    return (uint32_t)int_from_env("DELTALLM_VK_DN_COLUMNS", 0, 4096);
}

Kernels::DeltaNetScan DriverOptions::deltanet_scan_from_env() {
    using S = Kernels::DeltaNetScan;
    return choice_from_env<S>("DELTALLM_VK_DN_SCAN", {{"best", S::best},
                                                      {"chunked", S::chunked},
                                                      {"shuffle", S::shuffle},
                                                      {"clustered", S::clustered},
                                                      {"plain", S::plain}});
}

Kernels::GemvX DriverOptions::gemv_x_from_env() {
    using X = Kernels::GemvX;
    return choice_from_env<X>("DELTALLM_VK_GEMV_X",
                              {{"auto", X::automatic}, {"global", X::global}, {"bytes", X::bytes}});
}

Tuning::RouteForm DriverOptions::moe_route_form_from_env() {
    using F = Tuning::RouteForm;
    return choice_from_env<F>("DELTALLM_VK_MOE_ROUTE",
                              {{"rank", F::rank}, {"merge", F::merge}, {"rounds", F::rounds}});
}

Tuning DriverOptions::tuning_from_env() {
    Tuning t;
    t.gemv_x = gemv_x_from_env();
    t.gemv_groups = gemv_groups_from_env();
    t.gemv_waves = gemv_waves_from_env();
    t.attn_one_split = attn_one_split_from_env();
    t.gemv_balance = gemv_balance_from_env();
    t.gemv_wide = gemv_wide_from_env();
    t.gemv_split_parts = gemv_split_from_env();
    t.gemv_tiled = gemv_tiled_from_env();
    t.gemm_tile = gemm_tile_from_env();
    t.gemm_gemv_rows = gemm_gemv_rows_from_env();
    t.gemm_gemv_rows_float = (uint32_t)int_from_env("DELTALLM_VK_GEMM_GEMV_ROWS_FLOAT", 0, 64);
    t.gemm_expand_rows = gemm_expand_rows_from_env();
    t.gemm_split = gemm_split_from_env();
    t.gemm_skinny = env::get_bool("DELTALLM_VK_GEMM_SKINNY");
    t.gemm_skinny_rows = (uint32_t)int_from_env("DELTALLM_VK_GEMM_SKINNY_ROWS", 1, 512);
    t.gemm_skinny_parts = (uint32_t)int_from_env("DELTALLM_VK_GEMM_SKINNY_PARTS", 0, 16);
    t.gemm_skinny_fill = env::get_bool("DELTALLM_VK_GEMM_SKINNY_FILL");
    t.gemm_skinny_rt = (uint32_t)int_of_env("DELTALLM_VK_GEMM_SKINNY_RT", {0, 2, 4});
    t.gemm_skinny_mt = (uint32_t)int_of_env("DELTALLM_VK_GEMM_SKINNY_MT", {0, 1, 2, 4});
    t.gemm_skinny_prefetch = env::get_bool("DELTALLM_VK_GEMM_SKINNY_PREFETCH");
    t.gemm_skinny_ahead = (uint32_t)int_of_env("DELTALLM_VK_GEMM_SKINNY_AHEAD", {1, 2});
    t.gemm_skinny_half = env::get_bool("DELTALLM_VK_GEMM_SKINNY_HALF");
    t.attention_rows_parts = (int)int_from_env("DELTALLM_VK_ATTN_WINDOW_PARTS", -1, 16);
    t.attention_cm2_unclamped = env::get_bool("DELTALLM_VK_ATTN_CM2_UNCLAMPED");
    t.dequant_k_wide = env::get_bool("DELTALLM_VK_DEQUANT_K_WIDE");
    t.expert_expand = env::get_bool("DELTALLM_VK_EXPERT_EXPAND");
    t.gemv_batch_decode_once = env::get_bool("DELTALLM_VK_GEMV_BATCH_ONCE");
    t.gemv_batch_rows = gemv_batch_rows_from_env();
    t.gemv_batch_threads = gemv_batch_threads_from_env();
    t.expert_tile_pairs = expert_tile_pairs_from_env();
    t.expert_sort_pairs = expert_sort_pairs_from_env();
    t.expert_down_rounded_rows = (uint32_t)int_from_env("DELTALLM_VK_EXPERT_DOWN_ROUNDED", 0, 4096);
    t.expert_skinny = env::get_bool("DELTALLM_VK_EXPERT_SKINNY");
    t.expert_cm2_pairs = expert_cm2_pairs_from_env();
    t.expert_cm2_blocks = env::get_bool("DELTALLM_VK_EXPERT_CM2_BLOCKS");
    t.moe_route_form = moe_route_form_from_env();
    t.deltanet_columns = deltanet_columns_from_env();
    t.deltanet_scan = deltanet_scan_from_env();
    return t;
}

}  // namespace dl::vk
