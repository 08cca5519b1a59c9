// Launchers of attention: the decode attention of one token over the KV cache
// (kernels_attention.cpp) and the causal attention of a prefill window's rows on tiles, NV
// cooperative matrix 2 or KHR cooperative matrices (kernels_window.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "vulkan/decline.h"
#include "vulkan/kernel_family.h"

namespace dl::vk {

class AttentionKernels : public virtual KernelFamily {
  public:
    AttentionKernels(Device& dev, Pipelines& pipes) : KernelFamily(dev, pipes) {}

    // Decode attention of one token over the paged F16 KV cache (below), one dispatch recorded once
    // for a context of n_ctx rows: each workgroup prepares its queries (per-head RMSNorm when
    // q_norm_off is given, rope of the first n_rot dims) and the one that reads row tok[0] prepares
    // k (k_norm_off) and v for it, stored to that row by the first head group of each key/value
    // head; the query heads of each key/value head together (up to four a workgroup), the cache
    // walked in chunks of kAttnSplit rows with an online softmax, the live chunks dealt to
    // attention_splits(n_ctx) splits into partials, the last split of each group (counted on
    // counter, n_head words, 0 between dispatches) merging them, times sigmoid(gate) when gate_off
    // is given, into act[o_off..].
    static constexpr uint32_t kAttnSplit = 64;
    static constexpr uint32_t kAttnMaxSplits = 64;  // attn_decode.comp MAXS
    // The KV cache is paged (kv_pages.glsl): a sequence's rows live in blocks of kKvBlock rows of
    // a pool every sequence shares ([blocks][kKvBlock][n_kv][head_dim] F16, pairs packed in
    // 32-bit words), in the order of its block table: the words of tok from kKvTable on, the pool
    // block of each of its blocks. The decode chunks and the window tiles divide a block, so a
    // chunk's value rows, read without a clamp to the live ones, stay inside its block.
    static constexpr uint32_t kKvBlock = 64;
    static constexpr uint32_t kKvTable = 64;
    static_assert(kKvBlock % kAttnSplit == 0);
    static uint64_t kv_blocks(uint64_t rows) { return (rows + kKvBlock - 1) / kKvBlock; }
    // Bytes of one block of a layer's key or value pool.
    static uint64_t kv_block_bytes(uint64_t n_kv, uint64_t head_dim) {
        return (uint64_t)kKvBlock * n_kv * head_dim * 2;
    }
    // Bytes of a key or value cache of n_ctx rows: whole blocks.
    static uint64_t attention_cache_bytes(uint64_t n_ctx, uint64_t n_kv, uint64_t head_dim) {
        return kv_blocks(n_ctx) * kv_block_bytes(n_kv, head_dim);
    }
    // Bytes of the token buffer of a sequence of up to n_ctx rows: the words before the block
    // table (position, token id, sampling) and the table.
    static uint64_t tok_bytes(uint64_t n_ctx) { return (kKvTable + kv_blocks(n_ctx)) * 4; }
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
        // Decode: act, the output also quantized to int8 there (rounding_floats(n_head · head_dim)
        // floats, the layout a GEMV reads with GemvRounding::x_rounded), or kNone. Heads of a
        // multiple of 16 values.
        uint32_t round_off = kNone;
        // Query heads a workgroup: 0 for the launcher's choice (attention_group()), or a divisor
        // of n_head / n_kv the shared memory holds (1: one head a workgroup, each cache row read
        // once a query head; less code, for the short contexts of ResidentDriver's token command).
        uint32_t heads_a_group = 0;
        // Decode: the rows of a batch in one dispatch, each a sequence of its own: row r's words
        // tok_row · r words into tok, its partials part_row · r floats into the partials, its
        // counters counter_row · r words into the counters, and its act values r rows on (q_row
        // for the raw queries and the gate, k_row for the key and value, o_row for the output).
        // The output is rounded (round_off) for one row only.
        uint32_t rows = 1, tok_row = 0, part_row = 0, counter_row = 0;
        uint32_t q_row = 0, k_row = 0, o_row = 0;
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
    // asks for its short-context form's attention right after the launcher's (docs/perf/history.md
    // 2026-12-04 (05:30)).
    void prepare_attention(const Attention& a);

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
    // split: the scratch of attention_rows_split() (without it, or with too little, the
    // attention runs unsplit).
    void attention_rows(CommandList& cl, const AttentionRows& a, View act, View params,
                        View k_cache, View v_cache, View tok, uint32_t n,
                        Variant v = Variant::scalar, SplitScratch split = {});
    // A window of few rows gives the device few workgroups (a block of rows × a group of query
    // heads each) while each walks the whole history: on the tiles and the KHR kernel the keys
    // every row sees whole are then split into parts, each a workgroup of its own, and the last
    // part of a block to finish merges them in part order (shaders/attn_window_split.glsl). The
    // parts for n rows of `a` (a session of up to a.n_ctx rows; act at act_offset bytes into its
    // buffer) and the scratch they need; parts 1 where it runs unsplit. Recorded once for any
    // position: where the history is shorter than the parts, the first parts find no keys.
    struct AttentionSplit {
        uint32_t parts = 1;
        SplitNeed need;
    };
    static AttentionSplit attention_rows_split(const Features& f, const Tuning& t,
                                               const Attention& a, uint32_t n, Variant v,
                                               uint64_t act_offset);
    static constexpr uint32_t kWindowParts = 16;  // the most parts of a window's attention
    // The NV cooperative matrix 2 attention tile: query_vectors = rows · heads (query heads of
    // one key/value head) a workgroup of 256, keys a tile; nullopt where the device, the variant
    // or the head size rule it out.
    using AttentionCm2 = Tuning::AttentionCm2;
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

  private:
    // The window attention's kernel for `a` (attention_kernel()), its module and specialization
    // constants, and its tile: query heads and rows a workgroup, keys a tile.
    struct WindowTile {
        WindowAttentionKernel kernel;
        const char* module;
        std::vector<uint32_t> spec;
        uint32_t heads, rows, keys, query_vectors;
    };
    static WindowTile window_tile(const Features& f, const Tuning& t, const Attention& a, Variant v,
                                  uint64_t act_offset, bool caches_aligned);
    // The decode attention's query heads a workgroup and threads a workgroup for `a`.
    std::pair<uint32_t, uint32_t> attention_shape(const Attention& a) const;
    const Kernel& attention_kernel(const Attention& a);  // its pipeline
};

}  // namespace dl::vk
