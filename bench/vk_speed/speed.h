// What the Vulkan speed reports share: their own device (opened as the driver opens it), the
// timing of a recorded command on the device, and the other work a kernel is timed after to run
// it cold. The reports print times; they are not tests of correctness (those are in
// tests/vulkan, whose fixture, vk_test.h, they build on), though each still checks the outputs
// of its last run so that a fast but wrong kernel fails.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "vk_test.h"

namespace dl::vk::test {

// The speed reports' device: one of their own, opened as the driver opens it, since the shared
// test device checks bounds on every access (robustBufferAccess), which a real run does not.
struct SpeedEnv {
    std::unique_ptr<Device> dev;
    std::unique_ptr<Pipelines> pipes;
    std::unique_ptr<Kernels> kernels;
    std::string skip, error;  // why there is no device: a reason to skip, or a failure
};

inline SpeedEnv speed_env() {
    SpeedEnv s;
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

// `run` repeated untimed until a quarter of a second has passed (at most 200 times; never on a
// CPU device, whose clock does not wait to rise).
inline void warm_up(Device& dev, const std::function<void()>& run) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int warm = 0; warm < 200 && !dev.features().cpu &&
                       std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(250);
         ++warm)
        run();
}

// A speed report's recorded command, timed: first submitted untimed until a quarter of a second
// has passed (at most 200 times; a GPU left idle, as by the uploads before a report's rows, runs
// at a lower clock for a while, and three submissions of a few milliseconds would be timed
// there), then the best of three submissions in milliseconds, by its first mark (the whole
// command where it is timed whole). Without device timestamps: 0, or the host's clock around the
// submission where `wall` is asked for.
inline double best_of_three_ms(Device& dev, CommandList& cl, bool wall = false) {
    warm_up(dev, [&] { cl.submit_and_wait(); });
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

// A rows x cols matrix of type t on the device whose rows repeat `distinct` distinct quantized
// rows (a multiple of 32: whole tiles of the device's layout; rows a multiple of 32 too), with
// those rows dequantized for the reference: row r is deq's row r % distinct.
struct RepeatedMatrix {
    Buffer w;
    std::vector<float> deq;  // `distinct` rows
    uint64_t row_bytes = 0;
    uint32_t distinct = 0;
    const float* row(uint64_t r) const {
        return deq.data() + (r % distinct) * (deq.size() / distinct);
    }
};
inline RepeatedMatrix repeated_rows(Device& dev, QType t, uint32_t rows, uint32_t cols,
                                    std::mt19937& rng, uint32_t distinct = 64) {
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> wf((size_t)distinct * cols);
    for (float& v : wf) v = nd(rng);
    auto [wq, deq] = quantize_rows(t, wf, distinct, cols);
    RepeatedMatrix m;
    m.row_bytes = row_size(t, cols);
    m.distinct = distinct;
    std::vector<uint8_t> all((m.row_bytes * rows + 3) / 4 * 4 + 4, 0);
    for (uint32_t r = 0; r < rows; ++r)
        std::copy_n(wq.data() + (r % distinct) * m.row_bytes, m.row_bytes,
                    all.data() + r * m.row_bytes);
    m.w = to_device(dev, all);
    m.deq = std::move(deq);
    return m;
}

// Speed reports: `runs` recordings of `record`, a barrier after each, timed on the device in one
// command (best_of_three_ms), in milliseconds a run (0 without timestamps).
inline double device_ms_per_run(Device& dev, uint32_t runs,
                                const std::function<void(CommandList&)>& record) {
    CommandList cl(dev);
    // The whole command, not to a first mark: a kernel's launcher may mark stretches of its own
    // (the window attention's after its preparation; timed to that, a report measured the
    // preparation alone).
    cl.enable_timestamps(1, false);
    cl.begin(true);
    for (uint32_t i = 0; i < runs; ++i) {
        record(cl);
        cl.barrier();
    }
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
    // "after itself A, after a stream over N MiB B, after G GEMVs C, after both D", us, after
    // a quarter of a second of the same work untimed (a device left idle runs slowly for a
    // while: one warm-up pass left a process's first lines up to 2x slow on an H100).
    std::string report(uint32_t rounds, const std::function<void(CommandList&)>& record) {
        auto stream = [&](CommandList& cl) { this->stream(cl); };
        auto gemvs = [&](CommandList& cl) { this->gemvs(cl); };
        us_after(rounds, stream, record);
        warm_up(dev_, [&] { us_after(rounds, stream, record); });
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

}  // namespace dl::vk::test
