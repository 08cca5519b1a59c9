// What the model-running subcommands share: the -m/--device/-c options, the sampling options,
// opening a model (or the built-in model) with a progress bar, and printing speeds.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/bytes.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/sampler.h"

namespace dl::tools {

struct ModelArgs {
    std::string path;  // empty: the built-in model
    std::string device = "auto";
    int64_t n_ctx = 0;
    int64_t sequences = 1;  // at once (EngineOptions::sequences): the --parallel of serve and batch
    bool prefix_cache = false;  // EngineOptions::prefix_cache: serve's

    void add_to(CLI::App& app, bool with_device = true);
    // The checks open() makes before it reads the model (device, -c, the path); throws dl::Error.
    void check() const;
    // Opens the model (or the built-in model, saying so on stderr); throws dl::Error.
    std::unique_ptr<Engine> open() const;
};

struct SamplingArgs {
    float temperature = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    int32_t repeat_last_n = 64;
    std::string seed = "-1";  // -1: a random seed; else 0 to 2^64-1

    void add_to(CLI::App& app);
    // Checks the ranges (dl::Error names the flag) and draws the seed when none was given.
    SamplerParams params() const;
};

// "1,2,3" -> {1, 2, 3}; throws dl::Error naming the flag for anything else.
std::vector<int64_t> parse_int_list(const std::string& text, const char* flag);

// "prompt 5 tokens in 0.010 s (500.0 tokens/s)" and the generation line, on stderr.
void print_speeds(const GenerateStats& st);

// Says on stderr what a large context is about to cost before the session is set up (a context
// of a million tokens takes tens of seconds and gigabytes, which looked like a hang).
void announce_context(const Engine& engine);

// --profile: device time per kernel role, printed when the model closes (Vulkan driver).
void add_profile_flag(CLI::App& app);

// Reads a whole file or stream of at most kMaxPromptFileBytes; throws dl::Error naming the path.
constexpr size_t kMaxPromptFileBytes = 64u << 20;
std::string read_text_file(const std::string& path);

}  // namespace dl::tools
