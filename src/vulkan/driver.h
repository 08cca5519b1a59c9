// The resident driver: an Executor that runs the whole forward pass of a model on one Vulkan
// device. Weights are uploaded once in their GGUF block formats (per the residency plan; Q4_K
// and Q6_K rows held in tiles, weight_layout.h); each session records its decode *token command*
// once — embedding, every layer, the head and the token's choice (or, in a second command, the
// logits' copy to the host) — and replays it per token, reading the position and token id from a
// small host-visible buffer. Prefill runs in windows of plan.window rows, one recorded command
// per window size: GEMM tiles over the native blocks, attention and the DeltaNet scan over the
// rows.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "model/model.h"
#include "vulkan/device.h"
#include "vulkan/kernels.h"
#include "vulkan/plan.h"

namespace dl::vk {

struct DriverOptions {
    DeviceOptions device = DeviceOptions::from_env();
    PlanOptions plan;
    // GPU time per kernel role (gemv, gemm, attention, deltanet, ...) per token, printed to
    // stderr when the driver closes (--profile, DELTALLM_VK_PROFILE=1).
    bool profile = profile_from_env();
    static bool profile_from_env();
    // The decode token command runs each RMSNorm as the epilogue of the GEMV before it
    // (DELTALLM_VK_DECODE_FUSION; off: separate stages). On an H200, 9B: 173.8 t/s against 170.4
    // with separate stages (two rounds each); 0.8B: equal within the spread.
    bool fused_decode = fused_decode_from_env();
    static bool fused_decode_from_env();
    // With fused_decode: where every GEMV that reads a norm's output takes x in bytes, those
    // GEMVs apply the norm to h themselves (Kernels::gemv_normed) and the GEMV before it ends
    // without the epilogue (DELTALLM_VK_GEMV_NORM_IN; off: the epilogue everywhere).
    bool gemv_norm_in = gemv_norm_in_from_env();
    static bool gemv_norm_in_from_env();
    // With fused_decode: the FFN gate and up pair rounds its rows to bytes for the down
    // projection as well (Kernels::GemvRounding), where both sides' shapes allow, so the down
    // projection does not round x (DELTALLM_VK_GEMV_PRE_ROUND; off: it rounds x itself).
    bool gemv_pre_round = gemv_pre_round_from_env();
    static bool gemv_pre_round_from_env();
    // With norms taken by their readers: the GEMV that writes the residual stream also rounds
    // it to bytes times the next norm's weights, with each block's sum of squares, where it and
    // every reader of that norm run on the tiled GEMV (Kernels::GemvRounding::out_norm), so the
    // readers neither read the floats nor round them (DELTALLM_VK_GEMV_ROUND_H).
    bool gemv_round_h = gemv_round_h_from_env();
    static bool gemv_round_h_from_env();
    // ... over an h of at least this many values: on an H200 the 9B's readers (4096) gained
    // more than its writers lost (tg128 +3 %), the 0.8B's (1024) gained nothing (docs/PERF.md
    // 2026-12-02, evening). Tests lower it.
    uint32_t gemv_round_h_min = 2048;
    // The token command reads each run of a mixer's input projections that the plan put back to
    // back (same type and row length) in one GEMV (DELTALLM_VK_MERGE_IN; off: a GEMV each).
    bool merge_in = merge_in_from_env();
    static bool merge_in_from_env();
    // With gemv_norm_in: where a DeltaNet layer's output projection takes x in bytes, the decode
    // step leaves its gated RMSNorm to that GEMV (Kernels::gemv_gated), so no column group of a
    // head waits for the others (DELTALLM_VK_GATED_IN; off: the step applies it).
    bool gated_in = gated_in_from_env();
    static bool gated_in_from_env();
    // With gated_in: where that projection runs on the tiled GEMV, the step also rounds its
    // output to bytes (Kernels::DeltaNetStep::round_y), so the projection's workgroups copy
    // bytes instead of each rounding the floats (DELTALLM_VK_GATED_ROUNDED; off: they round).
    bool gated_rounded = gated_rounded_from_env();
    static bool gated_rounded_from_env();
    // Where an attention layer's output projection runs on the tiled GEMV, the decode attention
    // also rounds its output to bytes (Kernels::Attention::round_off), so the projection's
    // workgroups copy bytes instead of each rounding the floats (DELTALLM_VK_ATTN_ROUNDED; off:
    // they round).
    bool attn_rounded = attn_rounded_from_env();
    static bool attn_rounded_from_env();
    // With attn_rounded and gated_rounded: in a hybrid model, an attention layer's output
    // projection of the same type and shape as the DeltaNet layers' runs in their form
    // (Kernels::GemvGatedIn with no factor), so both take one pipeline, whose code the DeltaNet
    // layers keep warm: on an H200 the attention layers' own pipeline, run one layer in four,
    // paid for fetching its code every time (DELTALLM_VK_ATTN_GATED_FORM; off: their own form).
    bool attn_gated_form = attn_gated_form_from_env();
    static bool attn_gated_form_from_env();
    // Prefill windows on the NV cooperative matrix 2 tiles expand the next GEMM's matrix to F16
    // beside the current GEMM (DELTALLM_VK_EXPAND_AHEAD; off: each expansion between barriers
    // of its own, for measurements).
    bool expand_ahead = expand_ahead_from_env();
    static bool expand_ahead_from_env();
    // A prefill window's command, recorded in the window's time on first use, is queued in
    // parts while it is recorded (CommandList::submit_early) so the device starts on its first
    // layers at once (DELTALLM_VK_EARLY_SUBMIT; off: queued whole after its recording).
    bool early_submit = early_submit_from_env();
    static bool early_submit_from_env();
    // The GEMMs of a window that read the same rows (gemm_groups) run together, their matrices
    // expanded together (DELTALLM_VK_GEMM_GROUPS; off: a barrier between each, for measurements).
    bool gemm_groups = gemm_groups_from_env();
    static bool gemm_groups_from_env();
    // Kernels::gemv_x (DELTALLM_VK_GEMV_X: auto, global or bytes).
    Kernels::GemvX gemv_x = gemv_x_from_env();
    static Kernels::GemvX gemv_x_from_env();
    // Kernels::gemv_groups (DELTALLM_VK_GEMV_GROUPS).
    uint32_t gemv_groups = gemv_groups_from_env();
    static uint32_t gemv_groups_from_env();
    // Kernels::gemv_waves (DELTALLM_VK_GEMV_WAVES).
    uint32_t gemv_waves = gemv_waves_from_env();
    static uint32_t gemv_waves_from_env();
    // Kernels::attn_one_split (DELTALLM_VK_ATTN_ONE_SPLIT).
    uint32_t attn_one_split = attn_one_split_from_env();
    static uint32_t attn_one_split_from_env();
    // Positions below which a session's token command runs the decode attention with one query
    // head a workgroup (Kernels::Attention::heads_a_group), where the launcher takes several: a
    // second recorded command, so neither form pays for the other. Its kernel has less code,
    // which a hybrid model's attention, run one layer in four, fetches cold every token (H200,
    // Qwen3.5-9B: 13-14 us a token at short contexts), but reads each cache row once a query
    // head. -1: while those extra reads stay under 4 MiB a layer (attn_short_positions()); 0:
    // never (DELTALLM_VK_ATTN_SHORT).
    int64_t attn_short = attn_short_from_env();
    static int64_t attn_short_from_env();
    // Kernels::gemv_balance (DELTALLM_VK_GEMV_BALANCE).
    bool gemv_balance = gemv_balance_from_env();
    static bool gemv_balance_from_env();
    // Kernels::gemv_slots, for tests: the workgroup slots the GEMV shapes are balanced over (0:
    // counted from the device's multiprocessors, where it reports them), so that the balanced
    // and shared shapes of the token command run on a device that reports none.
    uint32_t gemv_slots = 0;
    // Kernels::gemv_wide (DELTALLM_VK_GEMV_WIDE: auto, off or all).
    Kernels::GemvWide gemv_wide = gemv_wide_from_env();
    static Kernels::GemvWide gemv_wide_from_env();
    // Kernels::gemv_split_parts (DELTALLM_VK_GEMV_SPLIT: 0 by the device, 1 none, 2-4).
    uint32_t gemv_split = gemv_split_from_env();
    static uint32_t gemv_split_from_env();
    // Kernels::gemv_tiled (DELTALLM_VK_GEMV_TILED: on or off).
    Kernels::GemvTiled gemv_tiled = gemv_tiled_from_env();
    static Kernels::GemvTiled gemv_tiled_from_env();
    // Kernels::gemm_tile (DELTALLM_VK_GEMM_TILE, "BMxBNxBK[xWG]"; empty: chosen by the rows).
    Kernels::GemmTile gemm_tile = gemm_tile_from_env();
    static Kernels::GemmTile gemm_tile_from_env();
    // Kernels::deltanet_columns (DELTALLM_VK_DN_COLUMNS).
    uint32_t deltanet_columns = deltanet_columns_from_env();
    static uint32_t deltanet_columns_from_env();
    // The scan of a prefill window's DeltaNet layers (DELTALLM_VK_DN_SCAN: best, chunked,
    // shuffle, clustered or plain; see Kernels::DeltaNetScan).
    Kernels::DeltaNetScan deltanet_scan = deltanet_scan_from_env();
    static Kernels::DeltaNetScan deltanet_scan_from_env();
};

// Device milliseconds by kernel role, summed over submits, per phase (decode, prefill); and of
// the submits timed whole (CommandList::kWhole), whose stages write no timestamps of their own.
struct Profile {
    struct Phase {
        int64_t tokens = 0;
        std::map<std::string, double> ms;
        int64_t whole_tokens = 0;
        double whole_ms = 0;
    };
    std::map<std::string, Phase> phases;
    void add(const std::string& phase, int64_t tokens,
             const std::vector<std::pair<std::string, double>>& times);
    std::string report() const;
};

class ResidentDriver final : public Executor {
  public:
    // Opens the device, plans and uploads the model; a Decline says why it cannot run there.
    static Result<std::unique_ptr<ResidentDriver>> create(std::shared_ptr<const Model> model,
                                                          const DriverOptions& opts = {});
    ~ResidentDriver() override;

    std::string name() const override;
    const Model& model() const override { return *model_; }
    const Plan& plan() const { return plan_; }
    Device& device() { return *dev_; }
    // What --profile has timed so far (null without it).
    const Profile* profile() const { return profile_.get(); }

    // n_ctx is capped by the plan's context (the largest that fits the device).
    std::unique_ptr<SessionState> new_session(int64_t n_ctx) override;
    void prefill(SessionState& s, std::span<const int32_t> tokens, LogitsRows rows,
                 std::vector<float>& logits) override;
    using Executor::decode;
    // The logits in the session's host-visible buffer, where the token command's head wrote them.
    std::span<const float> decode(SessionState& s, int32_t token) override;
    // Device-side copies of the used KV rows, conv rings and DeltaNet states; nothing passes
    // through the host. restore() throws dl::Error for a snapshot of another driver or a session
    // too small for it.
    std::unique_ptr<SessionSnapshot> snapshot(const SessionState& s) override;
    bool restore(SessionState& s, const SessionSnapshot& snap) override;
    // Every weight slab read once a pass (shaders/stream_read.comp), several passes back to back,
    // timed on the device: the rate decode could read its weights at.
    ReadRate measure_read_rate() override;
    // Greedy decode without logits: only the chosen token id returns from the device.
    int32_t decode_greedy(SessionState& s, int32_t token);
    // Decode and sample the next token on the device (temperature, top-k, top-p, min-p; u is
    // the uniform draw of the host sampler, so both choose alike): only the id returns.
    bool samples_on_device(const SamplerParams& p) const override;
    int32_t decode_sample(SessionState& s, int32_t token, const SamplerParams& p,
                          double u) override;
    // The dispatches and pipeline barriers (dependent stages) of a session's decode token
    // command, the one without the logits copy.
    struct CommandCounts {
        uint32_t dispatches = 0, barriers = 0;
        uint32_t rounded_reads = 0;     // GEMVs over x rounded by the GEMV before them
        uint32_t gated_reads = 0;       // GEMVs that apply a DeltaNet step's gated norm
        uint32_t gated_rounded = 0;     // ... over the step's output rounded by the step
        uint32_t normed_roundings = 0;  // GEMVs that round h for the next norm's readers
        uint32_t attn_rounded = 0;      // GEMVs over the attention's output rounded by it
        uint32_t attn_gated_form = 0;   // ... in the DeltaNet output projections' form
    };
    CommandCounts token_command_counts(const SessionState& s) const;
    // The positions below which the session's tokens run the attention's short-context form
    // (DriverOptions::attn_short).
    int64_t short_attention_until(const SessionState& s) const;

    struct Weights;
    struct Session;

  private:
    ResidentDriver() = default;
    // Sampling parameters of one token command run; temperature 0 is the argmax.
    struct SampleArgs {
        float temperature = 0, top_p = 1, min_p = 0, u = 0;
        int32_t top_k = 1;
        SampleArgs() = default;
        SampleArgs(float t, int32_t k, float p, float mp, float uu)
            : temperature(t), top_p(p), min_p(mp), u(uu), top_k(k) {}
    };
    static constexpr uint32_t kSampleParams = 3;  // tok[3..7]: temperature, top_k, top_p, min_p, u
    void run_token(Session& s, int32_t token, bool logits, const SampleArgs& args);
    // whole: under --profile, the command timed as a whole, not stage by stage. short_attn: the
    // attention in its short-context form, for positions below s.short_until.
    void record_token(Session& s, CommandList& cl, bool host_logits, bool whole, bool short_attn);
    // The positions below which a session of n_ctx tokens runs the short-context token command
    // (DriverOptions::attn_short; 0: none).
    int64_t attn_short_positions(int64_t n_ctx) const;
    // The command of a prefill window of m rows (recorded once a session and size). queue: the
    // window's inputs are in place, so a command recorded now is queued in parts as it is
    // recorded (DriverOptions::early_submit); its submit_and_wait() then queues the rest.
    CommandList& window_command(Session& s, uint32_t m, bool all, bool queue = false);
    Kernels::DeltaNetStep deltanet_args(const ActLayout& A, const Layer& L) const;

    std::shared_ptr<const Model> model_;
    std::unique_ptr<Device> dev_;
    Plan plan_;
    std::unique_ptr<Weights> w_;
    std::unique_ptr<Profile> profile_;
    bool fused_decode_ = true;
    bool gemv_norm_in_ = true;
    bool gemv_pre_round_ = true;
    bool gemv_round_h_ = true;
    uint32_t gemv_round_h_min_ = 2048;
    bool merge_in_ = true;
    bool gated_in_ = true;
    bool gated_rounded_ = true;
    bool attn_rounded_ = true;
    bool attn_gated_form_ = true;
    int64_t attn_short_ = -1;
    bool expand_ahead_ = true;
    bool early_submit_ = true;
    bool gemm_groups_ = true;
};

// Registers "vulkan" with the engine (engine/engine.h register_device); called once at start-up.
void register_device_driver();

}  // namespace dl::vk
