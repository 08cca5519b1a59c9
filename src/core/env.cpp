// The one table of environment variables.
#include "core/env.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace dl::env {

const std::vector<Var>& all() {
    static const std::vector<Var> vars = {
        {"DELTALLM_LOG", "string", "info", "log level: debug, info, warn, error or quiet"},
        {"DELTALLM_THREADS", "int", "0", "CPU threads (0: one per core)"},
        {"DELTALLM_CPU_FEATURES", "string", "auto",
         "restrict CPU kernels: 'scalar' forces the portable fallback, 'avx2' the AVX2 kernels "
         "(no AVX-512), 'auto' uses what the CPU has"},
        {"DELTALLM_VK_DEVICE", "int", "-1",
         "Vulkan device index to use (-1: best discrete, then any)"},
        {"DELTALLM_VK_VARIANT", "string", "auto",
         "Vulkan kernel variant: auto, scalar, nv_coopmat, khr_coopmat or nv_coopmat2"},
        {"DELTALLM_VK_VALIDATION", "bool", "0",
         "enable the Khronos validation layer and fail on its messages"},
        {"DELTALLM_VK_KERNEL_STATS", "bool", "0",
         "log what the driver's compiler reports of each Vulkan kernel (registers ...) as it is "
         "created (info level), where the device offers VK_KHR_pipeline_executable_properties"},
        {"DELTALLM_VK_TRACE", "bool", "0",
         "write each Vulkan command's stages to stderr as it is recorded: a stage's role, then its "
         "kernels with their specialization constants and workgroup counts"},
        {"DELTALLM_VK_BOUNDS_CHECKS", "bool", "0",
         "keep the driver's bounds checks on the Vulkan kernels' storage buffers (by default they "
         "are left out where the device has VK_EXT_pipeline_robustness)"},
        {"DELTALLM_VK_WAIT_SPIN_US", "int", "20000",
         "how long the host polls a submitted Vulkan command's fence before it blocks on it, in "
         "microseconds (0: block at once; polling sees a decoded token's end sooner)"},
        {"DELTALLM_VK_PROFILE", "bool", "0",
         "time each kernel role on the device and print the table when the model closes"},
        {"DELTALLM_VK_DECODE_FUSION", "bool", "1",
         "Vulkan decode: run each RMSNorm as the epilogue of the GEMV before it (0: separate "
         "stages)"},
        {"DELTALLM_VK_GEMV_NORM_IN", "bool", "1",
         "Vulkan decode: where every GEMV that reads a norm's output quantizes x to int8, each "
         "applies the norm itself and the GEMV before it ends without the norm epilogue (0: the "
         "epilogue everywhere)"},
        {"DELTALLM_VK_GEMV_PRE_ROUND", "bool", "1",
         "Vulkan decode: the FFN gate and up GEMVs quantize their output to int8 for the down "
         "projection, which then does not round x itself (0: it does)"},
        {"DELTALLM_VK_GEMV_ROUND_H", "bool", "1",
         "Vulkan decode: the GEMV that writes the residual stream also quantizes it to int8 for "
         "the next norm's readers, where they run on the tiled GEMV (0: each reader does)"},
        {"DELTALLM_VK_MERGE_IN", "bool", "1",
         "Vulkan decode: each run of a mixer's input projections of one type that lie back to "
         "back is one GEMV (0: a GEMV each)"},
        {"DELTALLM_VK_GATED_IN", "bool", "1",
         "Vulkan decode: a DeltaNet layer's output projection applies the layer's gated RMSNorm "
         "as it reads the step's output, where it reads x as int8 (0: the step applies it)"},
        {"DELTALLM_VK_GATED_ROUNDED", "bool", "1",
         "Vulkan decode: with DELTALLM_VK_GATED_IN, the DeltaNet step quantizes its output to int8 "
         "for an output projection on the tiled GEMV (0: the projection rounds the floats)"},
        {"DELTALLM_VK_ATTN_ROUNDED", "bool", "1",
         "Vulkan decode: the attention quantizes its output to int8 for an output projection on "
         "the tiled GEMV (0: the projection rounds the floats)"},
        {"DELTALLM_VK_ATTN_GATED_FORM", "bool", "1",
         "Vulkan decode: a hybrid model's attention layers run their output projection in the "
         "DeltaNet layers' form (one pipeline, its code warm; 0: a form of their own)"},
        {"DELTALLM_VK_ROUTER_TOPK", "bool", "1",
         "Vulkan decode: a mixture-of-experts router's GEMV chooses the experts in its last "
         "workgroup, beside the shared expert's gate and up as one GEMV (0: a route stage)"},
        {"DELTALLM_VK_EXPERTS_SUM_EPILOGUE", "bool", "1",
         "Vulkan decode: a mixture-of-experts layer's weighted sum of experts adds the shared "
         "expert's gated output and leaves the next norm to its readers (0: stages of their own)"},
        {"DELTALLM_VK_GEMV_BALANCE", "bool", "1",
         "Vulkan decode: a GEMV alone in its stage takes fewer rows a workgroup where that evens "
         "out its row blocks over the device (0: the fixed shapes)"},
        {"DELTALLM_VK_EARLY_SUBMIT", "bool", "1",
         "Vulkan prefill windows: a window's command, recorded on first use, queued in parts as "
         "it is recorded (0: whole, after its recording)"},
        {"DELTALLM_VK_MIXED_STEPS", "bool", "1",
         "Vulkan batched steps: a prompt chunk runs in one command with the step's decode tokens "
         "(0: the chunk as a window of its own beside them)"},
        {"DELTALLM_VK_EXPAND_AHEAD", "bool", "1",
         "Vulkan prefill windows: expand the next GEMM's matrix to F16 beside the current GEMM "
         "(0: each expansion between barriers of its own)"},
        {"DELTALLM_VK_GEMM_GROUPS", "bool", "1",
         "Vulkan prefill windows: the GEMMs of one stage (a mixer's projections, the FFN's gate "
         "and up) run together over matrices expanded together (0: a barrier between each)"},
        {"DELTALLM_VK_F16_BY_WRITER", "bool", "1",
         "Vulkan prefill windows and batched steps: a norm or SwiGLU writes the F16 copy of its "
         "rows the next GEMM tiles read (0: an F16 copy stage of its own)"},
        {"DELTALLM_VK_GEMV_X", "string", "auto",
         "how the Vulkan decode GEMVs over block formats read x: auto (per format, what measured "
         "fastest), global (F32) or bytes (quantized to int8, integer dot products)"},
        {"DELTALLM_VK_GEMV_GROUPS", "int", "4",
         "row groups a workgroup of the Vulkan decode GEMVs over x as int8 takes (1, 2, 4, 8)"},
        {"DELTALLM_VK_GEMV_WAVES", "int", "2",
         "workgroups a multiprocessor for the Vulkan decode GEMVs over x as int8, each taking "
         "several row blocks, where the device reports its multiprocessors (0: a workgroup a "
         "row block)"},
        {"DELTALLM_VK_GEMV_SPLIT", "int", "0",
         "Vulkan decode: workgroups a tile of the tiled GEMVs that add to the residual stream "
         "split its rows' runs over (0: by the device's multiprocessors, up to 4; 1: none)"},
        {"DELTALLM_VK_GEMV_TILED", "string", "on",
         "Vulkan decode GEMVs over Q4_K and Q6_K rows on the tiled GEMV where the device has its "
         "features: on, or off (gemv.comp reads the tiles)"},
        {"DELTALLM_VK_GEMV_WIDE", "string", "auto",
         "which Vulkan decode GEMVs over x as int8 take slices of 64 weights: auto (Q4_K, and "
         "Q6_K over rows of 8192+ values), off or all (every Q4_K and Q6_K one)"},
        {"DELTALLM_VK_GEMM_TILE", "string", "",
         "force the NV cooperative matrix 2 GEMM tile of Vulkan prefill windows, as weight rows x "
         "window rows x columns (e.g. 64x128x64, multiples of 32; empty: chosen by the rows), "
         "optionally x invocations a workgroup (128, 256 or 512; default 256)"},
        {"DELTALLM_VK_GEMM_GEMV_ROWS", "int", "32",
         "Vulkan GEMMs of at most this many rows (a batched step's tokens, a short prefill "
         "window) run as one batched GEMV rather than on the GEMM tiles (0 to 64; 0: never)"},
        {"DELTALLM_VK_GEMM_GEMV_ROWS_FLOAT", "int", "64",
         "Vulkan GEMMs over F32 or F16 matrices (a mixture's router) of at most this many rows run "
         "as one batched GEMV, whatever DELTALLM_VK_GEMM_GEMV_ROWS says (0 to 64; 0: by that "
         "rule)"},
        {"DELTALLM_VK_GEMM_SKINNY", "bool", "1",
         "Vulkan GEMMs over Q4_K and Q6_K of more rows than DELTALLM_VK_GEMM_GEMV_ROWS (8 for a "
         "model whose quantized matrices are all Q4_K or Q6_K) and at most "
         "DELTALLM_VK_GEMM_SKINNY_ROWS run as skinny GEMMs on KHR cooperative matrices (weights "
         "decoded to F16 in shared memory) where the device has them"},
        {"DELTALLM_VK_GEMM_SKINNY_ROWS", "int", "256",
         "the most rows of a Vulkan skinny GEMM (1 to 512)"},
        {"DELTALLM_VK_GEMM_SKINNY_PARTS", "int", "0",
         "parts of K a Vulkan skinny GEMM's tiles split into (0: by the grid, up to 16)"},
        {"DELTALLM_VK_GEMM_SKINNY_FILL", "bool", "1",
         "a Vulkan skinny GEMM of up to 16 rows splits K into parts down to one block each "
         "where four blocks a part would leave most of the device idle"},
        {"DELTALLM_VK_GEMM_SKINNY_PREFETCH", "bool", "1",
         "a Vulkan skinny GEMM requests the next stage's rows of X with its weights, before the "
         "products (1), or reads them between the stage's barriers (0)"},
        {"DELTALLM_VK_GEMM_SKINNY_AHEAD", "int", "2",
         "stages ahead a Vulkan skinny GEMM requests its weights' blocks: 1 or 2"},
        {"DELTALLM_VK_GEMM_SKINNY_HALF", "bool", "0",
         "a Vulkan skinny GEMM decodes Q4_K nibbles to halves by bit operations and F16 FMAs "
         "instead of through F32"},
        {"DELTALLM_VK_GEMM_SKINNY_MT", "int", "0",
         "the most tiles of 16 rows of X a Vulkan skinny GEMM's workgroup takes: 1, 2 or 4 (0: 4)"},
        {"DELTALLM_VK_GEMM_SKINNY_RT", "int", "0",
         "weight-row tiles of 32 a Vulkan skinny GEMM's workgroup takes: 2 or 4 (0: 4 over up to "
         "16 rows of X, else 2)"},
        {"DELTALLM_VK_GEMM_EXPAND_ROWS", "int", "64",
         "on the NV cooperative matrix 2 tiles, Vulkan GEMMs of at least this many rows first "
         "expand their weights to F16 (1 to 2048)"},
        {"DELTALLM_VK_GEMM_SPLIT", "int", "-1",
         "Vulkan GEMM tiles of at most 128 rows whose grid is smaller than the device split their "
         "columns over several workgroups: -1 by the grid (not yet on the NV cooperative matrix 2 "
         "tiles), 0 never, 1 by the grid on every tile, 2 to 16 into that many parts"},
        {"DELTALLM_VK_EXPERT_SKINNY", "bool", "1",
         "a Vulkan prefill window's expert GEMM tiles over Q4_K and Q6_K stacks run as the skinny "
         "GEMM's grouped form (KHR cooperative matrices, the weights two stages ahead)"},
        {"DELTALLM_VK_MOE_ROUTE", "string", "rank",
         "a Vulkan router's top-k: rank (each expert ranked in its group of 32, then the groups' "
         "best against each other), merge (each subgroup chooses its own, one subgroup merges "
         "them) or rounds (k rounds of an argmax over the workgroup)"},
        {"DELTALLM_VK_EXPERT_EXPAND", "bool", "0",
         "a Vulkan prefill window's expert GEMM tiles read each layer's expert matrices expanded "
         "to F16 first (a scratch of the largest layer's gate and up stacks) rather than decoding "
         "their blocks tile by tile"},
        {"DELTALLM_VK_GEMV_BATCH_ONCE", "bool", "0",
         "the Vulkan batched GEMV decodes each weight slice once for a group of up to 8 vectors "
         "(1) rather than again for each vector (0)"},
        {"DELTALLM_VK_GEMV_BATCH_ROWS", "int", "0",
         "weight rows a workgroup of the Vulkan batched GEMV (1, 2, 4 or 8; 0: 8 for groups of up "
         "to 4 vectors or over bytes more than 8 vectors not of experts, else 4)"},
        {"DELTALLM_VK_GEMV_BATCH_THREADS", "int", "0",
         "threads a workgroup of the Vulkan batched GEMV (32, 64, 128 or 256; 0: over bytes, or "
         "for a weighted sum of several rows' experts, a subgroup's worth; else one a 32-value "
         "slice of the row, 64 to 128, or a (slot, slice) pair of a weighted sum, up to 256)"},
        {"DELTALLM_VK_EXPERT_SORT", "int", "1",
         "a Vulkan window's (and batched step's) expert GEMVs group its tokens' choices by expert "
         "where they are at least this many per expert on average; fewer (a batched step's decode "
         "tokens) run in the tokens' order, the down projection summing each token's experts into "
         "its row (0 to 4096; 0: always grouped)"},
        {"DELTALLM_VK_EXPERT_TILES", "int", "8",
         "a Vulkan prefill window's expert GEMMs run as grouped GEMM tiles where its tokens "
         "choose at least this many per expert on average, else as grouped batched GEMVs (0 to "
         "4096; 0: never)"},
        {"DELTALLM_VK_EXPERT_CM2", "int", "96",
         "on NV cooperative matrix 2, a Vulkan prefill window's expert GEMMs over Q4_K and Q6_K "
         "stacks run as tiles over their inputs gathered in the experts' order where its tokens "
         "choose at least this many per expert on average (0 to 4096; 0: never)"},
        {"DELTALLM_VK_EXPERT_CM2_BLOCKS", "bool", "0",
         "the sorted expert tiles (DELTALLM_VK_EXPERT_CM2) decode the stacks' K-quant blocks in "
         "their loads instead of reading the stacks expanded to F16 for the window"},
        {"DELTALLM_VK_ATTN_ONE_SPLIT", "int", "2",
         "contexts of up to this many chunks of 64 cache rows are walked by one workgroup a head "
         "group of the Vulkan decode attention, with no merge (0 to 64; longer contexts are "
         "split)"},
        {"DELTALLM_VK_EXPERT_DOWN_ROUNDED", "int", "0",
         "a Vulkan batched step of at least this many tokens whose experts run in the tokens' "
         "order rounds their SwiGLU outputs to bytes once for the down projection, which then "
         "reads them in integer dot products (0: never; the down projection forms the SwiGLU as "
         "it reads)"},
        {"DELTALLM_VK_DEQUANT_K_WIDE", "bool", "0",
         "a window's F16 expansions of Q4_K and Q6_K rows decode 64 values a thread (slower on an "
         "H100: its stores are 128 bytes a thread apart)"},
        {"DELTALLM_VK_ATTN_CM2_UNCLAMPED", "bool", "1",
         "the NV tensor-core window attention loads the key tiles that lie wholly within the "
         "written keys without clamping and leaves out the causal mask of tiles every row sees "
         "whole (0: every tile clamped and masked)"},
        {"DELTALLM_VK_ATTN_WINDOW_PARTS", "int", "-1",
         "parts the keys of a Vulkan prefill window's attention are split into (-1: where the "
         "window's workgroups would leave the device idle; 0 or 1: never; 2 to 16: that many)"},
        {"DELTALLM_VK_ATTN_SHORT", "int", "-1",
         "positions below which the Vulkan decode token command runs its attention with one query "
         "head a workgroup (-1: while the extra cache reads stay under 4 MiB a layer; 0: never)"},
        {"DELTALLM_VK_DN_COLUMNS", "int", "32",
         "value columns a workgroup of the Vulkan DeltaNet decode step takes (0: a whole head)"},
        {"DELTALLM_VK_DN_SCAN", "string", "best",
         "scan of the Vulkan prefill DeltaNet layers: best, chunked, shuffle, clustered or plain"},
        {"DELTALLM_VK_WINDOW", "int", "2048",
         "rows of a Vulkan prefill window (one command buffer each; 0: prefill token by token)"},
        {"DELTALLM_VK_SPEED", "bool", "0",
         "run the Vulkan GEMV bandwidth report (test GemvSpeed.Report) instead of skipping it"},
        {"DELTALLM_VK_TEST_ROBUST", "bool", "1",
         "the Vulkan tests open their devices with robustBufferAccess (0: as the engine opens "
         "them, without the driver's bounds checks where the device allows)"},
        {"DELTALLM_PIPELINE_CACHE", "string", "~/.cache/deltallm",
         "folder for the Vulkan pipeline cache ('' disables it)"},
    };
    return vars;
}

static const Var& find(const char* name) {
    for (const Var& v : all())
        if (std::strcmp(v.name, name) == 0) return v;
    DL_ASSERT(!"environment variable not declared in core/env.cpp");
    __builtin_unreachable();
}

std::string get_string(const char* name) {
    const Var& v = find(name);
    const char* s = std::getenv(name);
    return s ? std::string(s) : std::string(v.default_value);
}

int64_t get_int(const char* name) {
    std::string s = get_string(name);
    char* end = nullptr;
    long long x = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0') fail("environment variable {}='{}' is not an integer", name, s);
    return x;
}

bool get_bool(const char* name) {
    std::string s = get_string(name);
    if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
    if (s == "0" || s == "false" || s == "no" || s == "off" || s.empty()) return false;
    fail("environment variable {}='{}' is not a boolean (use 0 or 1)", name, s);
}

std::string describe() {
    std::string out = "Environment variables:\n";
    for (const Var& v : all())
        out += fmt::format("  {:<24} {:<7} default '{}'\n      {}\n", v.name, v.type,
                           v.default_value, v.meaning);
    return out;
}

}  // namespace dl::env
