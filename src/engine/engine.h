// The engine: a loaded model with its tokenizer, chat format and the executor chosen for a
// device (--device auto|cpu|vulkan[:N]). Device drivers other than the CPU chain plug in
// through register_device(), so this layer never depends on them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cpu/chain.h"
#include "engine/chat.h"
#include "executor/device_driver.h"
#include "executor/executor.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace dl {

struct DeviceSpec {
    enum class Kind { automatic, cpu, vulkan };
    Kind kind = Kind::automatic;
    int index = -1;  // vulkan:N; -1 lets the driver choose

    // "auto", "cpu", "vulkan", "vulkan:1"; throws dl::Error for anything else.
    static DeviceSpec parse(std::string_view text);
    std::string str() const;
};

struct EngineOptions {
    DeviceSpec device;
    int64_t n_ctx = 0;  // 0: the model's training context, at most kDefaultContext
    // Sequences run at once (a server's or a batch's slots): a device sizes its shared KV cache
    // for this many of n_ctx tokens where its memory holds them.
    int64_t sequences = 1;
    bool prefix_cache = false;  // Capacity::prefix_cache
    cpu::ChainOptions cpu;
    Model::Progress progress;  // called while the weights are read in
};

constexpr int64_t kDefaultContext = 4096;
// The largest context accepted (2^30 tokens): past every model's training context, and small
// enough that no size computed from it overflows 64 bits.
constexpr int64_t kMaxContext = int64_t{1} << 30;

// The memory a model needs to run, by its hyper-parameters (independent of any executor).
struct MemoryEstimate {
    uint64_t weights = 0;          // every tensor the trunk reads
    uint64_t kv_cache = 0;         // attention K and V rows for n_ctx tokens (f16)
    uint64_t recurrent_state = 0;  // DeltaNet state S and conv state, f32, one sequence
    uint64_t total() const { return weights + kv_cache + recurrent_state; }
};
MemoryEstimate estimate_memory(const Model& model, int64_t n_ctx);

class Engine {
  public:
    // Loads a GGUF file and builds the executor; throws dl::Error with one sentence.
    static std::unique_ptr<Engine> open(const std::string& path, const EngineOptions& options = {});
    // The same from a GGUF image in memory (the embedded default model); name is for messages.
    static std::unique_ptr<Engine> open_image(std::vector<uint8_t> image, const std::string& name,
                                              const EngineOptions& options = {});
    ~Engine();

    const Model& model() const { return *model_; }
    std::shared_ptr<const Model> model_ptr() const { return model_; }
    Executor& executor() { return *executor_; }
    // Throws dl::Error when the file has no usable tokenizer (token ids still work).
    const tokenizer::Tokenizer& tokenizer() const;
    bool has_tokenizer() const { return tokenizer_ != nullptr; }
    const ChatFormat& chat_format() const { return chat_; }
    ChatFormat& chat_format() { return chat_; }
    int64_t n_ctx() const { return n_ctx_; }
    double load_seconds() const { return load_seconds_; }
    // Why the preferred device was not used (auto fell back to the CPU chain), or "".
    const std::string& fallback_reason() const { return fallback_reason_; }

    std::unique_ptr<SessionState> new_session() { return executor_->new_session(n_ctx_); }

  private:
    Engine() = default;
    void finish_open(const EngineOptions& options);

    std::shared_ptr<std::vector<uint8_t>> image_;  // outlives the model built over it
    std::shared_ptr<const Model> model_;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
    std::string tokenizer_error_;
    ChatFormat chat_{ChatStyle::chatml};
    std::unique_ptr<Executor> executor_;
    int64_t n_ctx_ = 0;
    double load_seconds_ = 0;
    std::string fallback_reason_;
};

// Shorthand for the front-ends: open(path) with the device given as text.
std::unique_ptr<Engine> open_model(const std::string& path, std::string_view device = "auto",
                                   int64_t n_ctx = 0, Model::Progress progress = {});

}  // namespace dl
