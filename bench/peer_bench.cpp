// The llama.cpp side of the benchmarks: the same pp/tg tests as `deltallm bench`, run through
// llama.h against prebuilt llama.cpp libraries (CPU or Vulkan build, chosen by LD_LIBRARY_PATH).
// pp N: one N-token prompt into a cleared context; tg N: N single-token decodes after a one-token
// prompt in a cleared context; random ids from a fixed seed; uncounted warm-up runs as
// `deltallm bench` does them (warm_up); mean and standard deviation over repetitions. Prints the
// same table, JSON or CSV as `deltallm bench`. A depth D (-d) first decodes D random tokens into
// the cleared context in batches of n_batch, not timed; the test then continues at position D, in
// rows named "tg128 @ d4096".
// -b 1,8,32 adds rows with `deltallm bench -b`'s semantics (llama-batched-bench's): for each B and
// each -p and -n length, B fresh sequences in one context (one sequence id each), all B prompts in
// one llama_batch, then n llama_batches of B tokens, one of every sequence, each with its logits,
// as llama-server decodes its slots; aggregate tokens/s, rows named "B8 pp512+tg128".
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llama.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
    std::string model, output = "md", device = "cpu";
    std::vector<long> prompts{512}, gens{128}, depths{0}, batches;
    int reps = 5, threads = 0, n_gpu_layers = 999;
    int ubatch = 512;         // -ub: llama.cpp's physical batch (llama-batched-bench's default)
    bool kv_unified = false;  // -kvu: one KV buffer across the sequences of a batched row
    unsigned seed = 1234;
    double bw_gbps = 0, peak_gflops = 0;
    bool verbose = false, load_only = false;
};

struct Test {
    std::string name;
    long n_prompt = 0, n_gen = 0, n_depth = 0;
    std::vector<double> tps;
};

struct BatchedTest {
    long n_seq = 1, n_prompt = 0, n_gen = 0;
    std::vector<double> pp_tps, tg_tps;  // aggregate, one per repetition
    std::string name() const {
        return "B" + std::to_string(n_seq) + " pp" + std::to_string(n_prompt) + "+tg" +
               std::to_string(n_gen);
    }
};

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "peer_bench: error: %s\n", msg.c_str());
    std::exit(1);
}

std::vector<long> parse_list(const char* text, const char* flag) {
    std::vector<long> out;
    std::string s(text);
    size_t at = 0;
    while (at <= s.size()) {
        size_t comma = s.find(',', at);
        std::string item =
            s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        char* end = nullptr;
        long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 0)
            die(std::string(flag) + " wants a list of non-negative numbers, not '" + s + "'");
        out.push_back(v);
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return out;
}

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Uncounted runs of a test before its timed ones: one, and on a GPU more until half a second has
// passed since the first ended (at most 20). One was not enough on a GPU: on an H200, in a process
// whose first run compiled its pipelines (seconds of an idle device), the first timed pp512 ran at
// 0.3-0.6x the rate of the others (docs/perf/history.md, 2026-12-01, late night).
template <class Run>
void warm_up(Run run, bool gpu) {
    run();
    const auto t0 = Clock::now();
    for (int i = 0; gpu && i < 20 && seconds_since(t0) < 0.5; ++i) run();
}

void quiet_log(ggml_log_level level, const char* text, void* user) {
    const bool verbose = *static_cast<bool*>(user);
    if (verbose || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string f = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) die(f + " needs a value");
            return argv[++i];
        };
        if (f == "-m")
            a.model = value();
        else if (f == "-p")
            a.prompts = parse_list(value(), "-p");
        else if (f == "-n")
            a.gens = parse_list(value(), "-n");
        else if (f == "-d")
            a.depths = parse_list(value(), "-d");
        else if (f == "-b")
            a.batches = parse_list(value(), "-b");
        else if (f == "-ub")
            a.ubatch = std::atoi(value());
        else if (f == "-kvu")
            a.kv_unified = true;
        else if (f == "-r")
            a.reps = std::atoi(value());
        else if (f == "-t")
            a.threads = std::atoi(value());
        else if (f == "-o")
            a.output = value();
        else if (f == "--device")
            a.device = value();
        else if (f == "-ngl")
            a.n_gpu_layers = std::atoi(value());
        else if (f == "--seed")
            a.seed = (unsigned)std::strtoul(value(), nullptr, 10);
        else if (f == "--bw-gbps")
            a.bw_gbps = std::atof(value());
        else if (f == "--peak-gflops")
            a.peak_gflops = std::atof(value());
        else if (f == "-v")
            a.verbose = true;
        else if (f == "--load-only")
            a.load_only = true;
        else
            die("unknown flag " + f +
                " (flags: -m FILE -p 512,2048 -n 128 -d 0,4096 -b 1,8,32 -ub 512 -kvu -r 5 -t N"
                " -o md|json|csv"
                " --device cpu|vulkan|cuda -ngl N --seed S --bw-gbps X --peak-gflops X --load-only "
                "-v)");
    }
    if (a.model.empty()) die("no model: give a GGUF file with -m FILE");
    if (a.reps < 1) die("-r must be at least 1");
    if (a.ubatch < 1) die("-ub must be at least 1");
    // llama.cpp's own limit on sequence ids (LLAMA_MAX_SEQ).
    for (long b : a.batches)
        if (b < 1 || b > 256) die("-b: sequence counts must be 1 to 256");
    if (a.output != "md" && a.output != "json" && a.output != "csv")
        die("-o must be md, json or csv");
    // vulkan and cuda both offload every layer; which GPU backend runs them is the build's (the
    // backend module next to the program).
    if (a.device != "cpu" && a.device != "vulkan" && a.device != "cuda")
        die("--device must be cpu, vulkan or cuda");
    return a;
}

std::string json_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        if ((unsigned char)c < 0x20) continue;
        o += c;
    }
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    Args a = parse(argc, argv);
    llama_log_set(quiet_log, &a.verbose);
    // Builds whose backends are separate modules register them here; others have them linked in.
    ggml_backend_load_all();
    llama_backend_init();

    std::vector<Test> base;
    for (long n : a.prompts)
        if (n > 0) base.push_back({"pp" + std::to_string(n), n, 0, 0, {}});
    for (long n : a.gens)
        if (n > 0) base.push_back({"tg" + std::to_string(n), 0, n, 0, {}});
    if (base.empty()) die("nothing to measure: give -p or -n lengths above 0");
    // As in deltallm bench: the depth columns appear only when a depth is asked for.
    const bool show_depth =
        std::any_of(a.depths.begin(), a.depths.end(), [](long d) { return d > 0; });
    std::vector<Test> tests;
    for (long d : a.depths) {
        for (Test t : base) {
            t.n_depth = d;
            if (d > 0) t.name += " @ d" + std::to_string(d);
            tests.push_back(t);
        }
    }
    long n_ctx = 16;
    for (const Test& t : tests) n_ctx = std::max(n_ctx, t.n_depth + t.n_prompt + t.n_gen + 1);
    // In deltallm bench's order: each B, each prompt length, each generation length.
    std::vector<BatchedTest> batched;
    for (long b : a.batches)
        for (long p : a.prompts)
            for (long n : a.gens)
                if (p > 0 || n > 0) batched.push_back({b, p, n, {}, {}});

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = a.device != "cpu" ? a.n_gpu_layers : 0;
    llama_model* model = llama_model_load_from_file(a.model.c_str(), mp);
    // A file llama.cpp refuses is the finding: the message above says why; exit 2 marks it.
    if (!model) {
        std::fprintf(stderr, "peer_bench: llama.cpp REFUSED to load %s\n", a.model.c_str());
        return 2;
    }
    if (a.load_only) {
        std::printf("peer_bench: llama.cpp loaded %s\n", a.model.c_str());
        llama_model_free(model);
        return 0;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = 2048;  // llama-bench's defaults
    cp.n_ubatch = 512;
    cp.no_perf = true;
    if (a.threads > 0) {
        cp.n_threads = a.threads;
        cp.n_threads_batch = a.threads;
    }
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) die("llama.cpp could not create a context for " + a.model);
    const llama_vocab* vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    std::mt19937 rng(a.seed);
    std::uniform_int_distribution<int32_t> pick(0, n_vocab - 1);
    auto decode = [&](std::vector<llama_token>& toks, size_t at, size_t n) {
        llama_batch b = llama_batch_get_one(toks.data() + at, (int32_t)n);
        if (llama_decode(ctx, b) != 0) die("llama_decode failed");
    };
    auto run_once = [&](const Test& t) -> double {
        llama_memory_clear(llama_get_memory(ctx), true);
        if (t.n_depth > 0) {  // the context the test starts from; not timed
            std::vector<llama_token> toks(t.n_depth);
            for (auto& x : toks) x = pick(rng);
            for (long at = 0; at < t.n_depth; at += cp.n_batch)
                decode(toks, at, std::min<long>(cp.n_batch, t.n_depth - at));
            llama_synchronize(ctx);
        }
        if (t.n_prompt > 0) {
            std::vector<llama_token> toks(t.n_prompt);
            for (auto& x : toks) x = pick(rng);
            auto t0 = Clock::now();
            for (long at = 0; at < t.n_prompt; at += cp.n_batch)
                decode(toks, at, std::min<long>(cp.n_batch, t.n_prompt - at));
            llama_synchronize(ctx);
            return double(t.n_prompt) / seconds_since(t0);
        }
        std::vector<llama_token> first{pick(rng)};
        decode(first, 0, 1);
        llama_synchronize(ctx);
        std::vector<llama_token> toks(t.n_gen);
        for (auto& x : toks) x = pick(rng);
        auto t0 = Clock::now();
        for (long i = 0; i < t.n_gen; ++i) {
            decode(toks, i, 1);
            llama_synchronize(ctx);  // the logits of every token are ready, as in deltallm's decode
        }
        return double(t.n_gen) / seconds_since(t0);
    };
    for (Test& t : tests) {
        warm_up([&] { run_once(t); }, a.device != "cpu");
        for (int r = 0; r < a.reps; ++r) t.tps.push_back(run_once(t));
    }

    // Batched rows: a context of their own for each B (consecutive rows share it), holding B
    // sequences of the longest row's p + n + 1 tokens each. Without -kvu each sequence has its own
    // KV stream (llama-batched-bench's default; llama.h advises it for sequences that share no
    // prefix); n_batch takes all B prompts in one llama_decode, which llama.cpp splits into
    // ubatches of -ub tokens.
    uint32_t batched_n_batch = 0, batched_n_ubatch = 0;
    for (size_t first = 0; first < batched.size();) {
        const long B = batched[first].n_seq;
        size_t last = first;
        long per_seq = 16, n_batch = cp.n_batch;
        while (last < batched.size() && batched[last].n_seq == B) {
            const BatchedTest& t = batched[last++];
            const long p = std::max(t.n_prompt, 1L);
            per_seq = std::max(per_seq, p + t.n_gen + 2);
            n_batch = std::max(n_batch, B * p);
        }
        llama_context_params bp = cp;
        bp.n_seq_max = (uint32_t)B;
        bp.kv_unified = a.kv_unified;
        bp.n_ctx = (uint32_t)(B * per_seq);
        bp.n_batch = (uint32_t)n_batch;
        bp.n_ubatch = (uint32_t)std::min<long>(a.ubatch, n_batch);
        llama_context* bctx = llama_init_from_model(model, bp);
        if (!bctx)
            die("llama.cpp could not create a context of " + std::to_string(B) + " sequences");
        if ((long)llama_n_ctx_seq(bctx) < per_seq)
            die("llama.cpp gave each sequence " + std::to_string(llama_n_ctx_seq(bctx)) +
                " cells, fewer than the " + std::to_string(per_seq) + " the rows need");
        batched_n_batch = llama_n_batch(bctx);
        batched_n_ubatch = llama_n_ubatch(bctx);
        llama_memory_t mem = llama_get_memory(bctx);
        llama_batch batch = llama_batch_init((int32_t)n_batch, 0, 1);
        auto add = [&](llama_token tok, llama_pos pos, llama_seq_id seq, bool logits) {
            const int32_t i = batch.n_tokens++;
            batch.token[i] = tok;
            batch.pos[i] = pos;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = seq;
            batch.logits[i] = logits;
        };
        auto bdecode = [&] {
            if (llama_decode(bctx, batch) != 0) die("llama_decode failed on a batched row");
            llama_synchronize(bctx);  // every sequence's logits are ready, as after deltallm's step
        };
        // One repetition, as deltallm's run_batched: fresh sequences (not timed), the B prompts in
        // one batch (the last token of each gives logits), one untimed batch of one token each,
        // then n timed batches of one token each.
        auto run_batched = [&](BatchedTest& t) {
            llama_memory_clear(mem, true);
            // Every sequence needs a prompt to decode after: at least one token, not timed when
            // p is 0.
            const long p = std::max(t.n_prompt, 1L);
            std::vector<llama_token> prompts((size_t)(B * p));
            for (auto& x : prompts) x = pick(rng);
            batch.n_tokens = 0;
            for (long s = 0; s < B; ++s)
                for (long i = 0; i < p; ++i)
                    add(prompts[(size_t)(s * p + i)], (llama_pos)i, (llama_seq_id)s, i == p - 1);
            auto t0 = Clock::now();
            bdecode();
            const double pp_s = seconds_since(t0);
            if (t.n_prompt > 0) t.pp_tps.push_back(double(B * t.n_prompt) / pp_s);
            if (t.n_gen <= 0) return;
            std::vector<llama_token> next((size_t)(B * (t.n_gen + 1)));
            for (auto& x : next) x = pick(rng);
            auto step = [&](long k) {
                batch.n_tokens = 0;
                for (long s = 0; s < B; ++s)
                    add(next[(size_t)(k * B + s)], (llama_pos)(p + k), (llama_seq_id)s, true);
                bdecode();
            };
            step(0);
            t0 = Clock::now();
            for (long k = 1; k <= t.n_gen; ++k) step(k);
            t.tg_tps.push_back(double(B * t.n_gen) / seconds_since(t0));
        };
        for (size_t i = first; i < last; ++i) {
            BatchedTest warm = batched[i];  // one uncounted repetition per row, as deltallm's
            run_batched(warm);
            for (int r = 0; r < a.reps; ++r) run_batched(batched[i]);
        }
        llama_batch_free(batch);
        llama_free(bctx);
        first = last;
    }

    const std::string path = a.model;
    const std::string name =
        path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    const double size_b = (double)llama_model_size(model),
                 params = (double)llama_model_n_params(model);
    const int threads = a.device == "cpu" ? (a.threads > 0 ? a.threads : (int)cp.n_threads) : 0;
    const std::string device = "llama.cpp-" + a.device;
    // The peer only knows whole-file figures; compare.py takes the floors from deltallm's run.
    auto ceiling = [&](const Test& t) -> double {
        if (t.n_prompt > 0) return a.peak_gflops > 0 ? a.peak_gflops * 1e9 / (2.0 * params) : 0;
        return a.bw_gbps > 0 ? a.bw_gbps * 1e9 / size_b : 0;
    };
    // B sequences read the weights once per step: B times the single stream's bandwidth floor,
    // until the step's arithmetic is the bound (deltallm's batched ceiling, from whole-file
    // figures).
    auto batched_ceiling = [&](const BatchedTest& t) -> double {
        const double mem = a.bw_gbps > 0 ? double(t.n_seq) * a.bw_gbps * 1e9 / size_b : 0;
        const double cmp = a.peak_gflops > 0 ? a.peak_gflops * 1e9 / (2.0 * params) : 0;
        if (mem > 0 && cmp > 0) return std::min(mem, cmp);
        return mem > 0 ? mem : cmp;
    };
    auto stats = [](const std::vector<double>& v, double& m, double& sd) {
        m = sd = 0;
        if (v.empty()) return;  // a batched row without a prompt or without generation
        for (double x : v) m += x;
        m /= (double)v.size();
        double ss = 0;
        for (double x : v) ss += (x - m) * (x - m);
        sd = v.size() > 1 ? std::sqrt(ss / (double)(v.size() - 1)) : 0.0;
    };

    if (a.output == "json") {
        std::printf(
            "{\n  \"engine\": \"llama.cpp\",\n  \"model\": \"%s\",\n  \"model_path\": \"%s\",\n",
            json_escape(name).c_str(), json_escape(path).c_str());
        std::printf(
            "  \"size_bytes\": %.0f,\n  \"n_params\": %.0f,\n  \"device\": \"%s\",\n"
            "  \"threads\": %d,\n  \"reps\": %d,\n  \"seed\": %u,\n",
            size_b, params, device.c_str(), threads, a.reps, a.seed);
        std::printf("  \"system_info\": \"%s\",\n  \"rows\": [\n",
                    json_escape(llama_print_system_info()).c_str());
        for (size_t i = 0; i < tests.size(); ++i) {
            const Test& t = tests[i];
            double m, sd;
            stats(t.tps, m, sd);
            std::string samples;
            for (size_t k = 0; k < t.tps.size(); ++k)
                samples += (k ? ", " : "") + std::to_string(t.tps[k]);
            const std::string depth =
                show_depth ? ", \"n_depth\": " + std::to_string(t.n_depth) : "";
            std::printf(
                "    {\"test\": \"%s\", \"n_prompt\": %ld, \"n_gen\": %ld%s, \"samples_ts\": "
                "[%s], \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"ceiling_ts\": %.6f}%s\n",
                t.name.c_str(), t.n_prompt, t.n_gen, depth.c_str(), samples.c_str(), m, sd,
                ceiling(t), i + 1 < tests.size() ? "," : "");
        }
        std::printf("  ],\n");
        if (!batched.empty())
            std::printf(
                "  \"batched_n_batch\": %u,\n  \"batched_n_ubatch\": %u,\n"
                "  \"kv_unified\": %s,\n",
                batched_n_batch, batched_n_ubatch, a.kv_unified ? "true" : "false");
        std::printf("  \"batched_rows\": [\n");
        auto list = [](const std::vector<double>& v) {
            std::string o;
            for (size_t k = 0; k < v.size(); ++k) o += (k ? ", " : "") + std::to_string(v[k]);
            return o;
        };
        for (size_t i = 0; i < batched.size(); ++i) {
            const BatchedTest& t = batched[i];
            double pp, pp_sd, tg, tg_sd;
            stats(t.pp_tps, pp, pp_sd);
            stats(t.tg_tps, tg, tg_sd);
            std::printf(
                "    {\"test\": \"%s\", \"n_seq\": %ld, \"n_prompt\": %ld, \"n_gen\": %ld, "
                "\"pp_samples_ts\": [%s], \"tg_samples_ts\": [%s], \"pp_avg_ts\": %.6f, "
                "\"pp_stddev_ts\": %.6f, \"tg_avg_ts\": %.6f, \"tg_stddev_ts\": %.6f, "
                "\"tg_ceiling_ts\": %.6f}%s\n",
                t.name().c_str(), t.n_seq, t.n_prompt, t.n_gen, list(t.pp_tps).c_str(),
                list(t.tg_tps).c_str(), pp, pp_sd, tg, tg_sd, batched_ceiling(t),
                i + 1 < batched.size() ? "," : "");
        }
        std::printf("  ]\n}\n");
    } else if (a.output == "csv") {
        std::printf(
            "engine,model,size_gib,params_b,device,threads,test,n_prompt,n_gen,%savg_ts,"
            "stddev_ts,ceiling_ts\n",
            show_depth ? "n_depth," : "");
        for (const Test& t : tests) {
            double m, sd;
            stats(t.tps, m, sd);
            const std::string depth = show_depth ? std::to_string(t.n_depth) + "," : "";
            std::printf("llama.cpp,%s,%.4f,%.4f,%s,%d,%s,%ld,%ld,%s%.3f,%.3f,%.3f\n", name.c_str(),
                        size_b / 1073741824.0, params / 1e9, device.c_str(), threads,
                        t.name.c_str(), t.n_prompt, t.n_gen, depth.c_str(), m, sd, ceiling(t));
        }
        if (!batched.empty())
            std::printf(
                "\nengine,model,device,test,n_seq,n_prompt,n_gen,pp_avg_ts,tg_avg_ts,"
                "tg_ceiling_ts\n");
        for (const BatchedTest& t : batched) {
            double pp, pp_sd, tg, tg_sd;
            stats(t.pp_tps, pp, pp_sd);
            stats(t.tg_tps, tg, tg_sd);
            std::printf("llama.cpp,%s,%s,%s,%ld,%ld,%ld,%.3f,%.3f,%.3f\n", name.c_str(),
                        device.c_str(), t.name().c_str(), t.n_seq, t.n_prompt, t.n_gen, pp, tg,
                        batched_ceiling(t));
        }
    } else {
        std::printf(
            "| model | size | params | device | threads | test | t/s | ceiling t/s | of ceiling "
            "|\n");
        std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
        for (const Test& t : tests) {
            double m, sd;
            stats(t.tps, m, sd);
            double c = ceiling(t);
            char cs[32] = "-", pct[32] = "-";
            if (c > 0) {
                std::snprintf(cs, sizeof cs, "%.2f", c);
                std::snprintf(pct, sizeof pct, "%.1f%%", 100.0 * m / c);
            }
            std::printf("| %s | %.2f GiB | %.2f B | %s | %d | %s | %.2f ± %.2f | %s | %s |\n",
                        name.c_str(), size_b / 1073741824.0, params / 1e9, device.c_str(), threads,
                        t.name.c_str(), m, sd, cs, pct);
        }
        if (!batched.empty()) {
            std::printf(
                "\n| model | device | test | prompt t/s | generation t/s | per sequence t/s | "
                "ceiling t/s | of ceiling |\n");
            std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        }
        for (const BatchedTest& t : batched) {
            double pp, pp_sd, tg, tg_sd;
            stats(t.pp_tps, pp, pp_sd);
            stats(t.tg_tps, tg, tg_sd);
            const double c = batched_ceiling(t);
            char pps[64] = "-", tgs[64] = "-", per[32] = "-", cs[32] = "-", pct[32] = "-";
            if (t.n_prompt > 0) std::snprintf(pps, sizeof pps, "%.2f ± %.2f", pp, pp_sd);
            if (t.n_gen > 0) {
                std::snprintf(tgs, sizeof tgs, "%.2f ± %.2f", tg, tg_sd);
                std::snprintf(per, sizeof per, "%.2f", tg / double(t.n_seq));
                if (c > 0) {
                    std::snprintf(cs, sizeof cs, "%.2f", c);
                    std::snprintf(pct, sizeof pct, "%.1f%%", 100.0 * tg / c);
                }
            }
            std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", name.c_str(), device.c_str(),
                        t.name().c_str(), pps, tgs, per, cs, pct);
        }
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
