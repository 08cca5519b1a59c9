// Shared fixture of the Vulkan tests: one device per process (lavapipe unless VK_DRIVER_FILES
// names another driver), opened with robustBufferAccess (see robust()), plus helpers to move
// vectors in and out of device buffers and to poison outputs.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/env.h"
#include "model/tiny_model.h"
#include "quant/quant.h"
#include "vulkan/device.h"
#include "vulkan/kernels.h"
#include "vulkan/pipeline.h"
#include "vulkan/weight_layout.h"

namespace dl::vk::test {

constexpr uint32_t kPoison = 0x7fc00000u;  // a NaN: any element a kernel fails to write shows

// The name of a case of a test over {type, rows, cols} parameters: "q4_k_4096x1024".
struct TypeRowsColsName {
    template <typename Info>
    std::string operator()(const Info& info) const {
        return std::string(qtype_name(info.param.type)) + "_" + std::to_string(info.param.rows) +
               "x" + std::to_string(info.param.cols);
    }
};

// Whether the tests' devices check every buffer access (robustBufferAccess; by default they do,
// DELTALLM_VK_TEST_ROBUST=0 opens them as the engine does).
inline bool robust() {
    return ::dl::env::get_bool("DELTALLM_VK_TEST_ROBUST");
}

// The device options of every test's device: robust() buffer accesses, and compiled pipelines
// shared through the scratch dir, since CTest runs every test in its own process.
inline DeviceOptions device_options() {
    DeviceOptions o = DeviceOptions::from_env();
    o.robust = robust();
    const char* tmp = std::getenv("DELTALLM_TEST_TMP");
    o.pipeline_cache_dir = tmp ? std::string(tmp) + "/vk_pipeline_cache" : "";
    return o;
}

struct Env {
    std::unique_ptr<Device> dev;
    std::unique_ptr<Pipelines> pipes;
    std::unique_ptr<Kernels> kernels;
    std::string decline;
};

inline Env& env() {
    static Env e = [] {
        const char* lvp = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";
        if (!std::getenv("VK_DRIVER_FILES") && !std::getenv("VK_ICD_FILENAMES") &&
            std::filesystem::exists(lvp))
            setenv("VK_DRIVER_FILES", lvp, 1);
        Env e;
        auto d = Device::open(device_options());
        if (!d) {
            e.decline = d.reason();
            return e;
        }
        e.dev = std::move(*d);
        e.pipes = std::make_unique<Pipelines>(*e.dev);
        e.kernels = std::make_unique<Kernels>(*e.dev, *e.pipes);
        return e;
    }();
    return e;
}

// With DELTALLM_VK_VALIDATION=1 the validation layer's errors are counted; any at the end of the
// run fails it.
class ValidationCheck : public ::testing::Environment {
  public:
    void TearDown() override {
        Env& e = env();
        if (e.dev && e.dev->validation_errors() > 0)
            ADD_FAILURE() << e.dev->validation_errors() << " Vulkan validation errors; the last: "
                          << e.dev->last_validation_message();
        // Devices the drivers under test opened themselves (their messages are in the log).
        else if (Device::validation_errors_all() > 0)
            ADD_FAILURE() << Device::validation_errors_all() << " Vulkan validation errors";
        // Closed here, not at static destruction: by then a layer may already be unloaded (the
        // validation layer crashed there on an H200 when closing the shared device).
        e.kernels.reset();
        e.pipes.reset();
        e.dev.reset();
    }
};
inline ::testing::Environment* const validation_check =
    ::testing::AddGlobalTestEnvironment(new ValidationCheck);

#define VK_TEST_DEVICE()                                           \
    auto& E = ::dl::vk::test::env();                               \
    if (!E.dev) GTEST_SKIP() << "no Vulkan device: " << E.decline; \
    Device& dev = *E.dev;                                          \
    Kernels& K = *E.kernels;                                       \
    (void)dev;                                                     \
    (void)K

// Gaussian test data: n values of N(0, scale²) drawn from rng, or from a generator seeded with
// seed.
inline std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.f) {
    std::normal_distribution<float> d(0.f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}
inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.f) {
    std::mt19937 rng(seed);
    return randn(n, rng, scale);
}

template <typename T>
Buffer to_device(Device& dev, const std::vector<T>& v, size_t pad_bytes = 0) {
    Buffer b = dev.create_buffer(v.size() * sizeof(T) + pad_bytes, MemoryKind::device);
    if (!v.empty()) dev.upload(b, 0, v.data(), v.size() * sizeof(T));
    return b;
}

// Rows of weights w (rows × cols) in type t's GGUF blocks, in the byte order the device holds
// them (weight_layout.h: tiles of rows, the last padded; with device_layout false, in the GGUF
// order), with a spare word past the last block as the plan keeps after a matrix, and the
// blocks dequantized again on the CPU: the exact values a kernel multiplies.
struct QuantizedRows {
    std::vector<uint8_t> blocks;
    std::vector<float> values;
};
inline QuantizedRows quantize_rows(QType t, const std::vector<float>& w, uint32_t rows,
                                   uint32_t cols, bool device_layout = true) {
    const size_t rb = row_size(t, cols);
    std::vector<uint8_t> gguf(rb * rows);
    QuantizedRows q{{}, std::vector<float>((size_t)rows * cols)};
    for (uint32_t r = 0; r < rows; ++r) {
        quant::quantize(t, w.data() + (size_t)r * cols, gguf.data() + r * rb, cols);
        quant::dequantize(t, gguf.data() + r * rb, q.values.data() + (size_t)r * cols, cols);
    }
    const size_t bytes = device_layout ? device_bytes(t, cols, rows) : gguf.size();
    q.blocks.assign((bytes + 3) / 4 * 4 + 4, 0);
    if (device_layout)
        to_device_layout(t, cols, rows, gguf.data(), q.blocks.data());
    else
        std::copy(gguf.begin(), gguf.end(), q.blocks.begin());
    return q;
}

// One small matrix (type, rows, cols) of each weight format the kernels read, and Q6_K rows of
// one, three and eight blocks; the Q4_K and Q6_K ones fill part of one tile of rows
// (weight_layout.h).
inline std::vector<std::tuple<QType, uint32_t, uint32_t>> small_matrices() {
    return {{QType::F32, 5, 40},   {QType::F16, 5, 24},   {QType::Q4_0, 7, 96},
            {QType::Q8_0, 3, 64},  {QType::Q4_K, 5, 512}, {QType::Q5_K, 3, 256},
            {QType::Q6_K, 6, 256}, {QType::Q6_K, 5, 768}, {QType::Q6_K, 4, 2048}};
}

// x as the byte GEMVs see it (shaders/gemv.comp, X_INT8): each block of 16 values scaled so its
// largest magnitude is 127 and rounded half to even. `values` are the rounded values times the
// block's scale; `scale[i]` is that scale for value i. The device's 127 / amax may differ from
// this one in the last bit, so a value that lands on a half may round the other way: tests
// allow for a few such values.
struct BytesX {
    std::vector<float> values, scale;
};
inline BytesX round_x_bytes(const float* x, size_t n) {
    BytesX b{std::vector<float>(n), std::vector<float>(n)};
    for (size_t b0 = 0; b0 < n; b0 += 16) {
        const size_t e = std::min(n, b0 + 16);
        float amax = 0.f;
        for (size_t i = b0; i < e; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float id = amax > 0.f ? 127.f / amax : 0.f, d = amax / 127.f;
        for (size_t i = b0; i < e; ++i) {
            b.values[i] = d * std::nearbyint(x[i] * id);
            b.scale[i] = d;
        }
    }
    return b;
}

// x rounded to bytes in the layout a GemvRounding writes (gemv.comp, top): the bytes, then each
// 16-value block's scale and scale · sum of its bytes (Kernels::rounding_floats(n) floats); and
// the rounded values themselves.
struct Rounded {
    std::vector<float> layout, values;
};
inline Rounded rounding_layout(const std::vector<float>& x) {
    const uint32_t n = (uint32_t)x.size();
    Rounded r{std::vector<float>(Kernels::rounding_floats(n)), std::vector<float>(n)};
    std::vector<uint32_t> words(n / 4);
    for (uint32_t b = 0; b < n / 16; ++b) {
        float amax = 0.f;
        for (uint32_t i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[16 * b + i]));
        const float id = amax > 0.f ? 127.f / amax : 0.f, d = amax / 127.f;
        int sum = 0;
        for (uint32_t i = 0; i < 16; ++i) {
            const int q = (int)std::nearbyint(x[16 * b + i] * id);
            sum += q;
            r.values[16 * b + i] = d * (float)q;
            words[4 * b + i / 4] |= (uint32_t)(uint8_t)(int8_t)q << (8 * (i % 4));
        }
        r.layout[n / 4 + 2 * b] = d;
        r.layout[n / 4 + 2 * b + 1] = d * (float)sum;
    }
    std::memcpy(r.layout.data(), words.data(), words.size() * 4);
    return r;
}

// Block e of a rounding of n values that a kernel wrote in that layout at buf[off ..]: its bytes
// and scale, after the checks every such block must pass (a finite scale and scaled sum, its
// largest byte at ±127 unless the scale is 0, the scaled sum that of its bytes). Fatal failures
// carry `what`; the caller checks HasFatalFailure().
struct RoundedBlock {
    int8_t q[16];
    float d;
};
inline void read_rounded_block(const std::vector<float>& buf, uint32_t off, uint32_t n, uint32_t e,
                               const std::string& what, RoundedBlock& b) {
    const float d = buf[off + n / 4 + 2 * e], ds = buf[off + n / 4 + 2 * e + 1];
    ASSERT_TRUE(std::isfinite(d) && std::isfinite(ds)) << what;
    std::memcpy(b.q, &buf[off + 4 * e], 16);
    int sum = 0, qmax = 0;
    for (int j = 0; j < 16; ++j) {
        sum += b.q[j];
        qmax = std::max(qmax, std::abs((int)b.q[j]));
    }
    ASSERT_TRUE(qmax == 127 || d == 0.f) << what;
    ASSERT_NEAR(ds, d * (float)sum, 1e-5 * (1 + std::fabs(d * sum))) << what;
    b.d = d;
}

// x · w / sqrt(mean(x²) + eps) (rms_norm.comp's formula; the mean in double).
inline std::vector<float> rms_normed(const float* x, const std::vector<float>& w, float eps) {
    double ss = 0;
    for (size_t i = 0; i < w.size(); ++i) ss += (double)x[i] * x[i];
    const float scale = (float)(1.0 / std::sqrt(ss / (double)w.size() + eps));
    std::vector<float> y(w.size());
    for (size_t i = 0; i < w.size(); ++i) y[i] = x[i] * scale * w[i];
    return y;
}

// A setting (a Kernels member: the shared Kernels of the test environment serve every test) set
// for one scope and given back its value after.
template <typename T>
class Scoped {
  public:
    Scoped(T& var, std::type_identity_t<T> value) : var_(var), was_(var) { var_ = value; }
    ~Scoped() { var_ = was_; }
    Scoped(const Scoped&) = delete;
    Scoped& operator=(const Scoped&) = delete;

  private:
    T& var_;
    T was_;
};

// The tiny model the driver parity tests run (tests/model/tiny_model.h): the attention-only
// architectures with 2 layers and full rotary, qwen3 with a tied output head, residual updates
// scaled down so errors grow less from layer to layer. Q4_K needs every matrix input a whole
// number of its 256-element blocks, so its models are wider; they hold a Q4_K_M file's mix, Q6_K
// included (ffn_down of two blocks a row).
inline dl::test::TinySpec parity_spec(const std::string& arch, QType type = QType::F32) {
    dl::test::TinySpec s;
    s.arch = arch;
    if (arch != "qwen35") {
        s.n_layer = 2;
        s.rope_dims = s.head_dim;
    }
    if (arch == "qwen3") s.tied = true;
    s.residual_gain = 0.5;
    s.matrix_type = type;
    if (type == QType::Q4_K) {
        s.q4_k_m = true;
        s.n_embd = 256;
        s.n_ff = 512;
        s.n_head = 4;
        s.head_dim = 64;
        s.rope_dims = arch == "qwen35" ? 16 : 64;
        s.d_state = 64;
        s.n_vocab = 300;
        s.residual_gain = 0.3;
    }
    return s;
}

// The mixture-of-experts version of parity_spec (arch qwen3moe or qwen35moe): qwen35moe with a
// shared expert and gate and up in one stack; in Q4_K every expert row a whole block.
inline dl::test::TinySpec moe_spec(const std::string& arch, QType type = QType::F32) {
    dl::test::TinySpec s = parity_spec(arch.substr(0, arch.size() - 3), type);
    s.arch = arch;
    if (arch == "qwen35moe") {
        s.n_ff_shexp = type == QType::Q4_K ? 256 : 48;
        s.fused_gate_up = true;
    }
    if (type == QType::Q4_K) s.n_ff_exp = 256;
    return s;
}

inline Buffer poisoned(Device& dev, size_t n_floats) {
    Buffer b = dev.create_buffer(n_floats * 4, MemoryKind::device);
    dev.fill(b, 0, n_floats * 4, kPoison);
    return b;
}

// One sequence's paged KV cache of up to n_ctx rows for a kernel test (Kernels::kKvBlock): key and
// value pools of one spare block more than it needs, poisoned, and a token buffer whose block
// table names the pool's blocks in reverse order (pool block 0 unused), so a kernel that ignored
// the table would read and write the wrong rows.
struct PagedCache {
    Buffer k, v, tok;
    uint32_t blocks = 0;    // the pool's
    size_t pool_words = 0;  // of each pool
    size_t row_words = 0;   // of one row: n_kv heads of F16 pairs
    // The pool row of the sequence's row r.
    size_t row(size_t r) const {
        const size_t b = r / Kernels::kKvBlock;
        return (blocks - 1 - b) * Kernels::kKvBlock + r % Kernels::kKvBlock;
    }
};
inline PagedCache paged_cache(Device& dev, uint32_t n_ctx, uint32_t n_kv, uint32_t head_dim) {
    PagedCache c;
    const uint32_t need = (uint32_t)Kernels::kv_blocks(n_ctx);
    c.blocks = need + 1;
    c.row_words = (size_t)n_kv * head_dim / 2;
    c.pool_words = (size_t)c.blocks * Kernels::kKvBlock * c.row_words;
    c.k = poisoned(dev, c.pool_words);
    c.v = poisoned(dev, c.pool_words);
    const uint64_t tok_bytes = Kernels::tok_bytes(n_ctx);
    c.tok = dev.create_buffer(tok_bytes, MemoryKind::host);
    std::memset(c.tok.mapped(), 0, tok_bytes);
    auto* table = static_cast<uint32_t*>(c.tok.mapped()) + Kernels::kKvTable;
    for (uint32_t b = 0; b < need; ++b) table[b] = c.blocks - 1 - b;
    return c;
}

template <typename T>
std::vector<T> from_device(Device& dev, const Buffer& b, size_t n) {
    std::vector<T> v(n);
    dev.download(b, 0, v.data(), n * sizeof(T));
    return v;
}

inline void run(Device& dev, const std::function<void(CommandList&)>& record) {
    CommandList cl(dev);
    cl.begin();
    record(cl);
    cl.end();
    cl.submit_and_wait();
}

// ||a - b|| / ||b||: one row of logits against its double-precision reference.
inline double rel_err(std::span<const float> a, const std::vector<double>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < b.size(); ++i) {
        const double d = (double)a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return std::sqrt(num / den);
}

inline uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

}  // namespace dl::vk::test
