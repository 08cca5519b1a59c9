// Launchers of the decode GEMVs (shaders/gemv.comp, and the tiled GEMV of shaders/gemv_tile.comp
// for weights held in tiles): y = W·x for one token, plain or fused with what the token command
// would otherwise run as stages of their own (a norm before or after, the SwiGLU pair, the
// quantization of x to int8), and the launch shape each takes on the device.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/types.h"
#include "vulkan/kernel_family.h"

namespace dl::vk {

// The part of its stage's weight bytes a GEMV reads (Kernels::gemv's share).
struct GemvPart {
    float of_stage = 1.f;
};

class GemvKernels : public virtual KernelFamily {
  public:
    GemvKernels(Device& dev, Pipelines& pipes) : KernelFamily(dev, pipes) {}

    // True when gemv() reads weights of type t natively.
    static bool gemv_supports(QType t);
    // The GGUF block formats the matrix kernels decode in place: Q4_0, Q8_0, Q4_K, Q5_K, Q6_K.
    static bool block_format(QType t);
    // x quantized to int8 once, by the GEMV that writes it, rather than by every workgroup of
    // the GEMV that reads it (gemv.comp ROUND_OUT and XPRE; only over x as int8, and not for a
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
    // The operands of one GEMV of the gemv family (gemv, gemv_fused, gemv_normed, gemv_gated,
    // gemv_swiglu), written with designated initializers: y[y_off + r] (= or, with accumulate,
    // +=) sum_c W[r, c] · x[x_off + c] for r < rows, W rows × cols of `type` at the weight view
    // w. share (gemv and gemv_normed only): the part of its stage's weight bytes this GEMV reads
    // where other GEMVs run beside it in the stage (1: alone in it), which sets how much of the
    // device its shape may take (gemv_balance, shared_shape). rounding: x rounded already, or
    // the rows rounded for the next GEMV (GemvRounding; none: neither).
    struct Gemv {
        QType type = QType::F32;
        View w;
        uint32_t rows = 0, cols = 0;
        View x;
        uint32_t x_off = 0;
        View y;
        uint32_t y_off = 0;
        bool accumulate = false;
        GemvPart share = {};
        const GemvRounding* rounding = nullptr;
    };
    void gemv(CommandList& cl, const Gemv& g);
    // Whether the GEMV of this shape (norm: gemv_normed; pair: gemv_swiglu) can round its rows
    // for the next GEMV: it reads x as int8 and its row blocks are whole 16-value blocks.
    bool gemv_rounds(QType t, uint32_t rows, uint32_t cols, bool pair, bool norm,
                     GemvPart share = {}) const;
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
    // The knobs' types (kernels_tuning.h) under the names the callers use (Kernels::GemvWide).
    using GemvShape = Tuning::GemvShape;
    using GemvWide = Tuning::GemvWide;
    using GemvTiled = Tuning::GemvTiled;
    // The tiled GEMVs that add to y (the token command's output and down projections, alone
    // in their stages) and whose tiles are fewer than the device's multiprocessors split each
    // tile's runs over up to four workgroups, the last to finish adding the parts in order
    // (gemv_tile.comp KSPLIT), where gemv_split is set: a zeroed scratch view of at least
    // split_bytes(rows) for every such GEMV, used by one at a time (it is zero again after
    // each; tuning.gemv_split_parts forces the number of parts).
    View gemv_split;
    static uint64_t split_bytes(uint32_t rows);
    // gemv_tile.comp's shared memory for rows of `cols` values in workgroups of `threads`.
    static uint64_t gemv_tile_shared_bytes(uint32_t cols, uint32_t threads);
    // Whether a GEMV over rows of cols values of type t that reads x as int8 runs on the tiled
    // GEMV here (gemv_tiled, the device's features and shared memory).
    bool gemv_tiled_for(QType t, uint32_t cols) const;
    // The tiled GEMV's largest workgroup in the token command: eight slots of a tile's 32 rows.
    static constexpr uint32_t kTileMaxThreads = 256;
    // The workgroup of a tile of sixteen slots (gemv_wide_tiles).
    static constexpr uint32_t kTileWideThreads = 512;
    // How the block-format GEMVs read x (Tuning::gemv_x).
    using GemvX = Tuning::GemvX;
    // The path gemv() takes for these weights with the launcher's own workgroup shape.
    GemvX gemv_x_for(QType t, uint32_t cols) const;
    // How the GEMV of this shape (fused: gemv_fused) reads x: gemv_x_for(t, cols), or F32 where
    // the launcher's shape has no room for x as int8.
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
    void gemv_fused(CommandList& cl, const Gemv& g, const GemvFusion& fuse);
    // A GEMV over the RMSNorm of x rather than x (gemv.comp NORM_IN): x · norm_w / sqrt(mean(x²)
    // + eps) over the cols values at x_off, normalized by each workgroup as it quantizes x to int8,
    // so the GEMV that wrote x needs no norm epilogue. Only where gemv_x_for(t, cols) is `bytes`;
    // norm_w's view starts 16-byte aligned.
    struct GemvNormIn {
        View norm_w;
        float eps = 0;
    };
    void gemv_normed(CommandList& cl, const Gemv& g, const GemvNormIn& norm);
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
    void gemv_gated(CommandList& cl, const Gemv& g, const GemvGatedIn& gated);
    bool gemv_gates(QType t, uint32_t cols) const;
    // y[y_off + r] = silu(G[r]·x) · (U[r]·x) for r < rows: the FFN gate and up projections and
    // the SwiGLU in one dispatch (gemv.comp SWIGLU_PAIR). G and U (rows × cols of g.type each)
    // lie at byte offsets g_off and u_off (multiples of 4) of the weight view g.w; g.accumulate
    // and g.share are not read. With `norm`, over the RMSNorm of x (as gemv_normed).
    void gemv_swiglu(CommandList& cl, const Gemv& g, uint64_t g_off, uint64_t u_off,
                     const GemvNormIn* norm = nullptr);
    // The GEMV speed report's tiled GEMV (shaders/gemv_tile.comp): W (rows x cols of Q4_K or
    // Q6_K, cols a multiple of 256) held in tiles of `tile` rows by tile_rows() from its GGUF
    // blocks, over x quantized to int8 at float x_off of xr (the layout of a GemvRounding), into
    // y[y_off ..] (=|+=). threads: the workgroup (a multiple of tile, not only a power of two:
    // threads / tile slots of runs); omitted_work: gemv_tile.comp
    // ABLATE. With norm_w, x at float x_off of xr is the residual stream before an RMSNorm of
    // those weights, normalized and rounded by each workgroup (gemv_tile.comp NORM_IN). grid: at
    // most that many workgroups, each walking its tiles (0: a workgroup a tile). ksplit > 1
    // (without grid): that many workgroups a tile, each taking its share of the row's runs, the
    // last to finish adding the parts in order through split (zeroed, split_bytes(rows) at least).
    static std::vector<uint8_t> tile_rows(QType t, const uint8_t* w, uint32_t rows, uint32_t cols,
                                          uint32_t tile);
    // The device can run the tiled GEMV over weights of type t (features, not shapes).
    bool gemv_tile_supported(QType t) const;
    struct TiledGemv {
        QType type = QType::Q4_K;
        View w;
        uint32_t rows = 0, cols = 0;
        View xr;
        uint32_t x_off = 0;
        View y;
        uint32_t y_off = 0;
        bool accumulate = false;
        uint32_t threads = 0, tile = 0, omitted_work = 0;
        View norm_w;
        uint32_t grid = 0, ksplit = 1;
        View split;
    };
    void gemv_tile(CommandList& cl, const TiledGemv& g);

    // The GEMV's shared memory for workgroups of wg threads accumulating `rows` rows over x of
    // `cols` values read through path x, with a margin for what a compiler adds.
    static uint32_t gemv_shared_bytes(GemvX x, uint32_t cols, uint32_t wg, uint32_t rows);

  private:
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
                     uint32_t tile, uint32_t omitted_work, uint32_t grid_cap, uint32_t ksplit,
                     const TileForm& form);
    // The GEMVs gemv_record hands to the tiled GEMV (gemv_tiled_for, and a form and views it
    // takes): records it and returns true, else records nothing.
    bool record_on_tiled_gemv(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols,
                              View x, uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                              const uint32_t* pair, const GemvNormIn* norm,
                              const GemvRounding* rounding, const GemvGatedIn* gated);
    void gemv_record(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                     uint32_t x_off, View y, uint32_t y_off, bool accumulate,
                     const GemvFusion* fuse, const uint32_t* pair = nullptr,
                     const GemvNormIn* norm = nullptr, GemvPart share = {},
                     const GemvRounding* rounding = nullptr, const GemvGatedIn* gated = nullptr);
    // Where a GEMV reads or writes a rounding of n values (GemvRounding's layout; normed: with
    // the blocks' sums of squares) at float off of view v, and whether a gated norm fits rows of
    // cols values (kernels_gemv.cpp).
    static bool rounding_readable(View v, uint32_t off, uint32_t n, bool normed);
    static bool rounding_writable(View v, uint32_t off, uint32_t n, bool normed);
    static bool gated_fits(const GemvGatedIn& g, uint32_t cols);
};

}  // namespace dl::vk
