// The shared memory a module declares, read from its SPIR-V (spirv_shared.h): a hand-assembled
// module with a specialization constant, operations it does not know, malformed words; and the
// embedded decode modules against sizes counted from their GLSL declarations, which the GEMV
// launcher's own estimate (Kernels::gemv_shared_bytes) must cover.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "vulkan/kernels.h"
#include "vulkan/pipeline.h"
#include "vulkan/spirv_shared.h"

namespace dl::vk {
namespace {

uint32_t inst(uint32_t words, uint32_t op) {
    return words << 16 | op;
}

// vec4 data[N * 3] in workgroup memory with N = specialization constant 0 (7 by default), and
// a storage buffer variable of the same type, which holds no shared memory. `mul` is the
// operation of OpSpecConstantOp that forms N * 3.
std::vector<uint32_t> tiny_module(uint32_t mul = 132) {
    return {0x07230203,  0x00010000, 0,  20,  0, inst(4, 71), 5, 1, 0,  // OpDecorate %5 SpecId 0
            inst(4, 21), 2,          32, 0,                             // %2 = OpTypeInt 32 0
            inst(3, 22), 3,          32,                                // %3 = OpTypeFloat 32
            inst(4, 23), 4,          3,  4,                             // %4 = OpTypeVector %3 4
            inst(4, 50), 2,          5,  7,                             // %5 = OpSpecConstant %2 7
            inst(4, 43), 2,          6,  3,                             // %6 = OpConstant %2 3
            inst(6, 52), 2,          7,  mul, 5, 6,  // %7 = OpSpecConstantOp %2 IMul %5 %6
            inst(4, 28), 8,          4,  7,          // %8 = OpTypeArray %4 %7
            inst(4, 32), 9,          4,  8,          // %9 = OpTypePointer Workgroup %8
            inst(4, 59), 9,          10, 4,          // %10 = OpVariable %9 Workgroup
            inst(4, 32), 11,         12, 8,          // %11 = OpTypePointer StorageBuffer %8
            inst(4, 59), 11,         12, 12};        // %12 = OpVariable %11 StorageBuffer
}

TEST(SpirvShared, SizesWorkgroupVariablesWithTheirSpecializationConstants) {
    const std::vector<uint32_t> m = tiny_module();
    EXPECT_EQ(workgroup_bytes(m, {}), 7u * 3u * 16u);  // the default
    const uint32_t five[] = {5};
    EXPECT_EQ(workgroup_bytes(m, five), 5u * 3u * 16u);
    const uint32_t two[] = {5, 9};  // a constant the module does not have changes nothing
    EXPECT_EQ(workgroup_bytes(m, two), 5u * 3u * 16u);
}

TEST(SpirvShared, EmptyWhereASizeCannotBeKnown) {
    EXPECT_FALSE(workgroup_bytes(tiny_module(999), {}));  // an operation it does not evaluate
    // Other operations it does: N / 3 and N % 3 (UDiv, UMod) with N = 9, 7.
    EXPECT_EQ(workgroup_bytes(tiny_module(134), std::vector<uint32_t>{9}), 3u * 16u);
    EXPECT_EQ(workgroup_bytes(tiny_module(137), {}), 1u * 16u);
    std::vector<uint32_t> m = tiny_module();
    m[0] = 0x03022307;  // not the magic number
    EXPECT_FALSE(workgroup_bytes(m, {}));
    m = tiny_module();
    m.resize(m.size() - 2);  // the last instruction cut short
    EXPECT_FALSE(workgroup_bytes(m, {}));
    m = tiny_module();
    m[5] = 0;  // an instruction of no words
    EXPECT_FALSE(workgroup_bytes(m, {}));
    EXPECT_FALSE(workgroup_bytes(std::vector<uint32_t>{0x07230203}, {}));
}

// Random words in place of a real module's, a few at a time: an answer or none, never a read
// past the words, never a hang.
TEST(SpirvShared, MalformedModulesNeverReadPastTheirWords) {
    const auto words = find_module("attn_decode");
    ASSERT_FALSE(words.empty());
    std::mt19937 rng(7);
    for (int it = 0; it < 2000; ++it) {
        std::vector<uint32_t> m(words.begin(), words.end());
        const int edits = 1 + (int)(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            const size_t at = 1 + rng() % (m.size() - 1);
            m[at] = rng() % 3 == 0 ? (uint32_t)rng() : (m[at] ^ (1u << (rng() % 32)));
        }
        if (rng() % 4 == 0) m.resize(rng() % m.size());
        (void)workgroup_bytes(m, std::vector<uint32_t>{256, 128, 2});
    }
    SUCCEED();
}

// attn_decode.comp's declarations for g heads of head_dim values in workgroups of wg threads:
// qs (g · hd/2 vec2), sc (g · 64/4 vec4), red (g · max(wg, 2 · 64) floats), hm, hl, ha (g floats
// each), ored (g · wg vec2), last_split, knew and vnew (hd/2 words each), ro (g · hd floats when
// the output is rounded, else one).
uint64_t attn_declared(uint64_t wg, uint64_t hd, uint64_t g, bool round) {
    return g * hd / 2 * 8 + g * 16 * 16 + g * std::max<uint64_t>(wg, 128) * 4 + 3 * g * 4 +
           g * wg * 8 + 4 + hd * 4 + (round ? g * hd : 1) * 4;
}

TEST(SpirvShared, DecodeAttentionAsDeclared) {
    for (auto [wg, hd, g] : {std::tuple{256u, 256u, 2u}, std::tuple{128u, 128u, 4u},
                             std::tuple{256u, 64u, 1u}, std::tuple{64u, 64u, 8u}}) {
        for (uint32_t round : {0u, 1u}) {
            const uint32_t spec[] = {wg, hd, g, 8, 1, round};
            EXPECT_EQ(workgroup_bytes(find_module("attn_decode"), spec),
                      attn_declared(wg, hd, g, round != 0))
                << wg << " " << hd << " " << g << " " << round;
        }
    }
}

// gemv_tile.comp's, which Kernels::gemv_tile_shared_bytes gives where it decides that the tiled
// GEMV fits: sxq and sxd (24 bytes a 16-value block of x), red (WG floats), rov (TILE floats)
// and last_part.
TEST(SpirvShared, TiledGemvAsDeclared) {
    for (const char* name : {"gemv_tile_q4_k", "gemv_tile_q6_k"}) {
        for (auto [wg, nb] : {std::pair{256u, 16u}, std::pair{512u, 48u}, std::pair{128u, 4u}}) {
            const uint32_t spec[] = {wg, 32, 0, nb};
            EXPECT_EQ(workgroup_bytes(find_module(name), spec),
                      Kernels::gemv_tile_shared_bytes(256 * nb, wg))
                << name << " " << wg << " " << nb;
        }
    }
}

// deltanet_step.comp's: red (WG floats), qs and ks (d_k floats each), part_sum (2 · KS · CW
// floats), last_group and gated (CW floats); the same in its subgroup module.
TEST(SpirvShared, DeltaNetStepAsDeclared) {
    for (const char* name : {"deltanet_step", "deltanet_step_sg"}) {
        for (auto [cw, ks, dk, dv] :
             {std::tuple{128u, 4u, 128u, 128u}, std::tuple{32u, 4u, 128u, 128u},
              std::tuple{64u, 1u, 32u, 64u}}) {
            const uint32_t spec[] = {cw * ks, dk, 4, dv, cw, ks};
            const uint64_t want = 4ull * cw * ks + 8ull * dk + 8ull * ks * cw + 4 + 4ull * cw;
            EXPECT_EQ(workgroup_bytes(find_module(name), spec), want)
                << name << " cw " << cw << " ks " << ks;
        }
    }
}

// gemv.comp's: over x in bytes xq and xd (48 bytes a block of 32 values), NORM_IN's xss (WG
// floats), the row partials (NR rows of WG floats; twice ROWS for the SwiGLU pair), the norm
// epilogue's last_group, and without the epilogue ROUND_OUT's ro_v (GROUPS · ROWS ·
// ROUND_OUT + 1 floats). Kernels::gemv_shared_bytes, which sizes the launcher's shapes,
// counts the partials with one more row each for NORM_IN and ROUND_OUT and must cover every
// variant.
TEST(SpirvShared, GemvAsDeclaredAndCoveredByTheLaunchersEstimate) {
    struct Case {
        const char* name;
        bool bytes, norm_in, pair, epilogue;
    };
    const Case cases[] = {{"gemv_q4_k_i8", true, false, false, false},
                          {"gemv_q4_k_nin_i8_sg", true, true, false, false},
                          {"gemv_q6_k_swiglu_nin_i8_sg", true, true, true, false},
                          {"gemv_q4_k_norm_i8", true, false, false, true},
                          {"gemv_q8_0", false, false, false, false},
                          {"gemv_f32_swiglu_sg", false, false, true, false}};
    for (const Case& c : cases) {
        const auto words = find_module(c.name);
        if (words.empty()) continue;  // a build without integer dot products
        for (auto [wg, rows, cols] : {std::tuple{512u, 2u, 4096u}, std::tuple{1024u, 8u, 1024u},
                                      std::tuple{64u, 3u, 12288u}}) {
            for (uint32_t round : {0u, 1u}) {
                const bool rounds = c.bytes && !c.epilogue;
                if (round && !rounds) continue;
                const uint32_t xblocks = c.bytes ? cols / 32 : 1;
                const uint32_t spec[] = {wg, rows, 1, 1, xblocks, 0, 1, 0, 0, 0, round};
                const uint64_t nr = c.pair ? 2 * rows : rows;
                const uint64_t want =
                    (c.bytes ? 48ull * xblocks : 0) + (c.norm_in ? 4ull * wg : 0) + 4ull * nr * wg +
                    (c.epilogue ? 4 : 0) + (rounds ? 4ull * (rows * round + 1) : 0);
                const auto got = workgroup_bytes(words, spec);
                ASSERT_TRUE(got) << c.name;
                EXPECT_EQ(*got, want)
                    << c.name << " wg " << wg << " rows " << rows << " round " << round;
                const auto x = c.bytes ? Kernels::GemvX::bytes : Kernels::GemvX::global;
                const uint32_t est_rows = (uint32_t)nr + (c.norm_in ? 1 : 0) + (round ? 1 : 0);
                EXPECT_GE(Kernels::gemv_shared_bytes(x, cols, wg, est_rows), *got + 256)
                    << c.name << ": the launcher's estimate leaves no margin";
            }
        }
    }
}

// The NV cooperative-matrix-2 GEMM tile that does not split over K carries none of the split's
// code (gemm_cm2.comp SPLIT_K): no workgroup memory at all, where its split module holds the
// word that tells a part it arrived last. The split's code in every tile coincided with the
// 9B's prefill on an H100 falling from 10,418 to 2,360 tokens/s (docs/perf/history.md,
// 2026-12-06).
TEST(SpirvShared, TheNvTileThatDoesNotSplitHasNoSplitState) {
    int built = 0;
    for (const char* t : {"f32", "f16", "q4_0", "q8_0", "q4_k", "q5_k", "q6_k"}) {
        const auto tile = find_module(std::string("gemm_") + t + "@nv_coopmat2");
        if (tile.empty()) continue;  // a glslc without the NV extension builds neither
        ++built;
        const uint32_t spec[] = {256, 128, 128, 32};
        EXPECT_EQ(workgroup_bytes(tile, spec), 0u) << t;
        const auto split = find_module(std::string("gemm_") + t + "_split@nv_coopmat2");
        ASSERT_FALSE(split.empty()) << t << ": a tile without its split module";
        const auto bytes = workgroup_bytes(split, spec);
        ASSERT_TRUE(bytes) << t;
        EXPECT_GT(*bytes, 0u) << t;
    }
    if (!built) GTEST_SKIP() << "no NV cooperative matrix 2 modules in this build";
}

}  // namespace
}  // namespace dl::vk
