// Launchers of the prefill GEMMs over a window of rows (kernels_gemm.cpp): the tiles over the
// weights' native blocks (scalar, KHR cooperative matrices, NV cooperative matrix 2), the F16
// expansion and copies they read, and the F16 matmul of the device tests.
#pragma once

#include <cstdint>
#include <optional>

#include "quant/types.h"
#include "vulkan/decline.h"
#include "vulkan/kernel_family.h"

namespace dl::vk {

class GemmKernels : public virtual KernelFamily {
  public:
    GemmKernels(Device& dev, Pipelines& pipes) : KernelFamily(dev, pipes) {}

    // C[M, N] = A[M, K] · W[N, K]ᵀ (F16 inputs, F32 output) with the given variant's kernel.
    // Returns false (recording nothing) when the variant cannot run these sizes.
    bool matmul_f16(CommandList& cl, Variant v, View a, View w, View c, uint32_t m, uint32_t n,
                    uint32_t k);

    // Whether gemm() can run weights of type t on this device with variant v (the tiles need
    // 32 KiB of shared memory; the cooperative-matrix tiles also F16 arithmetic, the 16×16×16
    // shape and a fixed subgroup size). The scalar tiles are the fallback for any variant.
    static std::optional<Decline> gemm_supported(const Features& f, QType t);
    static bool gemm_uses_coopmat(const Features& f, Variant v);
    // Whether variant v runs the NV cooperative matrix 2 tiles (block-decoding tensor loads).
    static bool gemm_uses_cm2(const Features& f, Variant v);
    // Whether variant v runs tiles on KHR cooperative matrices (8 subgroups of a fixed size).
    static bool gemm_uses_khr(const Features& f, Variant v);
    // Y[m][n] (=|+=) Σ_k W[n][k] · X[m][k] for m < n_rows: X rows at x_off (stride cols), Y rows
    // at y_off (stride rows); W is rows × cols of type t in its native blocks. The
    // cooperative-matrix tiles read X from its F16 copy x16 (f16_copy() of the same rows, starting
    // the view); gemm_reads_f16() says whether this call needs it. Where the GEMM runs as the
    // batched GEMV over bytes (gemv_batch_reads_bytes()), x16 holds instead X's rows rounded to
    // bytes (round_rows() of the same rows, starting the view).
    // On the NV cooperative matrix 2 tiles, a window of at least tuning.gemm_expand_rows expands W
    // to F16 in the scratch w16 first (dequant_f16(), rows × cols × 2 bytes; barriers before and
    // after it are recorded here) and runs the F16 tiles over it; without w16 the tensor loads
    // decode the blocks themselves. `expanded`: the caller has already recorded dequant_f16() of
    // W into w16 and a barrier since (gemm_expands() must hold), so that the expansion can run
    // beside an earlier GEMM; only the F16 tiles are recorded. stage_rows: the weight rows of
    // every GEMM the caller records in this stage (no barrier between them), for the tile.
    // split: the scratch of a GEMM whose tiles split K over workgroups (gemm_split_need()): its
    // tiles' counters (zero when first given, zero again after each GEMM) and its parts' sums
    // (GEMMs that run together need scratches of their own); without it, or with too little,
    // the GEMM runs unsplit.
    void gemm(CommandList& cl, Variant v, QType t, View w, uint32_t rows, uint32_t cols, View x,
              uint32_t x_off, View x16, View y, uint32_t y_off, uint32_t n_rows, bool accumulate,
              View w16 = {}, bool expanded = false, uint32_t stage_rows = 0,
              SplitScratch split = {});
    // A GEMM of few rows has few tiles: where the tiles of its stage (stage_rows, as for the
    // tile) number under twice the device's multiprocessors, its columns are split into parts,
    // each its own workgroup over the same tile, and the last part of a tile to finish adds them
    // in order (shaders/gemm_split.glsl; tuning.gemm_split). The split of one tile: its parts,
    // the columns of each (whole steps of the tile's loop), the scratch it needs.
    struct GemmSplit {
        uint32_t parts = 1, k_split = 0;
        SplitNeed need;
    };
    static constexpr uint32_t kGemmSplitRows = 128;  // GEMMs of more rows never split
    static constexpr uint32_t kGemmSplitParts = 16;
    // The scratch gemm() would use for this GEMM: the most over the tiles it may run on (the
    // NV tiles over W's blocks or its F16 expansion, the scalar ones); none if it runs unsplit.
    SplitNeed gemm_split_need(Variant v, QType t, uint32_t rows, uint32_t cols, uint32_t n_rows,
                              uint32_t stage_rows = 0) const;
    // The scratch a window needs for `gemms` GEMMs split at once by the grid rule (each split's
    // tiles times parts stay under the workgroups the rule aims at, tiles of up to 128 x 128):
    // its counters first, then the parts' sums.
    static SplitNeed gemm_split_scratch(const Features& f, uint32_t gemms);
    static constexpr uint32_t kGemmExpandRows = 64;
    // The skinny GEMM (shaders/gemm_skinny.comp): Q4_K or Q6_K weights decoded to F16 in shared
    // memory and multiplied on KHR cooperative matrices by up to 64 rows of X (its F16 copy) a
    // workgroup, each workgroup RT tiles of 32 weight rows over a part of K; for GEMMs of more
    // rows than the batched GEMV takes and at most tuning.gemm_skinny_rows, with
    // tuning.gemm_skinny on (a batched step's tokens, a short window). gemm() runs it in place of
    // the tiles (never over an F16 expansion); it needs the F16 copy of X as the tiles do.
    static bool gemm_uses_skinny(const Features& f, Variant v);
    // Its shared memory for rt tiles of weight rows over mt tiles of X: the staged rows (16 chunks
    // of 16 bytes and one of padding each), and a word for the split (the grouped experts' form,
    // gemm_skinny.comp EXPERTS: each row of X's pair and input offset instead).
    static uint32_t skinny_shared(uint32_t rt, uint32_t mt, bool experts = false);
    bool gemm_skinny(Variant v, QType t, uint32_t cols, uint32_t n_rows) const;
    struct SkinnyShape {
        uint32_t rt = 0, mt = 0;  // tiles of 32 weight rows and of 16 rows of X a workgroup
        uint32_t y_tiles = 0;     // workgroups over the rows of X
        GemmSplit split;          // its parts of K (whole blocks of 256 values each)
    };
    SkinnyShape skinny_shape(uint32_t rows, uint32_t cols, uint32_t n_rows) const;
    // Whether gemm() of n_rows rows over weights of type t and rows of cols values runs as
    // gemv_batch() (at most tuning.gemm_gemv_rows rows, rows of whole 32-value units); it then
    // needs no F16 copy of X.
    bool gemm_by_gemv(QType t, uint32_t cols, uint32_t n_rows) const;
    // Y[m][n] (=|+=) Σ_k W[n][k] · X[m][k] for m < n_rows, with the same operands as gemm(), as
    // one batched GEMV (shaders/gemv_batch.comp): each workgroup takes a few weight rows for
    // every row of X, in groups of up to 8.
    // bytes: x is X's rows rounded (round_rows(), x_off its word offset).
    void gemv_batch(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                    uint32_t x_off, View y, uint32_t y_off, uint32_t n_rows, bool accumulate,
                    bool bytes = false);
    // Whether GEMMs of n_rows rows of cols values that run as the batched GEMV read X rounded to
    // signed bytes (block formats; integer dot products in hardware, rows of 1024+ values, as
    // the decode GEMV's DELTALLM_VK_GEMV_X policy): the caller then rounds X first.
    bool gemv_batch_reads_bytes(uint32_t cols, uint32_t n_rows) const;
    bool gemv_batch_reads_bytes(QType t, uint32_t cols, uint32_t n_rows) const;
    // n rows of x (cols values each, a multiple of 32, at x_off) rounded to signed bytes in
    // blocks of 16 into out (shaders/round_rows.comp), row v from word out_off + v ·
    // Kernels::rounding_floats(cols) (the layout of a GEMV's rounding, kernels_gemv.h). With
    // up_off, x holds a SwiGLU's gates and x[up_off ..] its ups, laid out alike, and the rows
    // rounded are SiLU(gate) · up.
    void round_rows(CommandList& cl, View x, uint32_t x_off, View out, uint32_t out_off,
                    uint32_t cols, uint32_t n, uint32_t up_off = kNone);
    // Whether gemm() over variant v runs the F16 tiles over W expanded into w16.
    bool gemm_expands(Variant v, QType t, uint32_t rows, uint32_t cols, uint32_t n_rows,
                      View w16) const;
    // h = W (rows × cols of type t, cols a multiple of 8) as F16, row-major.
    void dequant_f16(CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View h);
    bool gemm_reads_f16(Variant v, uint32_t cols) const;
    // h[0 .. n) = F16 of x[x_off .. x_off + n), n a multiple of 8 (packed 8 halves a 16-byte
    // chunk).
    void f16_copy(CommandList& cl, View x, uint32_t x_off, View h, uint32_t n);
    // The NV cooperative matrix 2 tile: weight rows, window rows and columns a step, and the
    // workgroup's invocations. gemm() picks one from the weight type and the grid of the
    // matrix's rows (or those of every GEMM recorded in the same stage, stage_rows, when more)
    // by the window's (gemm_cm2_tile); a nonzero gemm_tile forces one (speed report,
    // DELTALLM_VK_GEMM_TILE).
    using GemmTile = Tuning::GemmTile;
    GemmTile gemm_cm2_tile(QType t, uint32_t rows, uint32_t n_rows, uint32_t stage_rows = 0) const;

  private:
    // The split of a tile of tile_w weight rows by tile_x window rows whose loop steps over
    // `step` columns; nv: the NV cooperative matrix 2 tiles.
    GemmSplit split_for(bool nv, uint32_t tile_w, uint32_t tile_x, uint32_t step, uint32_t rows,
                        uint32_t cols, uint32_t n_rows, uint32_t stage_rows) const;
    GemmSplit cm2_split(QType mt, uint32_t rows, uint32_t cols, uint32_t n_rows,
                        uint32_t stage_rows) const;
};

}  // namespace dl::vk
