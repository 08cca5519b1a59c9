// Shared pieces of the subcommands: model options, sampling options, the load progress bar.
#include "tools/common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "core/error.h"
#include "core/read_file.h"
#include "tools/default_model.h"

namespace dl::tools {

namespace {

// Shows how far the weights have been read: a redrawn bar on a terminal, a few plain lines
// otherwise (logs of long loads), nothing for small models.
class LoadProgress {
  public:
    explicit LoadProgress(uint64_t file_bytes) : bytes_(file_bytes) {
        tty_ = isatty(STDERR_FILENO) == 1;
        enabled_ = (tty_ && bytes_ >= (64ull << 20)) || bytes_ >= (2ull << 30);
    }
    ~LoadProgress() {
        if (enabled_ && tty_ && drawn_) std::fputs("\r\033[K", stderr);
    }
    void operator()(double f) {
        if (!enabled_) return;
        int pct = (int)(f * 100.0 + 0.5);
        if (tty_) {
            if (pct == last_) return;
            constexpr int width = 30;
            int filled = pct * width / 100;
            std::fprintf(stderr, "\rloading %s [%.*s%*s] %3d%%", human_bytes(bytes_).c_str(),
                         filled, "##############################", width - filled, "", pct);
            std::fflush(stderr);
            drawn_ = true;
        } else {
            if (pct / 25 == last_ / 25) return;
            std::fprintf(stderr, "loading %s: %d%%\n", human_bytes(bytes_).c_str(), pct);
        }
        last_ = pct;
    }
    bool enabled() const { return enabled_; }

  private:
    uint64_t bytes_;
    bool tty_ = false, enabled_ = false, drawn_ = false;
    int last_ = -1;
};

}  // namespace

std::string read_text_file(const std::string& path) {
    // A prompt may come through a pipe (-f /dev/stdin) but never endlessly (-f /dev/zero).
    return read_file_bounded(path, kMaxPromptFileBytes, FileKind::regular_or_pipe, "the file");
}

void ModelArgs::add_to(CLI::App& app, bool with_device) {
    app.add_option("-m,--model", path, "GGUF model file (default: the built-in deltallm-tiny)");
    if (with_device) {
        app.add_option("--device", device, "where to run: auto, cpu, vulkan or vulkan:N")
            ->capture_default_str();
        app.add_option("-c,--ctx", n_ctx, "context size in tokens (0: the model's, at most 4096)")
            ->capture_default_str();
        add_profile_flag(app);
    }
}

void add_profile_flag(CLI::App& app) {
    // The Vulkan driver reads DELTALLM_VK_PROFILE when it opens; the flag is that variable.
    app.add_flag_callback(
        "--profile", [] { ::setenv("DELTALLM_VK_PROFILE", "1", 1); },
        "print the device time of each kernel role per token when the model closes (Vulkan)");
}

void ModelArgs::check() const {
    DeviceSpec::parse(device);
    if (n_ctx < 0 || n_ctx > kMaxContext)
        fail("-c must be 0 (the model's) or a number of tokens up to {}, not {}", kMaxContext,
             n_ctx);
    if (path.empty()) return;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) fail("cannot open {}: {}", path, std::strerror(errno));
    if (S_ISDIR(st.st_mode)) fail("{} is a directory, not a GGUF file", path);
}

std::unique_ptr<Engine> ModelArgs::open() const {
    check();
    EngineOptions o;
    o.device = DeviceSpec::parse(device);
    o.n_ctx = n_ctx;
    o.sequences = sequences;
    o.prefix_cache = prefix_cache;
    if (path.empty()) {
        std::fprintf(stderr, "deltallm: no model given (-m): using the built-in model, %s.\n",
                     default_model_description().c_str());
        return Engine::open_image(default_model_image(), "built-in model", o);
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) fail("cannot open {}: {}", path, std::strerror(errno));
    auto progress = std::make_shared<LoadProgress>((uint64_t)st.st_size);
    if (progress->enabled()) o.progress = [progress](double f) { (*progress)(f); };
    auto engine = Engine::open(path, o);
    return engine;
}

void SamplingArgs::add_to(CLI::App& app) {
    app.add_option("--temp", temperature, "temperature (0: greedy)")->capture_default_str();
    app.add_option("--top-k", top_k, "keep the k most likely tokens (0: off)")
        ->capture_default_str();
    app.add_option("--top-p", top_p, "keep the smallest set with this much probability (1: off)")
        ->capture_default_str();
    app.add_option("--min-p", min_p, "drop tokens below this fraction of the best one (0: off)")
        ->capture_default_str();
    app.add_option("--repeat-penalty", repeat_penalty, "penalty for recent tokens (1: off)")
        ->capture_default_str();
    app.add_option("--repeat-last-n", repeat_last_n, "how many recent tokens (0: off, -1: all)")
        ->capture_default_str();
    app.add_option("--seed", seed, "random seed, 0 to 2^64-1 (-1: a new one each run)")
        ->capture_default_str();
}

SamplerParams SamplingArgs::params() const {
    if (!(temperature >= 0.0f)) fail("--temp must be 0 or more, not {}", temperature);
    if (top_k < 0) fail("--top-k must be 0 or more, not {}", top_k);
    if (!(top_p > 0.0f && top_p <= 1.0f)) fail("--top-p must be in (0, 1], not {}", top_p);
    if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("--min-p must be in [0, 1], not {}", min_p);
    if (!(repeat_penalty > 0.0f)) fail("--repeat-penalty must be positive, not {}", repeat_penalty);
    if (repeat_last_n < -1) fail("--repeat-last-n must be -1 or more, not {}", repeat_last_n);
    // The generator takes 64 bits: every one of them is a distinct seed (a signed parse clamped
    // everything from 2^63-1 up to one value).
    uint64_t seed_value = 0;
    const bool random_seed = seed == "-1";
    if (!random_seed) {
        auto [p, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), seed_value);
        if (seed.empty() || ec != std::errc() || p != seed.data() + seed.size())
            fail("--seed must be -1 or a number from 0 to 18446744073709551615, not '{}'", seed);
    }
    SamplerParams p;
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = repeat_penalty;
    p.repeat_last_n = repeat_last_n;
    p.seed = !random_seed ? seed_value
                          : ((uint64_t)std::random_device{}() << 32) ^ std::random_device{}();
    return p;
}

std::vector<int64_t> parse_int_list(const std::string& text, const char* flag) {
    std::vector<int64_t> out;
    size_t i = 0;
    while (i <= text.size()) {
        size_t j = text.find(',', i);
        if (j == std::string::npos) j = text.size();
        std::string item = text.substr(i, j - i);
        while (!item.empty() && std::isspace((unsigned char)item.front())) item.erase(0, 1);
        while (!item.empty() && std::isspace((unsigned char)item.back())) item.pop_back();
        int64_t v = 0;
        auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (item.empty() || ec != std::errc() || p != item.data() + item.size())
            fail("{} expects comma-separated integers, and '{}' is not one", flag, item);
        out.push_back(v);
        i = j + 1;
    }
    return out;
}

void announce_context(const Engine& engine) {
    const MemoryEstimate me = estimate_memory(engine.model(), engine.n_ctx());
    if (me.kv_cache < (1ull << 30)) return;
    std::fprintf(stderr,
                 "deltallm: setting up a context of %lld tokens (KV cache %s); -c gives a smaller "
                 "one\n",
                 (long long)engine.n_ctx(), human_bytes(me.kv_cache).c_str());
}

void print_speeds(const GenerateStats& st) {
    std::fprintf(stderr, "deltallm: prompt %lld tokens in %.3f s (%.1f tokens/s)\n",
                 (long long)st.n_prompt, st.prompt_seconds, st.prompt_tokens_per_second());
    std::fprintf(stderr, "deltallm: generation %lld tokens in %.3f s (%.1f tokens/s)\n",
                 (long long)st.n_generated, st.decode_seconds + st.sample_seconds,
                 st.generation_tokens_per_second());
}

}  // namespace dl::tools
