// The kernels' knobs: what the launchers of every family (kernels_*.h) would otherwise choose by
// their own rules. Kernels holds one (KernelFamily::tuning); the driver's options (DriverOptions,
// the DELTALLM_VK_* variables) set those the driver exposes, the speed reports and tests the
// others. Every default is what measured fastest or what a real use needs.
#pragma once

#include <cstdint>

namespace dl::vk {

struct Tuning {
    // ---- The decode GEMVs (kernels_gemv.h).

    // How the block-format GEMVs read x (shaders/gemv.comp): from the x buffer as F32
    // (`global`), or rounded to signed bytes in shared memory and multiplied by 4-way integer dot
    // products (`bytes`, X_INT8; devices and builds with integer dot products). `automatic` picks
    // by row length what measured fastest (gemv_x_for: bytes for rows of 1024+ where integer dot
    // products are accelerated). Where the device or build lacks bytes, or x's bytes do not fit
    // the shared memory, it falls back to `global`; F32 / F16 weights always read x globally.
    // The batched GEMV follows the same choice (GemmKernels::gemv_batch_reads_bytes).
    enum class GemvX { automatic, global, bytes };
    GemvX gemv_x = GemvX::automatic;
    // For the GEMV speed report only: a nonzero shape forces threads and rows a workgroup.
    struct GemvShape {
        uint32_t threads = 0, rows = 0;
    };
    GemvShape gemv_shape;
    // The byte GEMVs that have the device to themselves take fewer rows a group where that
    // evens out their row blocks over the device's workgroup slots (balanced_rows;
    // DELTALLM_VK_GEMV_BALANCE, off for measurements). gemv_slots: the slots counted (0:
    // gemv_waves workgroups of 512 invocations a multiprocessor; tests set it).
    bool gemv_balance = true;
    uint32_t gemv_slots = 0;
    // For the GEMV speed report only: the parts of its work gemv.comp leaves out (its ABLATE
    // bits: 1 the reads of x, 2 the Q4_K decode and products, 4 the quantization of x to int8), to
    // measure what each costs; 0 otherwise (the results are then wrong).
    uint32_t gemv_omitted_work = 0;
    // Row groups of the byte-path GEMVs (gemv.comp GROUPS; a power of two, 1: none): a workgroup
    // of gemv_groups times the threads takes as many times the rows and rounds x once for them.
    // The Q6_K GEMV with the norm epilogue takes twice gemv_groups (gemv_record says why).
    uint32_t gemv_groups = 4;
    // The byte-path GEMVs run on at most gemv_waves workgroups a multiprocessor, where the
    // device says how many it has (Features::sm_count; 0: a workgroup a row block); each
    // workgroup then takes every grid-th row block over the x it rounded once (gemv.comp).
    uint32_t gemv_waves = 2;
    // Which GEMVs over x as int8 take slices of 64 weights (gemv.comp WIDE) and half the rows a
    // group: `automatic` Q4_K everywhere and Q6_K over rows of 8192+ values (what measured
    // fastest, gemv_record), `all` every Q4_K and Q6_K one, `off` none.
    enum class GemvWide { off, automatic, all };
    GemvWide gemv_wide = GemvWide::automatic;
    // For tests: at most this many workgroups for every GEMV (0: no such limit).
    uint32_t gemv_grid = 0;
    // Which GEMVs over Q4_K and Q6_K rows (held in tiles, weight_layout.h) run on the tiled GEMV
    // (shaders/gemv_tile.comp) rather than gemv.comp, where the device has integer dot products,
    // subgroup arithmetic and shuffles in subgroups of 4+ and the GEMV reads x as int8 (every
    // form but the norm epilogue): `on` every one, `off` none.
    enum class GemvTiled { off, on };
    GemvTiled gemv_tiled = GemvTiled::on;
    // The parts the tiled GEMVs that split their tiles' runs take (GemvKernels::gemv_split;
    // tests; 0: by the device).
    uint32_t gemv_split_parts = 0;
    // A tile that would be split over two workgroups of eight slots (its rows of 16+ runs) is
    // taken by one workgroup of sixteen instead, where the device has workgroups of
    // kTileWideThreads: as many invocations a tile, and no parts to add. false keeps the two
    // parts (tests).
    bool gemv_wide_tiles = true;
    // For the speed report only: slots a matrix of every tiled GEMV gemv_record records (a power
    // of two; 0: by the rule of record_on_tiled_gemv).
    uint32_t gemv_tile_slots = 0;
    // For the speed report only: rows a workgroup of those GEMVs takes, a divisor of kTileRows
    // (part of a tile of the weights' layout; 0: kTileRows).
    uint32_t gemv_work_tile = 0;

    // ---- The decode attention and the window attention (kernels_attention.h).

    // A context of up to this many chunks of kAttnSplit rows is walked by one split, which
    // writes the output itself (no partials, no merge); longer ones are dealt to the splits.
    // H200, tg128 from an empty context: Qwen3-8B 366.7 -> 379.4 t/s at 2 (373.9 at 0, where only
    // one chunk is one split); at 1024 and 4096 rows the same rule as 0 (docs/perf/history.md).
    uint32_t attn_one_split = 2;
    // The NV cooperative matrix 2 attention tile (AttentionKernels::attention_cm2).
    struct AttentionCm2 {
        uint32_t query_vectors = 0, keys = 0, heads = 0, rows = 0;
    };
    // The speed report's override of query_vectors and keys (0: attention_cm2()'s choice).
    AttentionCm2 attention_cm2_tile;
    // The F16 expansion of Q4_K and Q6_K rows 64 values a thread (dequant_f16_q4k.comp,
    // dequant_f16_q6k.comp: a few 16-byte loads and 128 bytes written) rather than a 16-byte
    // chunk (dequant_f16.comp; the speed reports and tests reach both). Off: on an H100 a
    // Qwen3-30B-A3B stack took 0.80 ms this way against 0.24 (DELTALLM_VK_DEQUANT_K_WIDE).
    bool dequant_k_wide = false;
    // The NV tensor-core window attention loads its key tiles that lie wholly within the written
    // keys without clamping, and leaves out the causal mask of tiles every row sees whole
    // (DELTALLM_VK_ATTN_CM2_UNCLAMPED). On an H100 the kernel 1.37-1.39x on Qwen3-8B's long
    // windows, the Qwen3-30B-A3B's pp2048 +3.1 % (docs/perf/history.md, 2026-12-07 (12:20)).
    bool attention_cm2_unclamped = true;
    // False: attention_rows() scores without subgroup shuffles even where the device has them
    // (tests reach both modules with it).
    bool attention_shuffles = true;
    // A window's attention split over its keys (AttentionKernels::attention_rows_split): -1 the
    // launcher's rule, 0 or 1 never, 2 or more that many parts wherever the kernel can split.
    int attention_rows_parts = -1;

    // ---- The Gated DeltaNet layers (kernels_deltanet.h).

    // Value columns a workgroup of the decode step takes where a head's columns are split over
    // workgroups (a power of two below d_v; DeltaNetKernels::deltanet_step).
    uint32_t deltanet_columns = 32;
    // The step's workgroup sums through subgroup sums where the device has subgroup arithmetic
    // (deltanet_step_sg; off: the shared-memory tree, for tests of both).
    bool deltanet_subgroups = true;
    // The scan module of a window (DeltaNetKernels::deltanet_rows).
    enum class DeltaNetScan { best, clustered, shuffle, plain, chunked };
    DeltaNetScan deltanet_scan = DeltaNetScan::best;  // what the driver's windows ask for
    // The walk over the chunks (deltanet_chunk.comp): threads a value column and value columns
    // a workgroup; zero: the launcher's choice (the speed report tries others).
    struct DeltaNetChunkTile {
        uint32_t groups = 0, cols = 0;
    };
    DeltaNetChunkTile deltanet_chunk_tile;

    // ---- The prefill GEMMs (kernels_gemm.h).

    // For the GEMM speed report only: the parts of their work the cooperative-matrix tiles
    // leave out, to measure what each costs: 1 the weight dequantization, 2 the products (the
    // results are then wrong). 0 otherwise.
    uint32_t gemm_omitted_work = 0;
    // The NV cooperative matrix 2 tile: weight rows, window rows and columns a step, and the
    // workgroup's invocations. gemm() picks one from the weight type and the grid of the
    // matrix's rows (or those of every GEMM recorded in the same stage, stage_rows, when more)
    // by the window's (gemm_cm2_tile); a nonzero gemm_tile forces one (speed report,
    // DELTALLM_VK_GEMM_TILE).
    struct GemmTile {
        uint32_t bm = 0, bn = 0, bk = 0, wg = 256;
    };
    GemmTile gemm_tile;
    // For the GEMM speed report only: the NV tiles over F16 weights accumulate in F16.
    bool gemm_acc16 = false;
    // Tests and the speed report: 0 never expands W to F16, 1 always does when given a scratch,
    // -1 (every real use) decides by the window's rows.
    int gemm_expand = -1;
    // ...by whether the GEMM has at least this many rows (DELTALLM_VK_GEMM_EXPAND_ROWS; the plan
    // gives windows of at least kGemmExpandRows rows the scratch).
    uint32_t gemm_expand_rows = 64;
    // GEMMs of at most this many window rows (a batched step's decode tokens, a short window)
    // run as one batched GEMV over the rows (GemmKernels::gemv_batch), which reads each weight
    // once and keeps every workgroup busy, rather than on the tiles (DELTALLM_VK_GEMM_GEMV_ROWS;
    // 0: never). Measured on an H100 (9B Q4_K_M, 128 batched steps of 64 rows after their
    // prompts: 2,240 t/s aggregate on the tiles, 1,223 as the GEMV over bytes in 32 threads).
    uint32_t gemm_gemv_rows = 32;
    // GEMMs over F32 or F16 matrices (a mixture's router, kept F32 in a quantized file; small)
    // of at most this many rows run as the batched GEMV whatever gemm_gemv_rows says
    // (DELTALLM_VK_GEMM_GEMV_ROWS_FLOAT; 0: by gemm_gemv_rows): on the tiles, the router of a
    // batched step of 8 rows took ~50 us a layer on an H100; as the GEMV its B8 steps gained
    // 7.8 % (35B-A3B) and 9.3 % (Qwen3-30B-A3B) (docs/perf/history.md, 2026-12-07 (03:20)).
    uint32_t gemm_gemv_rows_float = 64;
    // GEMMs over Q4_K or Q6_K of more rows than gemm_gemv_rows and at most gemm_skinny_rows run
    // as skinny GEMMs on KHR cooperative matrices (GemmKernels::gemm_skinny; shaders/
    // gemm_skinny.comp) where the device has them (DELTALLM_VK_GEMM_SKINNY, _ROWS). The driver
    // lowers gemm_gemv_rows to kSkinnyGemvRows for a model whose quantized matrices are all such
    // (ResidentDriver::create). Their parts of K (0: by the grid) and their workgroup's tiles
    // of 32 weight rows (0: four over one tile of X, else two) for the speed forms. Up to 256
    // rows: on an H100 (9B Q4_K_M, against the NV tiles from 129 rows) pp164 4,410 -> 5,533,
    // pp200 5,302 -> 6,048, pp256 6,673 -> 7,644 t/s (docs/perf/history.md, 2026-12-07 (16:50)).
    bool gemm_skinny = true;
    uint32_t gemm_skinny_rows = 256;
    static constexpr uint32_t kSkinnyGemvRows = 4;
    uint32_t gemm_skinny_parts = 0;
    // Its parts by the grid over one tile of X (up to 16 rows) go down to one block each where
    // four blocks a part would leave the grid under half the multiprocessors
    // (DELTALLM_VK_GEMM_SKINNY_FILL; H100, the 0.8B's B8 generation +19 %).
    bool gemm_skinny_fill = true;
    uint32_t gemm_skinny_rt = 0;
    // The most tiles of 16 rows of X a workgroup takes (0: four; DELTALLM_VK_GEMM_SKINNY_MT):
    // fewer make more workgroups, each weight tile then read by several (from the L2).
    uint32_t gemm_skinny_mt = 0;
    // The skinny GEMM requests the next stage's rows of X with its weights, before the products
    // (PREFETCH_X), instead of reading them between the stage's barriers
    // (DELTALLM_VK_GEMM_SKINNY_PREFETCH); and its weights' blocks 1 or 2 stages ahead (W_AHEAD,
    // DELTALLM_VK_GEMM_SKINNY_AHEAD). Both on an H100 (9B Q4_K_M, pp16 + tg32): B8 on the skinny
    // GEMM 927.7 t/s against 837.6 on the batched GEMV, B64 1,152.1 against 1,151.4 without them.
    bool gemm_skinny_prefetch = true;
    uint32_t gemm_skinny_ahead = 2;
    // The skinny GEMM decodes Q4_K nibbles to halves by bit operations and F16 FMAs (HALF_DECODE;
    // DELTALLM_VK_GEMM_SKINNY_HALF), instead of through F32: off, twice measured on an H100
    // within the spread (docs/perf/history.md, 2026-12-07 (03:20)).
    bool gemm_skinny_half = false;
    // GEMM tiles of at most kGemmSplitRows rows whose grid leaves the device idle split K over
    // workgroups (GemmKernels::split_for; DELTALLM_VK_GEMM_SPLIT): -1 by the grid, except on
    // the NV cooperative matrix 2 tiles until they are checked on a device; 0 never; 1 by the
    // grid on every tile that can; 2 to 16 forces that many parts.
    int gemm_split = -1;
    // A window's expert GEMM tiles read the layer's expert stacks expanded to F16 first (a
    // scratch the driver makes at its start: the largest layer's gate and up stacks), rather
    // than decoding blocks in every tile (DELTALLM_VK_EXPERT_EXPAND; off until measured).
    bool expert_expand = false;
    // The batched GEMV's form (shaders/gemv_batch.comp DECODE_ONCE): each row's weight slice
    // decoded once for a group's vectors, or again for each (DELTALLM_VK_GEMV_BATCH_ONCE); and
    // its weight rows a workgroup (DELTALLM_VK_GEMV_BATCH_ROWS 1, 2, 4 or 8; 0: by the vectors).
    bool gemv_batch_decode_once = false;
    uint32_t gemv_batch_rows = 0;
    // Its threads a workgroup (DELTALLM_VK_GEMV_BATCH_THREADS 32 to 256; 0: over bytes a
    // subgroup's worth, a weighted sum of several rows' experts too, else one a slice of the
    // row, 64 to 128, or a (slot, slice) pair, up to 256): fewer take more slices of each row,
    // so fewer partial sums are reduced across the workgroup for the same products.
    uint32_t gemv_batch_threads = 0;
    // The router's top-k by subgroup reductions where the device has them (tests turn it off to
    // run the shared-memory tree).
    bool moe_route_subgroups = true;
    // The top-k's form (moe_topk.glsl FORM; DELTALLM_VK_MOE_ROUTE): ranks (each expert ranked in
    // its group of 32, then the groups' best k against each other; three barriers; up to 512
    // experts and 8 chosen; on an H100 the 35B-A3B's tg128 277.5 -> 284.5 t/s against the
    // merge), the subgroups' own choices merged (subgroups only; the top 8 of 256 alone 13.3 ->
    // 10.2 us against the rounds, the 35B-A3B's tg64 265.1 -> 273.1), or k rounds of an argmax
    // over the workgroup.
    enum class RouteForm : uint32_t { rounds = 0, merge = 1, rank = 2 };
    RouteForm moe_route_form = RouteForm::rank;
    // A window's (row, slot) pairs are grouped by expert (moe_sort) where they are at least this
    // many per expert on average; fewer (a batched step's decode rows, mostly one pair an expert)
    // run in the rows' order as the token's decode does: no sort, and the down projection forms
    // each slot's SwiGLU as it reads and sums the row's slots into h: a mixture layer's 7 or 8
    // stages (8 where the sorted form rounds its SwiGLU's rows to bytes) become 5
    // (DELTALLM_VK_EXPERT_SORT; 0: always grouped).
    uint32_t expert_sort_pairs = 1;
    // Steps of at least this many rows in that order (0: none) round their slots' SwiGLU to bytes
    // once, a pass of its own (round_rows with up_off), and the down projection reads those
    // bytes in integer dot products: each of its workgroups otherwise reads every slot's gates
    // and ups in F32 and forms the SwiGLU again, for a few weight rows
    // (DELTALLM_VK_EXPERT_DOWN_ROUNDED). Off: on an H100, B8 generation of the Qwen3-30B-A3B
    // -3.2 %, of the 35B-A3B +3.4 % (docs/perf/history.md, 2026-12-07 (15:40)).
    uint32_t expert_down_rounded_rows = 0;
    // A window's expert GEMMs run as grouped GEMM tiles (ExpertKernels::gemm_experts) where its
    // (row, slot) pairs are at least this many per expert on average, else as grouped batched
    // GEMVs (DELTALLM_VK_EXPERT_TILES; 0: never).
    uint32_t expert_tile_pairs = 8;
    // Those tiles over Q4_K and Q6_K stacks run as the skinny GEMM's grouped form where the
    // device runs it (ExpertKernels::expert_skinny; DELTALLM_VK_EXPERT_SKINNY). On an H100,
    // 35B-A3B Q4_K_M: pp512 3,035 -> 5,384 t/s, pp2048 7,295 -> 10,189.
    bool expert_skinny = true;
    // On the NV cooperative matrix 2 tiles, windows whose pairs are at least this many an expert
    // on average (and whose gate, up and down stacks are all Q4_K or Q6_K of whole tiles of rows)
    // run the expert GEMMs over the pairs' inputs gathered in the experts' order as F16 rows,
    // each output left at its pair's position in that order (ExpertKernels::experts_sorted_cm2,
    // gemm_experts_cm2.comp; DELTALLM_VK_EXPERT_CM2; 0: never). Over the window's F16 expansion
    // of the stacks (three a layer, 0.24-0.32 ms each on an H100 whatever the window's rows) the
    // tiles run at 84-109 TFLOP/s against the skinny form's 36-56: Qwen3-30B-A3B's pp2048 (128
    // pairs an expert) 10,245 -> 12,183 t/s; at 64 the two forms tie, below it the expansions
    // cost more than the tiles save (docs/perf/history.md, 2026-12-07 (09:05)).
    uint32_t expert_cm2_pairs = 96;
    // The sorted expert tiles decode the stacks' blocks in their loads instead of reading the
    // stacks expanded to F16 for the window (DELTALLM_VK_EXPERT_CM2_BLOCKS).
    bool expert_cm2_blocks = false;

    // ---- Sampling and the probes (kernels_sample.h, kernels_probes.h).

    // Logits a workgroup of the first pass takes: a multiple of 256 (tests force small ones to
    // cross chunk boundaries).
    uint32_t sample_chunk = 4096;
    // For the speed report only: a nonzero shape forces threads a workgroup and loads a thread of
    // the streaming read probe.
    struct StreamShape {
        uint32_t threads = 0, loads = 0;
        uint32_t grid = 0;  // nonzero: that many workgroups, each looping over the chunks
    };
    StreamShape stream_shape;
};

}  // namespace dl::vk
