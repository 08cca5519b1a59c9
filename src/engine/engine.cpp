// Opening a model: load and validate, read the tokenizer, pick the chat format, choose the
// executor for the requested device (auto prefers a registered GPU driver and falls back to the
// CPU chain with the driver's reason logged once).
#include "engine/engine.h"

#include <charconv>
#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "gguf/gguf.h"

namespace dl {

namespace {

const DeviceDriver* find_driver(std::string_view name) {
    for (const DeviceDriver& d : registered_devices())
        if (d.name == name) return &d;
    return nullptr;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

DeviceSpec DeviceSpec::parse(std::string_view text) {
    DeviceSpec d;
    if (text == "auto") return d;
    if (text == "cpu") {
        d.kind = Kind::cpu;
        return d;
    }
    if (text.substr(0, 6) == "vulkan") {
        d.kind = Kind::vulkan;
        std::string_view rest = text.substr(6);
        if (rest.empty()) return d;
        if (rest[0] == ':' && rest.size() > 1) {
            int v = -1;
            auto [p, ec] = std::from_chars(rest.data() + 1, rest.data() + rest.size(), v);
            if (ec == std::errc() && p == rest.data() + rest.size() && v >= 0) {
                d.index = v;
                return d;
            }
        }
    }
    fail("unknown device '{}' (use auto, cpu, vulkan or vulkan:N)", text);
}

std::string DeviceSpec::str() const {
    switch (kind) {
        case Kind::automatic:
            return "auto";
        case Kind::cpu:
            return "cpu";
        case Kind::vulkan:
            return index < 0 ? "vulkan" : "vulkan:" + std::to_string(index);
    }
    return "?";
}

MemoryEstimate estimate_memory(const Model& model, int64_t n_ctx) {
    const Hparams& hp = model.hp;
    MemoryEstimate m;
    m.weights = model.weight_bytes();
    int64_t n_attn = 0, n_gdn = 0;
    for (int64_t il = 0; il < hp.n_layer; ++il) (hp.is_recurrent(il) ? n_gdn : n_attn)++;
    // K and V rows of n_head_kv heads per attention layer and token, stored as f16.
    if (n_ctx < 0 || n_ctx > kMaxContext)
        fail("a context of {} tokens is more than deltallm supports ({})", n_ctx, kMaxContext);
    uint64_t kv = 4;  // K and V, 2 bytes each
    for (int64_t f : {n_attn, n_ctx, hp.n_head_kv, hp.head_dim})
        if (f < 0 || __builtin_mul_overflow(kv, (uint64_t)f, &kv))
            fail("the KV cache of {} tokens is too large to count", n_ctx);
    m.kv_cache = kv;
    if (n_gdn > 0) {
        // Per GDN layer: S of H_v x d_k x d_v and the last (kernel - 1) conv inputs, f32.
        uint64_t s = (uint64_t)hp.ssm_n_v_heads * hp.ssm_d_state * hp.ssm_d_state;
        uint64_t conv = (uint64_t)std::max<int64_t>(0, hp.ssm_conv_kernel - 1) * hp.conv_dim();
        m.recurrent_state = 4ull * (uint64_t)n_gdn * (s + conv);
    }
    return m;
}

Engine::~Engine() = default;

const tokenizer::Tokenizer& Engine::tokenizer() const {
    if (!tokenizer_)
        fail("the model has no usable tokenizer ({}); pass token ids instead", tokenizer_error_);
    return *tokenizer_;
}

std::unique_ptr<Engine> Engine::open(const std::string& path, const EngineOptions& options) {
    auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<Engine> e(new Engine());
    e->model_ = Model::load(path, options.progress);
    check_mapped_files();  // truncated while it was read in
    e->finish_open(options);
    e->load_seconds_ = seconds_since(t0);
    return e;
}

std::unique_ptr<Engine> Engine::open_image(std::vector<uint8_t> image, const std::string& name,
                                           const EngineOptions& options) {
    auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<Engine> e(new Engine());
    e->image_ = std::make_shared<std::vector<uint8_t>>(std::move(image));
    auto file =
        std::make_shared<gguf::File>(gguf::File::parse(e->image_->data(), e->image_->size(), name));
    e->model_ = Model::from_file(std::move(file));
    if (options.progress) options.progress(1.0);
    e->finish_open(options);
    e->load_seconds_ = seconds_since(t0);
    return e;
}

void Engine::finish_open(const EngineOptions& options) {
    const Hparams& hp = model_->hp;
    try {
        tokenizer_ =
            std::make_unique<tokenizer::Tokenizer>(tokenizer::Vocab::from_gguf(model_->file()));
        if (tokenizer_->n_vocab() != hp.n_vocab)
            log::warn("the tokenizer has {} tokens but the model's head {} rows",
                      tokenizer_->n_vocab(), hp.n_vocab);
    } catch (const Error& err) {
        tokenizer_.reset();
        tokenizer_error_ = err.what();
        log::debug("no tokenizer: {}", tokenizer_error_);
    }
    chat_ = ChatFormat::detect(hp.arch_name, tokenizer_ ? tokenizer_->vocab().chat_template : "");

    if (options.n_ctx < 0) fail("the context size must be positive, not {}", options.n_ctx);
    if (options.n_ctx > kMaxContext)
        fail("a context of {} tokens is more than deltallm supports ({})", options.n_ctx,
             kMaxContext);
    n_ctx_ = options.n_ctx;
    if (n_ctx_ == 0)
        n_ctx_ = hp.n_ctx_train > 0 ? std::min(hp.n_ctx_train, kDefaultContext) : kDefaultContext;

    const DeviceSpec& dev = options.device;
    if (dev.kind != DeviceSpec::Kind::cpu) {
        const DeviceDriver* drv = find_driver("vulkan");
        if (!drv) {
            if (dev.kind == DeviceSpec::Kind::vulkan)
                fail("this build of deltallm has no Vulkan driver (use --device cpu)");
            fallback_reason_ = "no GPU driver in this build";
        } else if (dev.kind == DeviceSpec::Kind::automatic && drv->preferred_under_auto &&
                   !drv->preferred_under_auto()) {
            fallback_reason_ = "no GPU worth preferring to the CPU chain";
            log::debug("using the CPU chain: {}", fallback_reason_);
        } else {
            std::string reason;
            executor_ =
                drv->make(model_, dev.index,
                          Capacity{n_ctx_, options.sequences, options.prefix_cache}, &reason);
            if (!executor_) {
                if (dev.kind == DeviceSpec::Kind::vulkan)
                    fail(
                        "the Vulkan driver cannot run this model: {} (--device cpu runs it on "
                        "the CPU chain)",
                        reason);
                fallback_reason_ = reason;
                log::info("using the CPU chain: {}", reason);
            }
        }
    }
    if (!executor_) executor_ = std::make_unique<cpu::Chain>(model_, options.cpu);
}

std::unique_ptr<Engine> open_model(const std::string& path, std::string_view device, int64_t n_ctx,
                                   Model::Progress progress) {
    EngineOptions o;
    o.device = DeviceSpec::parse(device);
    o.n_ctx = n_ctx;
    o.progress = std::move(progress);
    return Engine::open(path, o);
}

}  // namespace dl
