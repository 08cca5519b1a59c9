// Launchers of the mixture-of-experts kernels: the router's choice of each row's experts on the
// device (shaders/moe_route.comp) and the GEMVs over the chosen experts' rows only
// (shaders/gemv_batch.comp, EXPERTS), which read the choice from the device, so a token's
// command needs no read-back between the router and the experts.
#pragma once

#include <cstdint>
#include <string>

#include "quant/types.h"
#include "vulkan/kernel_family.h"

namespace dl::vk {

class ExpertKernels : public virtual KernelFamily {
  public:
    ExpertKernels(Device& dev, Pipelines& pipes) : KernelFamily(dev, pipes) {}

    // The most experts a row may use (moe_route.comp; the weighted sum takes a row's experts in
    // one group of the batched GEMV, at most 8).
    static constexpr uint32_t kMaxUsed = 8;
    // For each of n_rows rows of n_expert router logits at x[x_off + row · n_expert ..]: the k
    // experts of the largest logits (the lower index first on a tie), ids ascending, with their
    // softmax probabilities renormalised over the k, at route[route_off + row · 2k ..] (k ids,
    // then k float weights). k <= kMaxUsed <= n_expert.
    void moe_route(CommandList& cl, View x, uint32_t x_off, uint32_t n_expert, uint32_t k,
                   View route, uint32_t route_off, uint32_t n_rows);
    // One token's router GEMV with the choice as its epilogue (shaders/moe_router.comp): the
    // logits W · act[xn_off ..] at act[logit_off ..] (W: n_expert F32 rows of n_embd), then the
    // choice moe_route would write at route[route_off ..], made by the GEMV's last workgroup.
    // counter[counter_idx] (a 32-bit word) must be 0 before the dispatch and is 0 after it.
    // With gate_off, also the shared expert's gate logit gate_w[gate_off ..] · xn at
    // act[logit_off + n_expert] (ExpertGemv::gate_off).
    struct Router {
        View w, act, route, counter, gate_w;
        uint32_t n_expert = 0, k = 0, n_embd = 0;
        uint32_t xn_off = 0, logit_off = 0, route_off = 0, counter_idx = 0;
        uint32_t gate_off = kNone;
    };
    void moe_router(CommandList& cl, const Router& r);
    // GEMVs over the experts moe_route chose. W is the stack of n_expert matrices of rows × cols
    // of `type` (one tensor, expert e's rows from e · rows). For n_rows rows of a window:
    //  - slots: y[y_off + (row · k + j) · rows ..] (=|+=) W_e · x_row, e the row's j-th expert,
    //  x_row
    //    at x[x_off + row · cols]; with x_per_slot, x_(row, j) at x[x_off + (row · k + j) · cols];
    //  - sum (weighted): y[y_off + row · rows ..] (=|+=) Σ_j w_j · W_e(j) · x_(row, j), the
    //    slots' inputs as with x_per_slot.
    struct ExpertGemv {
        QType type = QType::F32;
        View w;
        uint32_t rows = 0, cols = 0, n_expert = 0, k = 0;
        // Rows an expert holds in the stack (0: rows) and the first of them read: the fused
        // gate and up stack holds 2 n_ff rows an expert, gate first.
        uint32_t expert_rows = 0, first_row = 0;
        // Slots only: the pairs (row · k + slot) in the order moe_sort wrote at
        // route[perm_off ..] (kNone: in order), so runs of vectors read one expert's rows.
        uint32_t perm_off = kNone;
        View route;
        uint32_t route_off = 0;
        View x;
        uint32_t x_off = 0;
        bool x_per_slot = false;
        // x holds the vectors rounded to bytes (GemmKernels::round_rows; x_off in words), read
        // in integer dot products (experts_read_bytes() must hold).
        bool x_bytes = false;
        // F32 x only: x holds a SwiGLU's gates and x[up_off ..] its ups, laid out alike
        // (up_off ≡ x_off mod 4), and the vectors are SiLU(gate) · up.
        uint32_t up_off = kNone;
        // Sum of one row only: also adds y[shared_off ..] (the shared expert's output) times
        // sigmoid(y[gate_off]) (its gate's logit); kNone: nothing.
        uint32_t shared_off = kNone, gate_off = 0;
        View y;
        uint32_t y_off = 0;
        bool sum = false, accumulate = false;
        uint32_t n_rows = 1;
    };
    void gemv_experts(CommandList& cl, const ExpertGemv& g);
    static bool experts_supported(QType t, uint32_t cols);
    // Whether expert GEMVs over weights of type t read their vectors rounded to bytes: block
    // formats where integer dot products run in hardware (Tuning::gemv_x `automatic`; `bytes`
    // wherever the device has them, `global` never). Rows of any length: the rounding is done
    // once for every expert, unlike the decode GEMV's in each workgroup.
    bool experts_read_bytes(QType t, uint32_t cols) const;
    // The n_rows · k (row, slot) pairs of a window's choice (route_off, as moe_route wrote it)
    // grouped by expert, as pair indices at route[perm_off ..] (one workgroup; n_expert up to
    // kMaxSortExperts).
    // With tiles_off, also the table of tiles at route[tiles_off ..] (expert_tiles_words()
    // words): each expert's pairs cut into tiles of at most tile_pairs (kExpertTileRows for
    // gemm_experts(), kSortedTilePairs for gemm_experts_sorted()); with inv_off, each pair's
    // position in that order at route[inv_off + pair].
    static constexpr uint32_t kMaxSortExperts = 1024;
    void moe_sort(CommandList& cl, View route, uint32_t route_off, uint32_t k, uint32_t n_expert,
                  uint32_t n_rows, uint32_t perm_off, uint32_t tiles_off = kNone,
                  uint32_t inv_off = kNone, uint32_t tile_pairs = kExpertTileRows);
    // The F16 rows the sorted expert tiles read (gemm_experts_sorted()): for each of the
    // n_pairs positions of moe_sort's order at route[perm_off ..], the row of cols F32 values
    // act[x_off + (pair / k) · cols ..] its pair reads, into h from half h_off (cols and h_off
    // multiples of 8).
    void moe_gather(CommandList& cl, View act, uint32_t x_off, uint32_t cols, uint32_t k,
                    View route, uint32_t perm_off, uint32_t n_pairs, View h, uint32_t h_off);
    // The expert GEMMs of a window as NV cooperative matrix 2 tiles over their inputs gathered in
    // moe_sort's order (gemm_experts_cm2.comp): g's operands as for gemm_experts() but x, which
    // here is F16 rows in that order from half x_off of x (x_rows rows readable from there: at
    // least the pairs and kSortedTilePairs more), and y, written in that order too (row pos at
    // y_off + pos · rows); the table at tiles_off cut at kSortedTilePairs pairs a tile. Only
    // where experts_sorted_cm2() holds for every stack of the layer.
    void gemm_experts_sorted(CommandList& cl, const ExpertGemv& g, uint32_t x_rows,
                             uint32_t tiles_off);
    // Whether a window of n_pairs pairs over n_expert experts runs its GEMMs over a stack of type
    // t (experts of expert_rows rows, rows of cols values, from first_row) as
    // gemm_experts_sorted() on variant v (Tuning::expert_cm2_pairs an expert on average).
    bool experts_sorted_cm2(Variant v, QType t, uint32_t cols, uint32_t rows, uint32_t expert_rows,
                            uint32_t first_row, uint32_t n_pairs, uint32_t n_expert) const;
    // The expert GEMMs of a window as grouped GEMM tiles (shaders/gemm_experts.comp): the slots
    // of gemv_experts() (not the weighted sum; x in F32, not bytes), each expert's pairs in the
    // order moe_sort wrote at perm_off cut into tiles of up to kExpertTileRows pairs (its table
    // at tiles_off), each tile's weight rows decoded once for all its pairs. KHR cooperative
    // matrices where variant v runs them, else F32 tiles on any device.
    // Over Q4_K or Q6_K stacks whose experts are whole tiles of rows, on a device that runs the
    // skinny GEMM, they may run as its grouped form instead (expert_skinny()).
    static constexpr uint32_t kExpertTileRows = 64;
    static constexpr uint32_t kSortedTileWeightRows = 128;  // gemm_experts_sorted()'s BM
    // Its BN: 128 (a dense window's tile) ran slower than 64 on an H100 (history, 2026-12-07
    // (09:05)).
    static constexpr uint32_t kSortedTilePairs = 64;
    void gemm_experts(CommandList& cl, Variant v, const ExpertGemv& g, uint32_t tiles_off);
    // Whether gemm_experts(g) runs as the skinny GEMM's grouped form (shaders/gemm_skinny.comp,
    // EXPERTS; Tuning::expert_skinny).
    bool expert_skinny(Variant v, const ExpertGemv& g) const;
    // The words of that table for n_pairs pairs over n_expert experts: a count, and three a
    // tile for at most one tile a kExpertTileRows pairs and one more an expert.
    static uint32_t expert_tiles_words(uint32_t n_pairs, uint32_t n_expert);
    // Whether a window's expert GEMMs over weights of type t, rows of cols values, run as
    // gemm_experts() for its n_pairs pairs (Tuning::expert_tile_pairs on average an expert).
    bool experts_use_tiles(QType t, uint32_t cols, uint32_t n_pairs, uint32_t n_expert) const;
    // act[h_off + row · n ..] += Σ_j w_j · act[out_off + (row · k + j) · n ..] for n_rows rows,
    // w_j the row's routing weights (slot order).
    // With inv_off, slot j's output lies at the pair's position in moe_sort's order instead,
    // route[inv_off + row · k + j].
    void moe_sum(CommandList& cl, View act, uint32_t out_off, uint32_t h_off, View route,
                 uint32_t route_off, uint32_t k, uint32_t n, uint32_t n_rows,
                 uint32_t inv_off = kNone);
    // The shared expert's gated add for n_rows rows of n values (rows strided by n):
    // act[h_off + row · n ..] += sigmoid(w[w_off ..] · act[xn_off + row · n ..]) ·
    // act[shared_off + row · n ..]; with norm_off, then the next RMSNorm of each new row into
    // act[xn_off + row · n ..], its weights at w[norm_off ..]. With sum.k, first moe_sum()'s
    // weighted sum of the row's k slots (their outputs at act[down_off ..], the route at
    // act[route_off ..]), in its order: one stage for both.
    struct ExpertsSum {
        uint32_t k = 0, down_off = 0, route_off = 0;
        uint32_t inv_off = kNone;  // as moe_sum()'s
    };
    void shared_expert_add(CommandList& cl, View w, uint32_t w_off, View act, uint32_t xn_off,
                           uint32_t shared_off, uint32_t h_off, uint32_t n, uint32_t n_rows,
                           uint32_t norm_off, float eps, const ExpertsSum& sum);
    void shared_expert_add(CommandList& cl, View w, uint32_t w_off, View act, uint32_t xn_off,
                           uint32_t shared_off, uint32_t h_off, uint32_t n, uint32_t n_rows,
                           uint32_t norm_off = kNone, float eps = 0.f) {
        shared_expert_add(cl, w, w_off, act, xn_off, shared_off, h_off, n, n_rows, norm_off, eps,
                          ExpertsSum{});
    }

    // The most experts and the most chosen the top-k's rank form takes (moe_topk.glsl RANK_MAX,
    // RANK_K).
    static constexpr uint32_t kRankExperts = 512, kRankUsed = 8;

  private:
    // Whether the top-k of n_expert over wg threads runs on subgroup reductions.
    bool route_subgroups(uint32_t n_expert, uint32_t wg) const;
    std::string route_kernel(const char* name, uint32_t n_expert, uint32_t k, uint32_t wg) const;
    uint32_t route_form(uint32_t n_expert, uint32_t k, uint32_t wg) const;
};

}  // namespace dl::vk
