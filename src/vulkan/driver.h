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
#include <span>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "model/model.h"
#include "vulkan/buffer_pool.h"
#include "vulkan/device.h"
#include "vulkan/fusions.h"
#include "vulkan/kernels.h"
#include "vulkan/plan.h"
#include "vulkan/token_plan.h"
#include "vulkan/window_plan.h"

namespace dl::vk {

struct DriverOptions {
    DeviceOptions device = DeviceOptions::from_env();
    PlanOptions plan;
    // GPU time per kernel role (gemv, gemm, attention, deltanet, ...) per token, printed to
    // stderr when the driver closes (--profile, DELTALLM_VK_PROFILE=1).
    bool profile = profile_from_env();
    static bool profile_from_env();
    // The decode token command's fusions (fusions.h).
    Fusions fusions = Fusions::from_env();
    // The kernels' knobs (kernels_tuning.h), each read from its variable by the function below
    // (DELTALLM_VK_GEMV_X, _GEMV_GROUPS, _GEMV_WAVES, _ATTN_ONE_SPLIT, _GEMV_BALANCE, _GEMV_WIDE,
    // _GEMV_SPLIT, _GEMV_TILED, _GEMM_TILE, _GEMM_GEMV_ROWS, _DN_COLUMNS, _DN_SCAN); tests and the
    // speed reports set fields of it directly.
    Tuning tuning = tuning_from_env();
    static Tuning tuning_from_env();
    // The readers tuning_from_env() takes each knob from (one clear error for a bad value).
    static Kernels::GemvX gemv_x_from_env();
    static Tuning::RouteForm moe_route_form_from_env();
    static uint32_t gemv_groups_from_env();
    static uint32_t gemv_waves_from_env();
    static uint32_t attn_one_split_from_env();
    static bool gemv_balance_from_env();
    static Kernels::GemvWide gemv_wide_from_env();
    static uint32_t gemv_split_from_env();
    static Kernels::GemvTiled gemv_tiled_from_env();
    static Kernels::GemmTile gemm_tile_from_env();
    static uint32_t gemm_gemv_rows_from_env();
    static uint32_t gemm_expand_rows_from_env();
    static int gemm_split_from_env();
    static uint32_t gemv_batch_rows_from_env();
    static uint32_t gemv_batch_threads_from_env();
    static uint32_t expert_tile_pairs_from_env();
    static uint32_t expert_cm2_pairs_from_env();
    static uint32_t expert_sort_pairs_from_env();
    static uint32_t deltanet_columns_from_env();
    static Kernels::DeltaNetScan deltanet_scan_from_env();
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
    // A step's prompt chunk runs in one command with its decode tokens, the weights read once
    // for both (DELTALLM_VK_MIXED_STEPS; off: the chunk as a window of its own beside them).
    bool mixed_steps = mixed_steps_from_env();
    static bool mixed_steps_from_env();
    // The GEMMs of a window that read the same rows (gemm_groups) run together, their matrices
    // expanded together (DELTALLM_VK_GEMM_GROUPS; off: a barrier between each, for measurements).
    bool gemm_groups = gemm_groups_from_env();
    static bool gemm_groups_from_env();
    // A window's norm or SwiGLU writes the F16 copy of its rows that the GEMM tiles after it read
    // (DELTALLM_VK_F16_BY_WRITER; off: an f16_copy stage of its own, for measurements).
    bool f16_by_writer = f16_by_writer_from_env();
    static bool f16_by_writer_from_env();
    // Positions below which a session's token command runs the decode attention with one query
    // head a workgroup (Kernels::Attention::heads_a_group), where the launcher takes several: a
    // second recorded command, so neither form pays for the other. Its kernel has less code,
    // which a hybrid model's attention, run one layer in four, fetches cold every token (H200,
    // Qwen3.5-9B: 13-14 us a token at short contexts), but reads each cache row once a query
    // head. -1: while those extra reads stay under 4 MiB a layer (attn_short_positions()); 0:
    // never (DELTALLM_VK_ATTN_SHORT).
    int64_t attn_short = attn_short_from_env();
    static int64_t attn_short_from_env();
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
    // One command's stages as a line: its total and its costliest roles, most first.
    static std::string line(const std::vector<std::pair<std::string, double>>& times);
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
    // Copies a snapshot's buffers to host memory and frees its device memory.
    bool spill(SessionSnapshot& snap) override;
    uint64_t snapshot_room() const override { return plan_.snapshot_bytes; }
    // Every weight slab read once a pass (shaders/stream_read.comp), several passes back to back,
    // timed on the device: the rate decode could read its weights at.
    ReadRate measure_read_rate() override;
    // The step's single-token decodes (each one token of a session that holds a prompt, wanting
    // its logits or a token sampled here), two or more, run as one batch: the projections are
    // GEMM tiles over the batch's rows, each weight read once a step; the mixers run a row at a
    // time on each row's own cache or state. Prompt chunks run one by one beside it.
    void step(std::span<StepItem> items) override;
    CacheUse cache_use() const override;
    std::string warm_up(int64_t sequences) override;
    // Batch commands recorded and kept: one for each row count and logits' destination, however
    // the sessions of the rows change.
    size_t batch_commands() const { return batch_cmds_.size(); }
    // Steps that ran a prompt chunk in one command with their decode rows (run_batch).
    uint64_t mixed_steps() const { return mixed_steps_; }
    // Pipelines made so far (warm_up makes those of steps ahead).
    size_t pipelines() const;
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
        uint32_t ffn_q8_reads = 0;            // down projections over the FFN pair's int8 output
        uint32_t gated_norm_reads = 0;        // GEMVs that apply a DeltaNet step's gated norm
        uint32_t deltanet_q8_reads = 0;       // ... over the step's int8 output
        uint32_t residual_q8_writes = 0;      // GEMVs that write h as int8 for the next norm
        uint32_t attention_q8_reads = 0;      // GEMVs over the attention's int8 output
        uint32_t shared_output_pipeline = 0;  // ... in the DeltaNet output projections' form
    };
    CommandCounts token_command_counts(const SessionState& s) const;
    // The plan of a session's token command (token_plan.h), as its recording followed: the one
    // that chooses the token on the device, or the one that writes the logits for the host; in
    // the attention's short-context form where short_attn.
    TokenPlan token_plan(const SessionState& s, bool host_logits, bool short_attn) const;
    // The plan of a session's prefill window of m rows (window_plan.h): the last row's logits, or
    // every row's when `all`.
    WindowPlan window_plan(const SessionState& s, uint32_t m, bool all) const;
    // The plan of a batch command of m decode rows (step()), with every row's logits copied to
    // the host when host_logits.
    WindowPlan batch_plan(uint32_t m, bool host_logits) const;
    // The positions below which the session's tokens run the attention's short-context form
    // (DriverOptions::attn_short).
    int64_t short_attention_until(const SessionState& s) const;

    struct Weights;
    struct Session;

  private:
    // The best device-timed rate of reading the views whole (measure_read_rate).
    double read_rate(const std::vector<View>& parts);
    ResidentDriver() = default;
    // Sampling parameters of one token command run; temperature 0 is the argmax.
    struct SampleArgs {
        float temperature = 0, top_p = 1, min_p = 0, u = 0;
        int32_t top_k = 1;
        SampleArgs() = default;
        SampleArgs(float t, int32_t k, float p, float mp, float uu)
            : temperature(t), top_p(p), min_p(mp), u(uu), top_k(k) {}
    };
    // Writes what a session's next token command (or a batch's row) reads from its tok words: the
    // position, the token and the sampling arguments.
    static void set_tok(uint32_t* words, int64_t position, int32_t token, const SampleArgs& args);
    static void set_tok(Session& s, int32_t token, const SampleArgs& args);
    // Gives a session blocks of the paged KV cache for its first `rows` rows, so that it may write
    // rows n_past .. rows - 1: the block the next row goes into is copied first where another
    // holds it too (a snapshot). CacheFull when the pool has none left (the blocks it took stay
    // the session's). release_rows takes back the blocks past the first `rows` rows.
    void reserve_rows(Session& s, int64_t rows);
    static void release_rows(Session& s, int64_t rows);
    static constexpr uint32_t kSampleParams = 3;  // tok[3..7]: temperature, top_k, top_p, min_p, u
    // tok[8], tok[9]: where the session's DeltaNet states and conv rings start in their pools
    // (floats), for a batch's rows (Kernels::DeltaNetStep::state_in_tok).
    static constexpr uint32_t kStateBase = 8, kRingBase = 9;
    void run_token(Session& s, int32_t token, bool logits, const SampleArgs& args);
    // The token command's plan (token_command.cpp), and its recording. timed_whole: under
    // --profile, the command timed as a whole, not stage by stage.
    TokenPlan plan_token(const Session& s, bool host_logits, bool short_attn) const;
    void record_token(Session& s, CommandList& cl, const TokenPlan& plan, bool timed_whole);
    // The positions below which a session of n_ctx tokens runs the short-context token command
    // (DriverOptions::attn_short; 0: none).
    int64_t attn_short_positions(int64_t n_ctx) const;
    // The command of a prefill window of m rows (recorded once a session and size). queue: the
    // window's inputs are in place, so a command recorded now is queued in parts as it is
    // recorded (DriverOptions::early_submit); its submit_and_wait() then queues the rest.
    CommandList& window_command(Session& s, uint32_t m, bool all, bool queue = false);
    // The rows of a step's command: decode_rows decode tokens, then prompt chunks (each of `rows`
    // rows of a session of n_ctx tokens).
    struct StepRows {
        struct Chunk {
            uint32_t rows;
            int64_t n_ctx;
        };
        uint32_t decode_rows = 0;
        std::vector<Chunk> chunks;
    };
    // The window command's plan (window_command.cpp) for a session of n_ctx tokens. A step's plan
    // (`step`): its first decode_rows rows are one decode token each of as many sessions
    // (step()), whichever they are: each layer's mixer runs every such row in one dispatch, on
    // the sessions' caches and state found through the batch's rows (Weights::BatchRows). Each
    // prompt chunk after them runs the window's kernels on its own session. The decode rows'
    // and each chunk's last row's logits are kept on the device, sampled there into the batch's
    // rows' words (decode rows first, then one a chunk), and copied to the host when host_logits.
    WindowPlan plan_window(int64_t n_ctx, uint32_t m, bool all, const StepRows* step = nullptr,
                           bool host_logits = false) const;
    // Records a window's plan: a prefill window of one session, a batch (no session), or a step
    // with prompt chunks (chunk j's session sessions[j]).
    void record_window(CommandList& cl, const WindowPlan& p, std::span<Session* const> sessions,
                       uint32_t m, bool queue);
    // Runs a step's decode items (checked; the first `decodes`) and prompt chunks (the rest) as
    // one command: the decode rows first, the chunks' rows after them. Decodes alone replay the
    // batch command of their row count; with chunks the command is recorded for the step.
    void run_batch(std::span<StepItem> items, size_t decodes);
    // Writes row b of the batch (Weights::BatchRows) for item `it`: the position and token its
    // row's kernels see, its sampling, where its session's state and KV blocks lie.
    void fill_batch_row(uint32_t b, const StepItem& it, int64_t position, int32_t token);
    // Makes the batch's logits buffers (Weights::batch_logits, win_logits) on first use.
    void batch_logits();
    // The command of a batch of m decodes, recorded on the first step of m rows and replayed for
    // every step of m rows, whichever sessions they are.
    CommandList& batch_command(uint32_t m, bool host_logits);
    // Makes room for batches of m rows (Weights::BatchRows); wider rows drop the commands
    // recorded over the narrower ones.
    void grow_batch(uint32_t m);

    Kernels::DeltaNetStep deltanet_args(const ActLayout& A, const Layer& L) const;

    std::shared_ptr<const Model> model_;
    std::unique_ptr<Device> dev_;
    Plan plan_;
    std::unique_ptr<Weights> w_;
    std::unique_ptr<Profile> profile_;
    // The buffers of prefix-cache snapshots (device) and their spills (host), reused: a
    // snapshot of the same model needs the same bytes each time.
    std::shared_ptr<BufferPool> snapshot_buffers_;
    Fusions fusions_;
    int64_t attn_short_ = -1;
    bool expand_ahead_ = true;
    bool early_submit_ = true;
    bool mix_chunks_ = true;    // DriverOptions::mixed_steps
    uint64_t mixed_steps_ = 0;  // steps run with a prompt chunk beside their decode rows
    bool gemm_groups_ = true;
    bool f16_by_writer_ = true;
    // Batch commands by their rows and whether they copy the logits to the host, with when each
    // was last used: past kBatchCommands of them (a server whose load swings over many row
    // counts), the least recently used goes.
    struct BatchCommand {
        std::unique_ptr<CommandList> cmd;
        uint64_t last_used = 0;
    };
    static constexpr size_t kBatchCommands = 64;
    std::map<std::pair<uint32_t, bool>, BatchCommand> batch_cmds_;
    uint64_t batch_steps_ = 0;
};

// Registers "vulkan" with the engine (engine/engine.h register_device); called once at start-up.
void register_device_driver();

}  // namespace dl::vk
