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
        DeviceOptions o = DeviceOptions::from_env();
        o.robust = ::dl::vk::test::robust();
        // CTest runs every test in its own process: share compiled pipelines through the scratch
        // dir.
        const char* tmp = std::getenv("DELTALLM_TEST_TMP");
        o.pipeline_cache_dir = tmp ? std::string(tmp) + "/vk_pipeline_cache" : "";
        auto d = Device::open(o);
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

// The speed reports (run only with DELTALLM_VK_SPEED=1): a device of their own, opened as the
// driver opens it, since the shared test device checks bounds on every access
// (robustBufferAccess), which a real run does not.
struct SpeedEnv {
    std::unique_ptr<Device> dev;
    std::unique_ptr<Pipelines> pipes;
    std::unique_ptr<Kernels> kernels;
    std::string skip, error;  // why there is no device: a reason to skip, or a failure
};

inline SpeedEnv speed_env() {
    SpeedEnv s;
    if (!::dl::env::get_bool("DELTALLM_VK_SPEED")) {
        s.skip = "set DELTALLM_VK_SPEED=1 to run";
        return s;
    }
    Env& e = env();  // also points the loader at lavapipe when no driver is named
    if (!e.dev) {
        s.skip = "no Vulkan device: " + e.decline;
        return s;
    }
    DeviceOptions o = DeviceOptions::from_env();
    o.robust = false;
    o.pipeline_cache_dir = "";
    auto d = Device::open(o);
    if (!d) {
        s.error = d.reason();
        return s;
    }
    s.dev = std::move(*d);
    s.pipes = std::make_unique<Pipelines>(*s.dev);
    s.kernels = std::make_unique<Kernels>(*s.dev, *s.pipes);
    return s;
}

#define VK_SPEED_DEVICE()                                  \
    auto S = ::dl::vk::test::speed_env();                  \
    if (!S.dev && !S.skip.empty()) GTEST_SKIP() << S.skip; \
    ASSERT_TRUE(S.dev) << S.error;                         \
    Device& dev = *S.dev;                                  \
    Kernels& K = *S.kernels;                               \
    (void)dev;                                             \
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

inline Buffer poisoned(Device& dev, size_t n_floats) {
    Buffer b = dev.create_buffer(n_floats * 4, MemoryKind::device);
    dev.fill(b, 0, n_floats * 4, kPoison);
    return b;
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

// A speed report's recorded command, timed: first submitted untimed until a quarter of a second
// has passed (at most 200 times; a GPU left idle, as by the uploads before a report's rows, runs
// at a lower clock for a while, and three submissions of a few milliseconds would be timed
// there), then the best of three submissions in milliseconds, by its first mark. Without device
// timestamps: 0, or the host's clock around the submission where `wall` is asked for.
inline double best_of_three_ms(Device& dev, CommandList& cl, bool wall = false) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int warm = 0; warm < 200 && !dev.features().cpu &&
                       std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(250);
         ++warm)
        cl.submit_and_wait();
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        const auto t1 = std::chrono::steady_clock::now();
        cl.submit_and_wait();
        const double host_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1)
                .count();
        auto ts = cl.times();
        if (!ts.empty())
            best = std::min(best, ts[0].second);
        else if (wall)
            best = std::min(best, host_ms);
    }
    return best < 1e30 ? best : 0.0;
}

// Speed reports: `runs` recordings of `record`, a barrier after each, timed on the device in one
// command (best_of_three_ms), in milliseconds a run (0 without timestamps).
inline double device_ms_per_run(Device& dev, uint32_t runs,
                                const std::function<void(CommandList&)>& record) {
    CommandList cl(dev);
    cl.enable_timestamps(1);
    cl.begin(true);
    for (uint32_t i = 0; i < runs; ++i) {
        record(cl);
        cl.barrier();
    }
    cl.mark("runs");
    cl.end();
    return best_of_three_ms(dev, cl) / runs;
}

// Work run before a timed kernel so that it runs cold, as in a decode token, where a kernel
// that runs once every few layers follows hundreds of megabytes of weights and dozens of
// other kernels' dispatches: a stream over a buffer larger than the L2 (a small kernel: the L2
// loses everything it held), and GEMVs of every block type the token command reads over
// 4096-row matrices (their code on every multiprocessor, 5 MB of data).
class OtherWork {
  public:
    OtherWork(Device& dev, Kernels& K) : dev_(dev), K_(K) {
        const bool cpu = dev.features().cpu;
        stream_bytes_ = cpu ? (4ull << 20) : (256ull << 20);
        big_ = dev.create_buffer(stream_bytes_, MemoryKind::device);
        dev.fill(big_, 0, stream_bytes_, 0x3c003c00u);
        sink_ = dev.create_buffer((uint64_t)K.stream_read_groups(stream_bytes_) * 4 + 256,
                                  MemoryKind::device);
        rows_ = cpu ? 64 : 4096;
        for (QType t :
             {QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::Q8_0, QType::Q4_0, QType::F16}) {
            if (!Kernels::gemv_supports(t)) continue;
            std::vector<uint8_t> w(row_size(t, kCols) * rows_);
            std::mt19937 rng(5);
            for (auto& v : w) v = (uint8_t)(rng() & 0x3b);  // F16 halves stay finite
            mats_.emplace_back(t, dev.create_buffer(w.size(), MemoryKind::device));
            dev.upload(mats_.back().second, 0, w.data(), w.size());
        }
        std::vector<float> x(kCols, 0.5f);
        gx_ = dev.create_buffer(kCols * 4, MemoryKind::device);
        dev.upload(gx_, 0, x.data(), kCols * 4);
        gy_ = dev.create_buffer((uint64_t)rows_ * 4, MemoryKind::device);
    }
    void stream(CommandList& cl) { K_.stream_read(cl, view(big_), stream_bytes_, view(sink_), 0); }
    void gemvs(CommandList& cl) {
        for (auto& [t, w] : mats_) {
            K_.gemv(cl, {.type = t,
                         .w = view(w),
                         .rows = rows_,
                         .cols = kCols,
                         .x = view(gx_),
                         .x_off = 0,
                         .y = view(gy_),
                         .y_off = 0,
                         .accumulate = false});
            cl.barrier();
        }
    }
    // us of record's stretch (between two marks, a timestamp's cost in every row alike), run
    // `rounds` times after `before` (none: right after itself); the best of three submissions.
    double us_after(uint32_t rounds, const std::function<void(CommandList&)>& before,
                    const std::function<void(CommandList&)>& record) {
        CommandList cl(dev_);
        cl.enable_timestamps(2 * rounds + 2);
        cl.begin(true);
        for (uint32_t r = 0; r < rounds; ++r) {
            if (before) before(cl);
            cl.barrier();
            cl.mark("before");
            record(cl);
            cl.barrier();
            cl.mark("timed");
        }
        cl.end();
        double best = 1e30;
        for (int rep = 0; rep < 3; ++rep) {
            cl.submit_and_wait();
            double sum = 0;
            for (const auto& [label, ms] : cl.times())
                if (label == "timed") sum += ms;
            best = std::min(best, sum);
        }
        return best * 1e3 / rounds;
    }
    // "after itself A, after a stream over N MiB B, after G GEMVs C, after both D", us, with a
    // warm-up first (a device left idle runs slowly for a while).
    std::string report(uint32_t rounds, const std::function<void(CommandList&)>& record) {
        auto stream = [&](CommandList& cl) { this->stream(cl); };
        auto gemvs = [&](CommandList& cl) { this->gemvs(cl); };
        us_after(rounds, stream, record);
        const double self = us_after(rounds, nullptr, record);
        const double streamed = us_after(rounds, stream, record);
        const double other = us_after(rounds, gemvs, record);
        const double both = us_after(
            rounds,
            [&](CommandList& cl) {
                this->stream(cl);
                cl.barrier();
                this->gemvs(cl);
            },
            record);
        return fmt::format(
            "after itself {:.1f}, after a stream over {} MiB {:.1f}, after {} GEMVs {:.1f}, "
            "after both {:.1f}",
            self, stream_bytes_ >> 20, streamed, mats_.size(), other, both);
    }

  private:
    static constexpr uint32_t kCols = 256;
    Device& dev_;
    Kernels& K_;
    uint64_t stream_bytes_ = 0;
    uint32_t rows_ = 0;
    Buffer big_, sink_, gx_, gy_;
    std::vector<std::pair<QType, Buffer>> mats_;
};

inline uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

}  // namespace dl::vk::test
