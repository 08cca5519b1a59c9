// Typed launchers of the compute kernels: each records one dispatch (no barrier) into a
// CommandList, choosing the module and workgroup shape from the device's features. Offsets of
// activations are in floats inside the bound views; weight views start at the tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "quant/types.h"
#include "vulkan/pipeline.h"

namespace dl::vk {

// The part of its stage's weight bytes a GEMV reads (Kernels::gemv's share).
struct GemvPart {
    float of_stage = 1.f;
};

class Kernels {
  public:
    Kernels(Device& dev, Pipelines& pipes) : dev_(dev), pipes_(pipes) {}

    // True when gemv() reads weights of type t natively.
    static bool gemv_supports(QType t);
    // The GGUF block formats the matrix kernels decode in place: Q4_0, Q8_0, Q4_K, Q5_K, Q6_K.
    static bool block_format(QType t);
    // x rounded to bytes once, by the GEMV that writes it, rather than by every workgroup of
    // the GEMV that reads it (gemv.comp ROUND_OUT and XPRE; only over x in bytes, and not for a
    // reader over a norm's input). A rounding of n values takes rounding_floats(n) floats of
    // its buffer (the layout: gemv.comp).
    struct GemvRounding {
        // x_off points at the rounding of x another GEMV wrote, not at floats.
        bool x_rounded = false;
        // This GEMV also rounds its rows to y[out_off ..] (kNone: it does not).
        uint32_t out_off = kNone;
        // With out_off, on the tiled GEMV only (gemv_tiled_for): the rows rounded times these
        // norm weights, each 16-value block's sum of squares of the rows after the scales
        // (normed_rounding_floats), for readers over that norm's input (gemv_normed with
        // x_rounded), which then neither read the floats nor round them.
        View out_norm;
    };
    static uint32_t rounding_floats(uint32_t n) { return n / 4 + n / 8; }
    static uint32_t normed_rounding_floats(uint32_t n) { return n / 4 + n / 8 + n / 16; }
    // y[y_off + r] (=|+=) sum_c W[r, c] · x[x_off + c] for r < rows; W is rows × cols of type t.
    // share: the part of its stage's weight bytes this GEMV reads where other GEMVs run beside
    // it in the stage (1: alone in it), which sets how much of the device its shape may take
    // (gemv_balance, shared_shape).
    void gemv(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
              uint32_t x_off, View y, uint32_t y_off, bool accumulate, GemvPart share = {},
              const GemvRounding* rounding = nullptr);
    // Whether the GEMV of this shape (norm: gemv_normed; pair: gemv_swiglu) can round its rows
    // for the next GEMV: it reads x in bytes and its row blocks are whole 16-value blocks.
    bool gemv_rounds(QType t, uint32_t rows, uint32_t cols, bool pair, bool norm,
                     GemvPart share = {}) const;
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
    // Rows a group (k_rows, halved while that pays) for `rows` rows in workgroups of `groups`
    // row groups over `slots` slots: a workgroup takes its row blocks in turn, so a GEMV takes
    // as long as its busiest workgroup, rounds · rows a block. A half shape is taken where it
    // saves a tenth of that.
    static uint32_t balanced_rows(uint32_t rows, uint32_t k_rows, uint32_t groups, uint32_t slots);
    // The shape of a byte GEMV that shares its stage and reads `share` of its bytes (< 1), over
    // a device of `slots` workgroup slots of its size: where its row blocks of k_rows rows a
    // group are fewer than its share of the slots, it takes fewer rows a group (balanced_rows
    // over that share) in at most that many workgroups, so that it fills its part of the device
    // beside the others rather than leaving most of it idle (grid 0: no limit of its own). A GEMV
    // with as many blocks as its share keeps its shape: a smaller grid would only give it more
    // rounds.
    struct SharedShape {
        uint32_t k_rows, grid;
    };
    static SharedShape shared_shape(uint32_t rows, uint32_t k_rows, uint32_t groups, uint32_t slots,
                                    float share);
    // For the GEMV speed report only: gemv.comp's ABLATE bits (0 otherwise; results then wrong).
    uint32_t gemv_ablate = 0;
    // Row groups of the byte-path GEMVs (gemv.comp GROUPS; a power of two, 1: none): a workgroup
    // of gemv_groups times the threads takes as many times the rows and rounds x once for them.
    // The Q6_K GEMV with the norm epilogue takes twice gemv_groups (gemv_record says why).
    uint32_t gemv_groups = 4;
    // The byte-path GEMVs run on at most gemv_waves workgroups a multiprocessor, where the
    // device says how many it has (Features::sm_count; 0: a workgroup a row block); each
    // workgroup then takes every grid-th row block over the x it rounded once (gemv.comp).
    uint32_t gemv_waves = 2;
    // Which GEMVs over x in bytes take slices of 64 weights (gemv.comp WIDE) and half the rows a
    // group: `automatic` Q4_K everywhere and Q6_K over rows of 8192+ values (what measured
    // fastest, gemv_record), `all` every Q4_K and Q6_K one, `off` none.
    enum class GemvWide { off, automatic, all };
    GemvWide gemv_wide = GemvWide::automatic;
    // For tests: at most this many workgroups for every GEMV (0: no such limit).
    uint32_t gemv_grid = 0;
    // Which GEMVs over Q4_K and Q6_K rows (held in tiles, weight_layout.h) run on the tiled GEMV
    // (shaders/gemv_tile.comp) rather than gemv.comp, where the device has integer dot products,
    // subgroup arithmetic and shuffles in subgroups of 4+ and the GEMV reads x in bytes (every
    // form but the norm epilogue): `on` every one, `off` none.
    enum class GemvTiled { off, on };
    GemvTiled gemv_tiled = GemvTiled::on;
    // The tiled GEMVs that add to y (the token command's output and down projections, alone
    // in their stages) and whose tiles are fewer than the device's multiprocessors split each
    // tile's runs over up to four workgroups, the last to finish adding the parts in order
    // (gemv_tile.comp KSPLIT), where gemv_split is set: a zeroed scratch view of at least
    // split_bytes(rows) for every such GEMV, used by one at a time (it is zero again after
    // each). gemv_split_parts: force that many parts (tests; 0: by the device).
    View gemv_split;
    uint32_t gemv_split_parts = 0;
    // A tile that would be split over two workgroups of eight slots (its rows of 16+ runs) is
    // taken by one workgroup of sixteen instead, where the device has workgroups of
    // kTileWideThreads: as many invocations a tile, and no parts to add. false keeps the two
    // parts (tests).
    bool gemv_wide_tiles = true;
    // For the speed report only: slots a matrix of every tiled GEMV gemv_record records (a power
    // of two; 0: by the rule of tile_route).
    uint32_t gemv_tile_slots = 0;
    // For the speed report only: rows a workgroup of those GEMVs takes, a divisor of kTileRows
    // (part of a tile of the weights' layout; 0: kTileRows).
    uint32_t gemv_work_tile = 0;
    static uint64_t split_bytes(uint32_t rows);
    // gemv_tile.comp's shared memory for rows of `cols` values in workgroups of `threads`.
    static uint64_t gemv_tile_shared_bytes(uint32_t cols, uint32_t threads);
    // Whether a GEMV over rows of cols values of type t that reads x in bytes runs on the tiled
    // GEMV here (gemv_tiled, the device's features and shared memory).
    bool gemv_tiled_for(QType t, uint32_t cols) const;
    // The tiled GEMV's largest workgroup in the token command: eight slots of a tile's 32 rows.
    static constexpr uint32_t kTileMaxThreads = 256;
    // The workgroup of a tile of sixteen slots (gemv_wide_tiles).
    static constexpr uint32_t kTileWideThreads = 512;
    // How the block-format GEMVs read x (shaders/gemv.comp): from the x buffer as F32
    // (`global`), or rounded to signed bytes in shared memory and multiplied by 4-way integer dot
    // products (`bytes`, X_INT8; devices and builds with integer dot products). `automatic` picks
    // by row length what measured fastest (gemv_x_for: bytes for rows of 1024+ where integer dot
    // products are accelerated). Where the device or build
    // lacks bytes, or x's bytes do not fit the shared memory, it falls back to `global`; F32 / F16
    // weights always read x globally.
    enum class GemvX { automatic, global, bytes };
    GemvX gemv_x = GemvX::automatic;
    // The path gemv() takes for these weights with the launcher's own workgroup shape.
    GemvX gemv_x_for(QType t, uint32_t cols) const;
    // How the GEMV of this shape (fused: gemv_fused) reads x: gemv_x_for(t, cols), or F32 where
    // the launcher's shape has no room for x in bytes.
    GemvX gemv_path(QType t, uint32_t rows, uint32_t cols, bool pair, bool norm,
                    bool fused = false) const {
        return gemv_launch(t, rows, cols, fused, pair, norm, {}, false).x;
    }
    // gemv() with the fusion of the decode token command (shaders/gemv.comp, NORM_EPILOGUE),
    // which saves the dependent norm stage after it: once y is written, the workgroup that
    // finishes last writes the RMSNorm of the whole new y into the y view, y[xn_off + i] =
    // y[y_off + i] / sqrt(mean(y²) + eps) · norm_w[i] for i < rows. Workgroups count themselves
    // on the 32-bit word counter[counter_idx], which must be 0 before the dispatch and is 0
    // again after it; dispatches that may overlap (no barrier between them) need distinct words.
    // It may read x rounded by another GEMV, but does not round its own rows.
    struct GemvFusion {
        View norm_w, counter;
        uint32_t counter_idx = 0, xn_off = 0;
        float eps = 0;
    };
    void gemv_fused(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                    uint32_t x_off, View y, uint32_t y_off, bool accumulate, const GemvFusion& fuse,
                    const GemvRounding* rounding = nullptr);
    // A GEMV over the RMSNorm of x rather than x (gemv.comp NORM_IN): x · norm_w / sqrt(mean(x²)
    // + eps) over the cols values at x_off, normalized by each workgroup as it rounds x to bytes,
    // so the GEMV that wrote x needs no norm epilogue. Only where gemv_x_for(t, cols) is `bytes`;
    // norm_w's view starts 16-byte aligned.
    struct GemvNormIn {
        View norm_w;
        float eps = 0;
    };
    void gemv_normed(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                     uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                     const GemvNormIn& norm, GemvPart share = {},
                     const GemvRounding* rounding = nullptr);
    // A GEMV over a Gated DeltaNet layer's output whose gated RMSNorm the decode step left to its
    // reader (DeltaNetStep::ss_off; gemv.comp GATED_IN): x holds o · norm_w · silu(z), and
    // x[ss_off ..] the sums of squares of o of each of a head's `groups` column groups; each
    // value head of `head` values is scaled by 1 / sqrt(mean(o²) + eps) as x is rounded to
    // bytes. Only where gemv_x_for(t, cols) is `bytes` (gemv_gates). With rounding->x_rounded,
    // x is that rounded by the step already (DeltaNetStep::round_y; on the tiled GEMV only,
    // gemv_tiled_for), its blocks' scales multiplied by the heads' factors. With ss_off kNone
    // (only over x rounded already): no factor, x is another mixer's output rounded, read in the
    // DeltaNet output projection's form so that both take one pipeline (the attention layers'
    // output projections of a hybrid model: the code the DeltaNet layers run stays warm).
    struct GemvGatedIn {
        uint32_t ss_off = 0, head = 0, groups = 0;
        float eps = 0;
    };
    void gemv_gated(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                    uint32_t x_off, View y, uint32_t y_off, bool accumulate, const GemvGatedIn& g,
                    const GemvRounding* rounding = nullptr);
    bool gemv_gates(QType t, uint32_t cols) const;
    // y[y_off + r] = silu(G[r]·x) · (U[r]·x) for r < rows: the FFN gate and up projections and
    // the SwiGLU in one dispatch (gemv.comp SWIGLU_PAIR). G and U (rows × cols of type t each)
    // lie at byte offsets g_off and u_off (multiples of 4) of the weight view w. With `norm`,
    // over the RMSNorm of x (as gemv_normed).
    void gemv_swiglu(CommandList& cl, QType t, View w, uint64_t g_off, uint64_t u_off,
                     uint32_t rows, uint32_t cols, View x, uint32_t x_off, View y, uint32_t y_off,
                     const GemvNormIn* norm = nullptr, const GemvRounding* rounding = nullptr);
    // out[out_off + r * cols ..] = row ids[id_off + r] of the table (rows × cols of type t), r < n.
    void get_rows(CommandList& cl, QType t, View table, uint32_t rows, uint32_t cols, View ids,
                  uint32_t id_off, View out, uint32_t out_off, uint32_t n);
    // y = x / sqrt(mean(x²) + eps) · w for nrows rows of n (strided by x_stride / y_stride floats).
    void rms_norm(CommandList& cl, View w, View x, uint32_t x_off, uint32_t x_stride, View y,
                  uint32_t y_off, uint32_t y_stride, uint32_t n, uint32_t nrows, float eps);
    // y = silu(g) ⊙ u over n values.
    void swiglu(CommandList& cl, View g, uint32_t g_off, View u, uint32_t u_off, View y,
                uint32_t y_off, uint32_t n);
    // out[out_off] = index of the largest of logits[l_off .. l_off + n).
    void argmax(CommandList& cl, View logits, uint32_t l_off, uint32_t n, View out,
                uint32_t out_off);
    // The streaming read probe (shaders/stream_read.comp): reads the first `bytes` of src (a
    // multiple of 16) once; out[out_off + g] = the XOR of the 16-byte words workgroup g read,
    // folded to one word, for g < stream_read_groups(bytes).
    uint32_t stream_read_groups(uint64_t bytes) const;
    // For the speed report only: a nonzero shape forces threads a workgroup and loads a thread.
    struct StreamShape {
        uint32_t threads = 0, loads = 0;
        uint32_t grid = 0;  // nonzero: that many workgroups, each looping over the chunks
    };
    StreamShape stream_shape;
    void stream_read(CommandList& cl, View src, uint64_t bytes, View out, uint32_t out_off);
    // The GEMV speed report's tiled GEMV (shaders/gemv_tile.comp): W (rows x cols of Q4_K or
    // Q6_K, cols a multiple of 256) held in tiles of `tile` rows by tile_rows() from its GGUF
    // blocks, over x rounded to bytes at float x_off of xr (the layout of a GemvRounding), into
    // y[y_off ..] (=|+=). threads: the workgroup (a multiple of tile, not only a power of two:
    // threads / tile slots of runs); ablate: gemv_tile.comp
    // ABLATE. With norm_w, x at float x_off of xr is the residual stream before an RMSNorm of
    // those weights, normalized and rounded by each workgroup (gemv_tile.comp NORM_IN). grid: at
    // most that many workgroups, each walking its tiles (0: a workgroup a tile). ksplit > 1
    // (without grid): that many workgroups a tile, each taking its share of the row's runs, the
    // last to finish adding the parts in order through split (zeroed, split_bytes(rows) at least).
    static std::vector<uint8_t> tile_rows(QType t, const uint8_t* w, uint32_t rows, uint32_t cols,
                                          uint32_t tile);
    // The device can run the tiled GEMV over weights of type t (features, not shapes).
    bool gemv_tile_supported(QType t) const;
    void gemv_tile(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View xr,
                   uint32_t x_off, View y, uint32_t y_off, bool accumulate, uint32_t threads,
                   uint32_t tile, uint32_t ablate = 0, View norm_w = {}, uint32_t grid = 0,
                   uint32_t ksplit = 1, View split = {});
    // The stage speed report's chain (shaders/stage_chain.comp): rounds round0 .. round0 +
    // rounds - 1 over x (vectors of n, round r reads vector r and writes r + 1) in one dispatch
    // of `groups` workgroups, handing each round on inside the dispatch through sync[r]; a wait
    // past spin_limit polls sets sync[flag]. skew: one workgroup a round writes that many
    // steps late (the check that the handoff waits).
    void stage_chain(CommandList& cl, View x, View sync, uint32_t n, uint32_t round0,
                     uint32_t rounds, uint32_t groups, uint32_t spin_limit, uint32_t flag,
                     uint32_t skew = 0);
    // The next token from n logits (see shaders/sample.comp): parameters at tok[par ..]
    // (temperature, top_k, top_p, min_p, u), the id to tok[out_idx]. Temperature <= 0: argmax.
    // With a scratch of sample_scratch_bytes(n) and n over one chunk (sample_chunk logits),
    // a first pass keeps each chunk's candidates (shaders/sample_chunks.comp) and the choice
    // runs over those; a barrier between the two passes is recorded here.
    static constexpr uint32_t kSampleTopK = 256;  // the largest top_k sampled on the device
    void sample(CommandList& cl, View logits, uint32_t l_off, uint32_t n, View tok,
                uint32_t out_idx, uint32_t par, View scratch = {});
    static uint64_t sample_scratch_bytes(uint32_t n);
    // Logits a workgroup of the first pass takes: a multiple of 256 (tests force small ones to
    // cross chunk boundaries).
    uint32_t sample_chunk = 4096;
    static constexpr uint32_t kNone = 0xffffffffu;  // an offset that is not given
    // One decode token of a Gated DeltaNet layer (see shaders/deltanet_step.comp). act holds the
    // projections (offsets in floats) and receives y; params the layer's F32 parameters; ring
    // the conv inputs [K][conv_dim]; state S [H_v][d_k][d_v]; tok[0] the position.
    struct DeltaNetStep {
        uint32_t n_k_heads, n_v_heads, d_k, d_v, conv_kernel;
        uint32_t qkv_off, z_off, b_off, a_off, y_off;    // in act
        uint32_t conv_off, dt_off, ssm_a_off, norm_off;  // in params
        float eps;
        // Windows (deltanet_rows) only: where the chunked scan's scratch rows start in act,
        // n × deltanet_wy_floats() floats.
        uint32_t wy_off = kNone;
        // The step only: leave the gated RMSNorm to the GEMV that reads y (gemv_gated), y then
        // holding o · norm_w · silu(z) and act[ss_off ..] each column group's sum of squares of
        // o, n_v_heads × deltanet_groups(d_v, true) floats (kNone: the step applies the norm).
        uint32_t ss_off = kNone;
        // With ss_off: y_off receives those columns rounded to bytes (rounding_floats(n_v_heads
        // · d_v) floats, the layout of GemvRounding) instead of floats, for the tiled GEMV that
        // reads them with x_rounded (gemv_gated); needs column groups of 16 or more.
        bool round_y = false;
    };
    // Returns a Decline when the shape has no kernel (d_v over the workgroup limit ...).
    static std::optional<Decline> deltanet_step_supported(const Features& f, uint32_t d_k,
                                                          uint32_t d_v, uint32_t conv_kernel);
    // counter: n_v_heads words, 0 between dispatches. With it, or with ss_off, each head's value
    // columns are split over workgroups of deltanet_columns (a power of two below d_v; 0: a
    // workgroup a head), which count on it to find the one that applies the gated norm (or
    // leave the norm to the reader); otherwise a workgroup takes a whole head.
    void deltanet_step(CommandList& cl, const DeltaNetStep& a, View act, View params, View ring,
                       View state, View tok, View counter = {});
    uint32_t deltanet_columns = 32;
    // The workgroups a head's d_v value columns are split over (split: a counter or ss_off).
    uint32_t deltanet_groups(uint32_t d_v, bool split) const;
    // The step's workgroup sums through subgroup sums where the device has subgroup arithmetic
    // (deltanet_step_sg; off: the shared-memory tree, for tests of both).
    bool deltanet_subgroups = true;
    // Decode attention of one token over an F16 KV cache ([n_ctx][n_kv][head_dim], pairs packed
    // in 32-bit words), one dispatch recorded once for a context of n_ctx rows: each workgroup
    // prepares its queries (per-head RMSNorm when q_norm_off is given, rope of the first n_rot
    // dims) and the one that reads row tok[0] prepares k (k_norm_off) and v for it, stored to that
    // row by the first head group of each key/value head; the query heads of each key/value head
    // together (up to four a workgroup), the cache walked in chunks of kAttnSplit rows with an
    // online softmax, the live chunks dealt to attention_splits(n_ctx) splits into partials, the
    // last split of each group (counted on counter, n_head words, 0 between dispatches) merging
    // them, times sigmoid(gate) when gate_off is given, into act[o_off..].
    static constexpr uint32_t kAttnSplit = 64;
    static constexpr uint32_t kAttnMaxSplits = 64;  // attn_decode.comp MAXS
    // Bytes of a key or value cache ([rows][n_kv][head_dim] F16) of a context of n_ctx rows for
    // Kernels::attention: whole chunks of rows, since a chunk's value rows are read without a
    // clamp to the live ones.
    static uint64_t attention_cache_bytes(uint64_t n_ctx, uint64_t n_kv, uint64_t head_dim) {
        return (n_ctx + kAttnSplit - 1) / kAttnSplit * kAttnSplit * n_kv * head_dim * 2;
    }
    // A context of up to this many chunks of kAttnSplit rows is walked by one split, which
    // writes the output itself (no partials, no merge); longer ones are dealt to the splits.
    // H200, tg128 from an empty context: Qwen3-8B 366.7 -> 379.4 t/s at 2 (373.9 at 0, where only
    // one chunk is one split); at 1024 and 4096 rows the same rule as 0 (docs/PERF.md).
    uint32_t attn_one_split = 2;
    // Splits of the decode attention for a context of n_ctx rows (at most max_splits).
    static uint32_t attention_splits(uint32_t n_ctx, uint32_t max_splits = kAttnMaxSplits);
    struct Attention {
        uint32_t n_head, n_kv, head_dim, n_rot, n_ctx;
        uint32_t q_off, q_stride, k_off, v_off;  // act: projections
        uint32_t qo_off;                  // act: prepared queries (n_head * head_dim; windows only)
        uint32_t o_off;                   // act: output (n_head * head_dim)
        uint32_t gate_off, gate_stride;   // act: per-head gate, or kNone
        uint32_t q_norm_off, k_norm_off;  // params: norm weights or kNone
        uint32_t freq_off;                // params: n_rot/2 inverse frequencies
        float eps;
        bool interleaved = false;              // rope pairs (2j, 2j+1) (llama) instead of NeoX
        uint32_t max_splits = kAttnMaxSplits;  // fewer only to test long walks on short caches
        // Decode: act, the output also rounded to bytes there (rounding_floats(n_head · head_dim)
        // floats, the layout a GEMV reads with GemvRounding::x_rounded), or kNone. Heads of a
        // multiple of 16 values.
        uint32_t round_off = kNone;
        // Query heads a workgroup: 0 for the launcher's choice (attention_group()), or a divisor
        // of n_head / n_kv the shared memory holds (1: one head a workgroup, each cache row read
        // once a query head; less code, for the short contexts of ResidentDriver's token command).
        uint32_t heads_a_group = 0;
    };
    static std::optional<Decline> attention_supported(const Features& f, uint32_t head_dim,
                                                      uint32_t n_head, uint32_t n_kv);
    // Floats of partials the decode dispatch needs (a scratch buffer of its own).
    static uint64_t attention_partials(const Attention& a);
    // The query heads a workgroup that attention() takes for `a` on this device (heads_a_group,
    // or the launcher's choice where that is 0).
    uint32_t attention_group(const Attention& a) const;
    void attention(CommandList& cl, const Attention& a, View act, View params, View k_cache,
                   View v_cache, View partials, View tok, View counter);
    // Creates the pipeline attention() takes for `a` and records nothing. Pipelines are created
    // in the order they are first asked for, and where they lie mattered on an H200: the driver
    // asks for its short-context form's attention right after the launcher's (docs/PERF.md
    // 2026-12-04 (05:30)).
    void prepare_attention(const Attention& a);
    // C[M, N] = A[M, K] · W[N, K]ᵀ (F16 inputs, F32 output) with the given variant's kernel.
    // Returns false (recording nothing) when the variant cannot run these sizes.
    bool matmul_f16(CommandList& cl, Variant v, View a, View w, View c, uint32_t m, uint32_t n,
                    uint32_t k);

    // ---- Prefill windows (kernels_window.cpp): the same operations over n rows at once. Rows
    // of one quantity are contiguous in act (row stride = the quantity's width).

    // Whether gemm() can run weights of type t on this device with variant v (the tiles need
    // 32 KiB of shared memory; the cooperative-matrix tiles also F16 arithmetic, the 16×16×16
    // shape and a fixed subgroup size). The scalar tiles are the fallback for any variant.
    static std::optional<Decline> gemm_supported(const Features& f, QType t);
    static bool gemm_uses_coopmat(const Features& f, Variant v);
    // Whether variant v runs the NV cooperative matrix 2 tiles (block-decoding tensor loads).
    static bool gemm_uses_cm2(const Features& f, Variant v);
    // Y[m][n] (=|+=) Σ_k W[n][k] · X[m][k] for m < n_rows: X rows at x_off (stride cols), Y rows
    // at y_off (stride rows); W is rows × cols of type t in its native blocks. The
    // cooperative-matrix tiles read X from its F16 copy x16 (f16_copy() of the same rows, starting
    // the view); gemm_reads_f16() says whether this call needs it.
    // On the NV cooperative matrix 2 tiles, a window of at least kGemmExpandRows rows expands W
    // to F16 in the scratch w16 first (dequant_f16(), rows × cols × 2 bytes; barriers before and
    // after it are recorded here) and runs the F16 tiles over it; without w16 the tensor loads
    // decode the blocks themselves. `expanded`: the caller has already recorded dequant_f16() of
    // W into w16 and a barrier since (gemm_expands() must hold), so that the expansion can run
    // beside an earlier GEMM; only the F16 tiles are recorded. stage_rows: the weight rows of
    // every GEMM the caller records in this stage (no barrier between them), for the tile.
    void gemm(CommandList& cl, Variant v, QType t, View w, uint32_t rows, uint32_t cols, View x,
              uint32_t x_off, View x16, View y, uint32_t y_off, uint32_t n_rows, bool accumulate,
              View w16 = {}, bool expanded = false, uint32_t stage_rows = 0);
    static constexpr uint32_t kGemmExpandRows = 64;
    // Whether gemm() over variant v runs the F16 tiles over W expanded into w16.
    bool gemm_expands(Variant v, QType t, uint32_t rows, uint32_t cols, uint32_t n_rows,
                      View w16) const;
    // h = W (rows × cols of type t, cols a multiple of 8) as F16, row-major.
    void dequant_f16(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View h);
    bool gemm_reads_f16(Variant v, uint32_t cols) const;
    // h[0 .. n) = F16 of x[x_off .. x_off + n), n a multiple of 8 (packed 8 halves a 16-byte
    // chunk).
    void f16_copy(CommandList& cl, View x, uint32_t x_off, View h, uint32_t n);
    // For the GEMM speed report only: 1 leaves out the weight dequantization of the
    // cooperative-matrix tiles, 2 their products (the results are then wrong). 0 otherwise.
    uint32_t gemm_ablate = 0;
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
    GemmTile gemm_cm2_tile(QType t, uint32_t rows, uint32_t n_rows, uint32_t stage_rows = 0) const;
    // Tests and the speed report: 0 never expands W to F16, 1 always does when given a scratch,
    // -1 (every real use) decides by the window's rows.
    int gemm_expand = -1;
    // Attention for n rows at positions tok[0] .. tok[0]+n-1: prep (norms, rope, KV store of
    // every row) then causal attention of every row over the cache with the gated epilogue.
    // Row strides: q_row for the q projection (gate included), kv_row for k and v, o_row for
    // the output; the prepared queries go to qo_off as [n][n_head][head_dim].
    struct AttentionRows {
        Attention a;
        uint32_t q_row, kv_row, o_row, gate_row;
    };
    // With variant nv_coopmat2 the attention runs on tensor cores where attention_cm2() allows
    // (shaders/attn_window_cm2.comp), with khr_coopmat on the matrix units where attention_khr()
    // allows (shaders/attn_window_cm.comp), else on the tiles below.
    void attention_rows(CommandList& cl, const AttentionRows& a, View act, View params,
                        View k_cache, View v_cache, View tok, uint32_t n,
                        Variant v = Variant::scalar);
    // The NV cooperative matrix 2 attention tile: query_vectors = rows · heads (query heads of
    // one key/value head) a workgroup of 256, keys a tile; nullopt where the device, the variant
    // or the head size rule it out.
    struct AttentionCm2 {
        uint32_t query_vectors = 0, keys = 0, heads = 0, rows = 0;
    };
    static std::optional<AttentionCm2> attention_cm2(const Features& f, Variant v,
                                                     uint32_t head_dim, uint32_t n_head,
                                                     uint32_t n_kv);
    // Whether the tensor loads and stores of that kernel find the queries, the gate and the
    // output of `a` at 16-byte aligned bases in act (act_offset bytes into its buffer).
    static bool attention_cm2_aligned(const Attention& a, uint64_t act_offset);
    // The variant a window's attention_rows() should be given on a device planned for v: the
    // KHR kernel for heads over 128 where the device also has it, else v.
    static Variant attention_variant(const Features& f, Variant v, uint32_t head_dim);
    // The kernel attention_rows() runs for `a` with variant v, act at act_offset bytes into its
    // buffer and the caches at 16-byte aligned offsets or not.
    enum class WindowAttentionKernel { tiles, cm2, khr };
    static WindowAttentionKernel attention_kernel(const Features& f, Variant v, const Attention& a,
                                                  uint64_t act_offset, bool caches_aligned);
    // The speed report's override of query_vectors and keys (0: attention_cm2()'s choice).
    AttentionCm2 attention_cm2_tile;
    // The KHR cooperative-matrix attention tile: a workgroup of `threads` takes query_vectors =
    // rows · heads (query heads of one key/value head) and stages the cache `keys` rows a tile;
    // its products run in subgroup-scope `shape` matrices (one the device lists for F16 × F16 ->
    // F32), each subgroup keeping at most `blocks` accumulators of the output; the epilogue
    // stages out_cols columns of the output a pass; shared_bytes as declared in the shader.
    // nullopt where the variant, the device, the head size or its shared memory rule it out.
    struct AttentionKhr {
        CoopmatShape shape;
        uint32_t threads = 0, query_vectors = 0, keys = 0, heads = 0, rows = 0, blocks = 0,
                 out_cols = 0, shared_bytes = 0;
    };
    static std::optional<AttentionKhr> attention_khr(const Features& f, Variant v,
                                                     uint32_t head_dim, uint32_t n_head,
                                                     uint32_t n_kv);
    // The tile shape attention_rows() uses on this device (shaders/attn_window.comp): a
    // workgroup of `threads` takes `rows` query rows × `heads` query heads of one key/value
    // head (query_vectors = rows · heads) and stages the cache `keys` rows a tile, in
    // shared_bytes of shared memory; each cache byte it reads serves query_vectors queries.
    // shuffle_lanes > 0: the score phase sums partial dot products over that many subgroup
    // lanes (needs subgroup shuffles; `shuffles` false never picks it).
    struct AttentionTiles {
        uint32_t threads, query_vectors, keys, keys_per_thread, heads, rows, shared_bytes;
        uint32_t shuffle_lanes;
    };
    static AttentionTiles attention_tiles(const Features& f, uint32_t head_dim, uint32_t n_head,
                                          uint32_t n_kv, bool shuffles = true);
    // False: attention_rows() scores without subgroup shuffles even where the device has them
    // (tests reach both modules with it).
    bool attention_shuffles = true;
    // A Gated DeltaNet layer over n rows at positions tok[0] ..: conv (carried in the ring)
    // from the input rows at qkv_off into its own n rows of conv_dim at conv_out (the two must
    // not overlap), q/k L2 norms and gates, the delta rule with the state on chip, the
    // gated RMSNorm. Other offsets as in DeltaNetStep, each now the start of n rows of its
    // quantity. `scan` picks the scan module (tests use it to reach every one; `best` takes the
    // fastest measured on an H200: the chunked (WY) form where the device's shared memory holds
    // its chunks, else the token scan with xor shuffles, else with clustered adds, else with
    // one thread per column); a forced module the device lacks is an error.
    enum class DeltaNetScan { best, clustered, shuffle, plain, chunked };
    DeltaNetScan deltanet_scan = DeltaNetScan::best;  // what the driver's windows ask for
    static std::optional<Decline> deltanet_rows_supported(const Features& f, uint32_t d_k,
                                                          uint32_t d_v, uint32_t conv_kernel);
    // Rows a chunk of the chunked scan takes on this device for these head sizes (32 or 16),
    // or 0 where its chunks do not fit the device's shared memory.
    static uint32_t deltanet_chunk_rows(const Features& f, uint32_t d_k, uint32_t d_v);
    // Floats a window row of the chunked scan's scratch takes (its WY factors W and U, the
    // decayed q·k of a chunk and two decays, per value head), for chunks of up to
    // kDeltaNetChunkMax rows.
    static constexpr uint32_t kDeltaNetChunkMax = 32;
    // The walk over the chunks (deltanet_chunk.comp): threads a value column and value columns
    // a workgroup; zero: the launcher's choice (the speed report tries others).
    struct DeltaNetChunkTile {
        uint32_t groups = 0, cols = 0;
    };
    DeltaNetChunkTile deltanet_chunk_tile;
    static uint32_t deltanet_wy_floats(uint32_t n_v_heads, uint32_t d_k, uint32_t d_v) {
        return n_v_heads * (d_k + d_v + kDeltaNetChunkMax + 2);
    }
    void deltanet_rows(CommandList& cl, const DeltaNetStep& a, uint32_t conv_out, View act,
                       View params, View ring, View state, View tok, uint32_t n,
                       DeltaNetScan scan = DeltaNetScan::best);

    // The GEMV's shared memory for workgroups of wg threads accumulating `rows` rows over x of
    // `cols` values read through path x, with a margin for what a compiler adds.
    static uint32_t gemv_shared_bytes(GemvX x, uint32_t cols, uint32_t wg, uint32_t rows);

  private:
    uint32_t wg_size(uint32_t want) const;
    // The decode attention's query heads a workgroup and threads a workgroup for `a`.
    std::pair<uint32_t, uint32_t> attention_shape(const Attention& a) const;
    const Kernel& attention_kernel(const Attention& a);  // its pipeline
    StreamShape stream_shape_now() const;  // stream_read's shape (stream_shape or its own)
    // The launcher's shape of a GEMV (gemv_record): how it reads x, threads of a row group,
    // rows a group, row groups a workgroup, wide slices, and the most workgroups (0: the
    // launcher's wave limit only).
    struct GemvLaunch {
        GemvX x;
        uint32_t wg, k_rows, groups, wide, grid = 0;
    };
    GemvLaunch gemv_launch(QType t, uint32_t rows, uint32_t cols, bool fuse, bool pair, bool norm,
                           GemvPart share, bool round_out) const;
    // The tiled GEMV's form (shaders/gemv_tile.comp): XMODE, the norm's epsilon and weights
    // (XMODE 1) or the gated norm's terms (XMODE 3 and 5), a pair's matrix offsets, ROUND_OUT's
    // offset (kNone: none).
    struct TileForm {
        uint32_t xmode = 0;
        float eps = 0;
        View norm_w;
        const GemvGatedIn* gated = nullptr;
        const uint32_t* pair = nullptr;
        uint32_t xr_off = kNone;
        View round_norm;           // ROUND_NORM's weights
        View split;                // KSPLIT's scratch
        uint32_t layout_tile = 0;  // rows of a tile of the weights' layout (0: the tile's)
    };
    void tile_record(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                     uint32_t x_off, View y, uint32_t y_off, bool accumulate, uint32_t threads,
                     uint32_t tile, uint32_t ablate, uint32_t grid_cap, uint32_t ksplit,
                     const TileForm& form);
    // The GEMVs gemv_record hands to the tiled GEMV (gemv_tiled_for, and a form and views it
    // takes): records it and returns true, else records nothing.
    bool tile_route(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                    uint32_t x_off, View y, uint32_t y_off, bool accumulate, const uint32_t* pair,
                    const GemvNormIn* norm, const GemvRounding* rounding, const GemvGatedIn* gated);
    void gemv_record(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                     uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                     const GemvFusion* fuse, const uint32_t* pair = nullptr,
                     const GemvNormIn* norm = nullptr, GemvPart share = {},
                     const GemvRounding* rounding = nullptr, const GemvGatedIn* gated = nullptr);
    Device& dev_;
    Pipelines& pipes_;
};

}  // namespace dl::vk
