// `deltallm bench`: prompt-processing and generation speed measured the way llama-bench measures
// it (pp N: one N-token prompt into a fresh session; tg N: N single-token decodes after a
// one-token prompt in a fresh session; random token ids from a fixed seed; uncounted warm-up runs
// (see warm_up); mean and standard deviation over repetitions), next to the floors the hardware
// sets: weight bytes per token over memory bandwidth for tg, 2 * params * tokens over peak FLOP
// rate for pp. A depth D (-d, llama-bench's n_depth) first fills the session with D random tokens,
// not timed, so the test runs at long context; its rows are named "tg128 @ d4096". -b adds rows
// of B sequences at once (bench_batched.h).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <unordered_set>

#include "core/error.h"
#include "core/threads.h"
#include "quant/quant.h"
#include "tools/bench_batched.h"
#include "tools/common.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
    std::string model, device = "cpu", output = "md", prompts = "512", gens = "128", depths = "0";
    std::string batches;  // -b: batched rows for these sequence counts
    int reps = 5;
    uint32_t seed = 1234;
    double bw_gbps = 0, peak_gflops = 0;
};

struct Test {
    std::string name;
    int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
    std::vector<double> tps;  // one per repetition
};

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Uncounted runs of a test before its timed ones: one, and on a GPU more until half a second has
// passed since the first ended (at most 20). One was not enough on a GPU: on an H200, in a process
// whose first run compiled its pipelines (seconds of an idle device), the first timed pp512 ran at
// 0.3-0.6x the rate of the others (docs/perf/history.md 2026-12-01, late night).
template <class Run>
void warm_up(Run run, bool gpu) {
    run();
    const auto t0 = Clock::now();
    for (int i = 0; gpu && i < 20 && seconds_since(t0) < 0.5; ++i) run();
}

// Sums 32-byte vectors [b, e) with four independent accumulators, so the loads, not the adds,
// set the pace.
__attribute__((target("avx2"))) int64_t sum_vectors(const uint8_t* base, int64_t b, int64_t e) {
    const __m256i* p = reinterpret_cast<const __m256i*>(base);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = b;
    for (; i + 4 <= e; i += 4) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256(p + i));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256(p + i + 1));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256(p + i + 2));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256(p + i + 3));
    }
    for (; i < e; ++i) a0 = _mm256_add_epi64(a0, _mm256_load_si256(p + i));
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    return _mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 3);
}

// Ten independent 8-lane FMA chains, enough to cover the FMA latency on current cores.
__attribute__((target("avx2,fma"))) float fma_chains(int64_t iters, int seed) {
    __m256 a[10];
    for (int k = 0; k < 10; ++k) a[k] = _mm256_set1_ps(0.001f * float(k + seed));
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i)
        for (int k = 0; k < 10; ++k) a[k] = _mm256_fmadd_ps(a[k], m, c);
    __m256 s = a[0];
    for (int k = 1; k < 10; ++k) s = _mm256_add_ps(s, a[k]);
    return _mm256_cvtss_f32(s);
}

// Streaming read of a buffer much larger than the caches, spread over the thread pool: the rate
// decode can read weights at. Best of a few passes, so a momentary neighbour does not count.
double measure_read_gbps(ThreadPool& pool) {
    const size_t bytes = size_t(256) << 20;
    std::unique_ptr<uint8_t, decltype(&std::free)> buf(
        static_cast<uint8_t*>(std::aligned_alloc(64, bytes)), &std::free);
    if (!buf) fail("out of memory for the bandwidth probe");
    std::memset(buf.get(), 1, bytes);
    const int64_t n = int64_t(bytes / 32);
    std::vector<int64_t> sinks(pool.size(), 0);
    double best = 0;
    for (int pass = 0; pass < 4; ++pass) {
        auto t0 = Clock::now();
        pool.for_range(
            n, [&](int64_t b, int64_t e, int t) { sinks[t] += sum_vectors(buf.get(), b, e); },
            1 << 14);
        best = std::max(best, double(bytes) / seconds_since(t0) / 1e9);
    }
    volatile int64_t keep = 0;
    for (int64_t s : sinks) keep = keep + s;
    return best;
}

// Peak f32 FMA rate of the pool's threads. Prefill's quantized dot products run on integer
// multiply-adds, so this is the yardstick, not a hard bound for them.
double measure_fma_gflops(ThreadPool& pool) {
    const int64_t iters = 4'000'000;
    std::vector<float> sinks(pool.size(), 0.f);
    double best = 0;
    for (int pass = 0; pass < 3; ++pass) {
        auto t0 = Clock::now();
        pool.run(pool.size(), [&](int64_t, int t) { sinks[t] += fma_chains(iters, t); });
        double flops = double(iters) * 10 * 8 * 2 * pool.size();
        best = std::max(best, flops / seconds_since(t0) / 1e9);
    }
    volatile float keep = 0;
    for (float s : sinks) keep = keep + s;
    return best;
}

// Independent chains of the integer multiply-adds the quantized dot products are made of
// (maddubs: 32 u8 x s8 products summed in pairs, then madd and add into 32-bit lanes; with
// AVX-512 VNNI, the kernels' pair sums go into the lanes by one vpdpwssd instead, whose latency
// needs twelve chains, and the 32 vector registers hold them). The empty asm makes each chain's
// bytes opaque to the compiler, so the products are formed every step rather than hoisted out of
// the loop (which left only the adds to time).
#define DL_INT8_CHAINS(n, reg, add_pairs)                                \
    __m256i acc[n], xs[n];                                               \
    const __m256i y = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1); \
    for (int k = 0; k < n; ++k) {                                        \
        xs[k] = _mm256_set1_epi8((char)(3 + seed + k));                  \
        acc[k] = _mm256_set1_epi32(k);                                   \
    }                                                                    \
    for (int64_t i = 0; i < iters; ++i)                                  \
        for (int k = 0; k < n; ++k) {                                    \
            asm volatile("" : reg(xs[k]));                               \
            acc[k] = add_pairs(acc[k], _mm256_maddubs_epi16(xs[k], y));  \
        }                                                                \
    __m256i s = acc[0];                                                  \
    for (int k = 1; k < n; ++k) s = _mm256_add_epi32(s, acc[k]);         \
    return _mm256_extract_epi32(s, 0);
#define DL_ADD_PAIRS_AVX2(a, p) _mm256_add_epi32(a, _mm256_madd_epi16(p, ones))
#define DL_ADD_PAIRS_VNNI(a, p) _mm256_dpwssd_epi32(a, p, ones)
constexpr int kAvx2Chains = 8, kVnniChains = 12;
__attribute__((target("avx2"))) int32_t int8_chains_avx2(int64_t iters, int seed) {
    DL_INT8_CHAINS(kAvx2Chains, "+x", DL_ADD_PAIRS_AVX2)
}
__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) int32_t int8_chains_vnni(int64_t iters,
                                                                                     int seed) {
    DL_INT8_CHAINS(kVnniChains, "+v", DL_ADD_PAIRS_VNNI)
}
#undef DL_INT8_CHAINS
#undef DL_ADD_PAIRS_AVX2
#undef DL_ADD_PAIRS_VNNI

// Peak rate of those int8 multiply-adds over the pool, in billions of operations a second (a
// multiply-add counts two, as a FLOP of an FMA does), the yardstick of quantized prefill: in the
// instructions of the backend the dot products run on.
double measure_int8_gops(ThreadPool& pool) {
    const int64_t iters = 4'000'000;
    const bool vnni = std::strcmp(quant::cpu_backend(), "avx512-vnni") == 0;
    std::vector<int32_t> sinks(pool.size(), 0);
    double best = 0;
    for (int pass = 0; pass < 3; ++pass) {
        auto t0 = Clock::now();
        pool.run(pool.size(), [&](int64_t, int t) {
            sinks[t] += vnni ? int8_chains_vnni(iters, t) : int8_chains_avx2(iters, t);
        });
        const int chains = vnni ? kVnniChains : kAvx2Chains;
        double ops = double(iters) * chains * 32 * 2 * pool.size();
        best = std::max(best, ops / seconds_since(t0) / 1e9);
    }
    volatile int32_t keep = 0;
    for (int32_t s : sinks) keep = keep + s;
    return best;
}

struct ModelFacts {
    uint64_t file_tensor_bytes = 0;  // every tensor of the file (llama-bench's "size")
    uint64_t n_params = 0;           // every element of the file (llama-bench's "params")
    uint64_t tg_bytes = 0;           // weight bytes one decoded token reads
    uint64_t matmul_params = 0;      // weights multiplied per token (embedding lookup excluded)
    uint64_t int8_params = 0;        // of those, the ones whose dot products run on int8
    uint64_t head_params = 0;        // of those, the output head's (a prompt multiplies it once,
                                     // for its last row's logits, as llama-bench's pp does)
    bool head_int8 = false;
};

ModelFacts model_facts(const Model& m) {
    ModelFacts f;
    std::unordered_set<const uint8_t*> seen;
    for (const Tensor& t : m.tensors()) {
        if (!seen.insert(t.data).second) continue;
        f.file_tensor_bytes += t.nbytes;
        f.n_params += (uint64_t)t.n_elements();
    }
    // The token embedding is read one row per token unless it doubles as the output head.
    f.tg_bytes = m.weight_bytes();
    if (m.tok_embd && m.output != m.tok_embd)
        f.tg_bytes -= m.tok_embd->nbytes - m.tok_embd->row_bytes();
    // A token multiplies its k chosen experts of each stack, not all of them: a fraction of the
    // stack's parameters (and of its bytes, which the read floor must not count).
    const Hparams& hp = m.hp;
    const double used = hp.n_expert > 0 ? double(hp.n_expert_used) / double(hp.n_expert) : 1.0;
    auto add = [&](const Tensor* t, double part = 1.0) {
        if (!t) return;
        const auto n = (uint64_t)(double(t->n_elements()) * part);
        f.matmul_params += n;
        if (quant::vec_dot_type(t->type) != QType::F32) f.int8_params += n;
    };
    for (const Layer& l : m.layers) {
        for (const Tensor* t : {l.ffn_gate, l.ffn_up, l.ffn_down, l.wq, l.wk, l.wv, l.wo, l.ssm_qkv,
                                l.ssm_z, l.ssm_beta, l.ssm_alpha, l.ssm_out, l.ffn_gate_inp,
                                l.ffn_gate_shexp, l.ffn_up_shexp, l.ffn_down_shexp})
            add(t);
        for (const Tensor* t :
             {l.ffn_gate_exps, l.ffn_up_exps, l.ffn_gate_up_exps, l.ffn_down_exps}) {
            add(t, used);
            if (t) f.tg_bytes -= (uint64_t)(double(t->nbytes) * (1.0 - used));
        }
    }
    add(m.output);
    if (m.output) {
        f.head_params = (uint64_t)m.output->n_elements();
        f.head_int8 = quant::vec_dot_type(m.output->type) != QType::F32;
    }
    return f;
}

void mean_sd(const std::vector<double>& v, double& mean, double& sd) {
    mean = 0;
    for (double x : v) mean += x;
    mean /= double(v.size());
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    sd = v.size() > 1 ? std::sqrt(ss / double(v.size() - 1)) : 0.0;
}

int bench(const BenchArgs& a) {
    if (a.model.empty()) fail("no model: give a GGUF file with -m FILE");
    if (a.reps < 1) fail("-r must be at least 1, not {}", a.reps);
    if (a.output != "md" && a.output != "json" && a.output != "csv")
        fail("-o must be md, json or csv, not {}", a.output);
    if (a.bw_gbps < 0) fail("--bw-gbps must be positive, not {}", a.bw_gbps);
    if (a.peak_gflops < 0) fail("--peak-gflops must be positive, not {}", a.peak_gflops);
    std::vector<Test> base;
    for (int64_t n : parse_int_list(a.prompts, "-p")) {
        if (n < 0) fail("-p: prompt lengths must be positive, not {}", n);
        if (n > 0) base.push_back({fmt::format("pp{}", n), n, 0, 0, {}});
    }
    for (int64_t n : parse_int_list(a.gens, "-n")) {
        if (n < 0) fail("-n: generation lengths must be positive, not {}", n);
        if (n > 0) base.push_back({fmt::format("tg{}", n), 0, n, 0, {}});
    }
    if (base.empty()) fail("nothing to measure: give -p or -n lengths above 0");
    const std::vector<int64_t> depths = parse_int_list(a.depths, "-d");
    for (int64_t d : depths)
        if (d < 0) fail("-d: depths must be 0 or more, not {}", d);
    // The depth columns appear only when a depth is asked for, so -d 0 prints what it always has.
    const bool show_depth =
        std::any_of(depths.begin(), depths.end(), [](int64_t d) { return d > 0; });
    std::vector<Test> tests;
    for (int64_t d : depths) {
        for (Test t : base) {
            t.n_depth = d;
            if (d > 0) t.name += fmt::format(" @ d{}", d);
            tests.push_back(std::move(t));
        }
    }

    std::vector<BatchedTest> batched;
    if (!a.batches.empty()) {
        for (int64_t b : parse_int_list(a.batches, "-b")) {
            if (b < 1 || b > 4096) fail("-b: sequence counts must be 1 to 4096, not {}", b);
            for (int64_t p : parse_int_list(a.prompts, "-p"))
                for (int64_t n : parse_int_list(a.gens, "-n"))
                    if (p > 0 || n > 0) batched.push_back({b, p, n, {}, {}});
        }
    }

    int64_t n_ctx = 16;
    for (const Test& t : tests) {
        // Each length is checked before the sum, so the sum cannot overflow.
        if (t.n_depth > kMaxContext || t.n_prompt > kMaxContext || t.n_gen > kMaxContext ||
            t.n_depth + t.n_prompt + t.n_gen + 1 > kMaxContext)
            fail("test {} needs a context of more than {} tokens, the most deltallm supports",
                 t.name, kMaxContext);
        n_ctx = std::max(n_ctx, t.n_depth + t.n_prompt + t.n_gen + 1);
    }
    for (BatchedTest& t : batched) {
        if (t.n_prompt > kMaxContext || t.n_gen > kMaxContext)
            fail("test {} needs more context than deltallm supports", t.name());
        n_ctx = std::max(n_ctx, t.n_prompt + t.n_gen + 2);
    }
    EngineOptions o;
    o.device = DeviceSpec::parse(a.device);
    o.n_ctx = n_ctx;
    // The widest batched row's sequences hold their whole contexts at once (a device's KV
    // cache is sized for them), plus the single-sequence rows' session.
    for (const BatchedTest& t : batched) o.sequences = std::max(o.sequences, t.n_seq + 1);
    auto engine = Engine::open(a.model, o);
    if (!engine->fallback_reason().empty())
        std::fprintf(stderr, "deltallm bench: %s\n", engine->fallback_reason().c_str());
    const Model& model = engine->model();
    Executor& ex = engine->executor();
    const ModelFacts facts = model_facts(model);
    const int64_t n_vocab = model.hp.n_vocab;
    const bool on_cpu = ex.name() == "cpu";
    ThreadPool& pool = ThreadPool::global();

    // Floors: what is given wins; the CPU's are measured, and a device's read rate where its
    // executor can measure it (the peak FLOP rate of a device is unknown unless given).
    double bw = a.bw_gbps, peak = a.peak_gflops;
    std::string bw_src = bw > 0 ? "given" : "", peak_src = peak > 0 ? "given" : "";
    if (bw <= 0 && on_cpu && __builtin_cpu_supports("avx2")) {
        bw = measure_read_gbps(pool);
        bw_src = "measured (streaming read, 256 MiB)";
    }
    if (bw <= 0 && !on_cpu) {
        // A device the model nearly fills may have no room for the probe's few megabytes: the
        // floor is then unknown, and the tests still run.
        try {
            const Executor::ReadRate r = ex.measure_read_rate();
            if (r.gbps > 0) {
                bw = r.gbps;
                bw_src = r.what;
            }
        } catch (const Error& e) {
            std::fprintf(stderr, "deltallm bench: no read rate measured: %s\n", e.what());
        }
    }
    // On the CPU the quantized matrices multiply on int8 and the float ones on f32 FMA: the pp
    // floor counts each at its own rate.
    double int8_peak = 0;
    if (peak <= 0 && on_cpu && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        peak = measure_fma_gflops(pool);
        peak_src = "measured (f32 FMA)";
        if (facts.int8_params > 0) {
            int8_peak = measure_int8_gops(pool);
            peak_src += fmt::format(
                ", and {:.1f} Gop/s of int8 multiply-adds for the {:.0f}% "
                "of weights stored quantized",
                int8_peak, 100.0 * double(facts.int8_params) / double(facts.matmul_params));
        }
    }

    std::mt19937 rng(a.seed);
    std::uniform_int_distribution<int32_t> pick(0, (int32_t)n_vocab - 1);
    std::vector<float> logits;
    auto run_once = [&](const Test& t) -> double {
        std::unique_ptr<SessionState> session;
        try {
            session = ex.new_session(n_ctx);
        } catch (const Error& e) {
            // The executor's advice names run's -c; bench has none, its context follows the test
            // lengths.
            std::string m = e.what();
            const std::string c = "a smaller context (-c)";
            if (size_t at = m.find(c); at != std::string::npos)
                m.replace(at, c.size(), "shorter tests (-p, -n, -d)");
            throw Error(m);
        }
        if (t.n_depth > 0) {  // the context the test starts from; not timed
            std::vector<int32_t> tokens(t.n_depth);
            for (auto& x : tokens) x = pick(rng);
            ex.prefill(*session, tokens, LogitsRows::last, logits);
        }
        if (t.n_prompt > 0) {
            std::vector<int32_t> tokens(t.n_prompt);
            for (auto& x : tokens) x = pick(rng);
            auto t0 = Clock::now();
            ex.prefill(*session, tokens, LogitsRows::last, logits);
            return double(t.n_prompt) / seconds_since(t0);
        }
        const int32_t first = pick(rng);
        ex.prefill(*session, std::span<const int32_t>(&first, 1), LogitsRows::last, logits);
        std::vector<int32_t> tokens(t.n_gen);
        for (auto& x : tokens) x = pick(rng);
        auto t0 = Clock::now();
        // Each token's logits ready in host memory where the executor left them (not copied).
        for (int32_t x : tokens) ex.decode(*session, x);
        return double(t.n_gen) / seconds_since(t0);
    };
    for (Test& t : tests) {
        // Page faults, first-touch allocations, pipeline creation, a device brought up to speed.
        warm_up([&] { run_once(t); }, !on_cpu);
        for (int r = 0; r < a.reps; ++r) t.tps.push_back(run_once(t));
    }
    for (BatchedTest& t : batched) {
        BatchedTest warm = t;
        run_batched(ex, warm, rng);
        for (int r = 0; r < a.reps; ++r) run_batched(ex, t, rng);
    }
    // Mean and deviation of a list that may be empty (a batched row without a prompt or without
    // generation).
    auto stats = [](const std::vector<double>& v) -> std::pair<double, double> {
        if (v.empty()) return {0, 0};
        double m, sd;
        mean_sd(v, m, sd);
        return {m, sd};
    };

    const std::string model_name = std::filesystem::path(a.model).filename().string();
    const double size_gib = double(facts.file_tensor_bytes) / double(1ull << 30);
    const double params_b = double(facts.n_params) / 1e9;
    // Tokens/s when every multiply-add runs at the peak rate of its arithmetic, the output head's
    // counted for `head_rows` of every token (a prompt's last row only: 1 / its length).
    auto compute_ceiling = [&](double head_rows) -> double {
        if (peak <= 0) return 0;
        const double head = double(facts.head_params) * (1.0 - head_rows);
        double int8 = int8_peak > 0 ? double(facts.int8_params) : 0;
        double f32 = double(facts.matmul_params) - int8;
        (int8_peak > 0 && facts.head_int8 ? int8 : f32) -= head;
        const double s = 2.0 * f32 / (peak * 1e9) + (int8 > 0 ? 2.0 * int8 / (int8_peak * 1e9) : 0);
        return s > 0 ? 1.0 / s : 0;
    };
    auto ceiling = [&](const Test& t) -> double {
        if (t.n_prompt > 0) return compute_ceiling(1.0 / double(t.n_prompt));
        return bw > 0 ? bw * 1e9 / double(facts.tg_bytes) : 0;
    };
    // B sequences read the weights once per step: B times the single stream's bandwidth floor,
    // until the step's arithmetic is the bound.
    auto batched_ceiling = [&](const BatchedTest& t) -> double {
        const double mem = bw > 0 ? double(t.n_seq) * bw * 1e9 / double(facts.tg_bytes) : 0;
        const double cmp = compute_ceiling(1.0);
        if (mem > 0 && cmp > 0) return std::min(mem, cmp);
        return mem > 0 ? mem : cmp;
    };

    if (a.output == "json") {
        nlohmann::json j;
        j["engine"] = "deltallm";
        j["model"] = model_name;
        j["model_path"] = a.model;
        j["size_bytes"] = facts.file_tensor_bytes;
        j["n_params"] = facts.n_params;
        j["tg_bytes_per_token"] = facts.tg_bytes;
        j["matmul_params"] = facts.matmul_params;
        j["head_params"] = facts.head_params;
        j["device"] = ex.name();
        j["threads"] = on_cpu ? pool.size() : 0;
        j["reps"] = a.reps;
        j["seed"] = a.seed;
        j["bandwidth_gbps"] = bw;
        j["bandwidth_source"] = bw_src;
        j["peak_gflops"] = peak;
        j["peak_source"] = peak_src;
        j["rows"] = nlohmann::json::array();
        for (const Test& t : tests) {
            double m, sd;
            mean_sd(t.tps, m, sd);
            double c = ceiling(t);
            j["rows"].push_back({{"test", t.name},
                                 {"n_prompt", t.n_prompt},
                                 {"n_gen", t.n_gen},
                                 {"samples_ts", t.tps},
                                 {"avg_ts", m},
                                 {"stddev_ts", sd},
                                 {"ceiling_ts", c},
                                 {"floor_kind", t.n_prompt > 0 ? "flops" : "bandwidth"}});
            if (show_depth) j["rows"].back()["n_depth"] = t.n_depth;
        }
        j["batched_rows"] = nlohmann::json::array();
        for (const BatchedTest& t : batched) {
            const auto [pp, pp_sd] = stats(t.pp_tps);
            const auto [tg, tg_sd] = stats(t.tg_tps);
            j["batched_rows"].push_back({{"test", t.name()},
                                         {"n_seq", t.n_seq},
                                         {"n_prompt", t.n_prompt},
                                         {"n_gen", t.n_gen},
                                         {"pp_samples_ts", t.pp_tps},
                                         {"tg_samples_ts", t.tg_tps},
                                         {"pp_avg_ts", pp},
                                         {"pp_stddev_ts", pp_sd},
                                         {"tg_avg_ts", tg},
                                         {"tg_stddev_ts", tg_sd},
                                         {"tg_ceiling_ts", batched_ceiling(t)}});
        }
        std::printf("%s\n", j.dump(2).c_str());
        return 0;
    }
    if (a.output == "csv") {
        std::printf(
            "engine,model,size_gib,params_b,device,threads,test,n_prompt,n_gen,%savg_ts,"
            "stddev_ts,ceiling_ts\n",
            show_depth ? "n_depth," : "");
        for (const Test& t : tests) {
            double m, sd;
            mean_sd(t.tps, m, sd);
            const std::string depth = show_depth ? fmt::format("{},", t.n_depth) : "";
            std::printf("deltallm,%s,%.4f,%.4f,%s,%d,%s,%lld,%lld,%s%.3f,%.3f,%.3f\n",
                        model_name.c_str(), size_gib, params_b, ex.name().c_str(),
                        on_cpu ? pool.size() : 0, t.name.c_str(), (long long)t.n_prompt,
                        (long long)t.n_gen, depth.c_str(), m, sd, ceiling(t));
        }
        if (!batched.empty())
            std::printf(
                "\nengine,model,device,test,n_seq,n_prompt,n_gen,pp_avg_ts,tg_avg_ts,"
                "tg_ceiling_ts\n");
        for (const BatchedTest& t : batched)
            std::printf("deltallm,%s,%s,%s,%lld,%lld,%lld,%.3f,%.3f,%.3f\n", model_name.c_str(),
                        ex.name().c_str(), t.name().c_str(), (long long)t.n_seq,
                        (long long)t.n_prompt, (long long)t.n_gen, stats(t.pp_tps).first,
                        stats(t.tg_tps).first, batched_ceiling(t));
        return 0;
    }
    std::printf(
        "| model | size | params | device | threads | test | t/s | ceiling t/s | of ceiling |\n");
    std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (const Test& t : tests) {
        double m, sd;
        mean_sd(t.tps, m, sd);
        double c = ceiling(t);
        std::string cs = c > 0 ? fmt::format("{:.2f}", c) : "-";
        std::string pct = c > 0 ? fmt::format("{:.1f}%", 100.0 * m / c) : "-";
        std::printf("| %s | %.2f GiB | %.2f B | %s | %d | %s | %.2f ± %.2f | %s | %s |\n",
                    model_name.c_str(), size_gib, params_b, ex.name().c_str(),
                    on_cpu ? pool.size() : 0, t.name.c_str(), m, sd, cs.c_str(), pct.c_str());
    }
    if (!batched.empty()) {
        std::printf(
            "\n| model | device | test | prompt t/s | generation t/s | per sequence t/s | "
            "ceiling t/s | of ceiling |\n");
        std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    }
    for (const BatchedTest& t : batched) {
        const auto [pp, pp_sd] = stats(t.pp_tps);
        const auto [tg, tg_sd] = stats(t.tg_tps);
        const double c = batched_ceiling(t);
        const std::string pps = t.n_prompt > 0 ? fmt::format("{:.2f} ± {:.2f}", pp, pp_sd) : "-";
        const std::string tgs = t.n_gen > 0 ? fmt::format("{:.2f} ± {:.2f}", tg, tg_sd) : "-";
        const std::string per = t.n_gen > 0 ? fmt::format("{:.2f}", tg / double(t.n_seq)) : "-";
        const std::string cs = c > 0 && t.n_gen > 0 ? fmt::format("{:.2f}", c) : "-";
        const std::string pct = c > 0 && t.n_gen > 0 ? fmt::format("{:.1f}%", 100.0 * tg / c) : "-";
        std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", model_name.c_str(),
                    ex.name().c_str(), t.name().c_str(), pps.c_str(), tgs.c_str(), per.c_str(),
                    cs.c_str(), pct.c_str());
    }
    std::printf(
        "\nfloors: tg reads %s of weights per token; bandwidth %s; pp multiplies %.3f B "
        "weights per token (2 FLOP each), the output head's %.3f B once a prompt; peak %s%s\n",
        human_bytes(facts.tg_bytes).c_str(),
        bw > 0 ? fmt::format("{:.1f} GB/s, {}", bw, bw_src).c_str() : "unknown (--bw-gbps)",
        double(facts.matmul_params - facts.head_params) / 1e9, double(facts.head_params) / 1e9,
        peak > 0 ? fmt::format("{:.1f} GFLOP/s, {}", peak, peak_src).c_str()
                 : "unknown (--peak-gflops)",
        show_depth ? "; neither floor counts the attention over the depth" : "");
    return 0;
}

Registrar reg(
    "bench", "measure prompt and generation tokens/s (llama-bench style)",
    [](CLI::App& app) -> Run {
        auto a = std::make_shared<BenchArgs>();
        app.add_option("-m,--model", a->model, "GGUF model file")->required();
        app.add_option("-p,--n-prompt", a->prompts, "prompt lengths: 512,2048 (0: none)")
            ->capture_default_str();
        app.add_option("-n,--n-gen", a->gens, "generation lengths: 128 (0: none)")
            ->capture_default_str();
        app.add_option("-b,--batch", a->batches,
                       "batched rows: 1,8,32 sequences, each a -p prompt then -n tokens "
                       "(llama-batched-bench's semantics)");
        app.add_option("-d,--n-depth", a->depths,
                       "context depths: 0,4096 (D tokens prefilled, not timed, before each test)")
            ->capture_default_str();
        app.add_option("-r,--repetitions", a->reps, "timed repetitions per test")
            ->capture_default_str();
        app.add_option("--device", a->device, "cpu, vulkan or vulkan:N")->capture_default_str();
        add_profile_flag(app);
        app.add_option("-o,--output", a->output, "md, json or csv")->capture_default_str();
        app.add_option("--seed", a->seed, "seed of the random token ids")->capture_default_str();
        app.add_option("--bw-gbps", a->bw_gbps,
                       "memory bandwidth in GB/s for the tg floor (measured when not given: "
                       "CPU streaming read; Vulkan, a read of every weight)");
        app.add_option("--peak-gflops", a->peak_gflops,
                       "peak GFLOP/s for the pp floor (CPU: measured f32 FMA rate)");
        return [a] { return bench(*a); };
    });

}  // namespace

}  // namespace dl::tools
