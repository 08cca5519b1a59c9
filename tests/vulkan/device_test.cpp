// The device layer: feature query, buffers, staging copies both ways, variant choice, and the
// embedded SPIR-V modules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "vk_test.h"
#include "vulkan/buffer_pool.h"

namespace dl::vk {
namespace {

TEST(VulkanDevice, ListsAndDescribesDevices) {
    VK_TEST_DEVICE();
    auto devs = list_devices();
    ASSERT_TRUE(devs.ok()) << devs.reason();
    ASSERT_FALSE(devs->empty());
    std::string s = describe_devices();
    EXPECT_NE(s.find(dev.features().name), std::string::npos) << s;
    EXPECT_NE(s.find("subgroup"), std::string::npos);
}

TEST(VulkanDevice, FeaturesAreQueried) {
    VK_TEST_DEVICE();
    const Features& f = dev.features();
    EXPECT_GE(f.subgroup_size, 1u);
    EXPECT_GE(f.max_shared_memory, 16384u);
    EXPECT_GE(f.max_storage_buffer_range, 1u << 27);
    EXPECT_GT(f.device_local_bytes, 0u);
    EXPECT_TRUE(f.supports(Variant::scalar));
    EXPECT_TRUE(f.supports(dev.variant()));
}

TEST(VulkanDevice, UploadDownloadRoundTripsAcrossStagingChunks) {
    VK_TEST_DEVICE();
    // More than the 16 MiB staging buffer, so the copy is chunked; odd length.
    std::vector<uint32_t> v((17u << 20) / 4 + 3);
    std::iota(v.begin(), v.end(), 12345u);
    Buffer b = test::to_device(dev, v);
    auto back = test::from_device<uint32_t>(dev, b, v.size());
    EXPECT_EQ(back, v);
}

// A buffer given back to the pool serves the next request of its size class and memory kind
// (the same VkBuffer), other classes and kinds get buffers of their own, and no more than `keep`
// of a kind are kept.
TEST(VulkanDevice, BufferPoolReusesAClassAndKeepsABoundedFew) {
    VK_TEST_DEVICE();
    EXPECT_EQ(BufferPool::class_size(1000), 1024u);  // eighths of 512: 64
    EXPECT_EQ(BufferPool::class_size(1024), 1024u);
    EXPECT_EQ(BufferPool::class_size(1025), 1152u);  // eighths of 1024: 128
    EXPECT_EQ(BufferPool::class_size(50'000'000), 50'331'648u);
    for (uint64_t n : {17ull, 999ull, 123457ull, 50'000'000ull}) {
        const uint64_t c = BufferPool::class_size(n);
        EXPECT_GE(c, n);
        EXPECT_LE(c, n + n / 4) << n;  // at most an eighth of a power of two above n
    }
    BufferPool pool(dev, 2);
    Buffer a = pool.take(100'000, MemoryKind::device);
    ASSERT_TRUE(a);
    EXPECT_EQ(a.size(), BufferPool::class_size(100'000));
    const VkBuffer ha = a.handle();
    pool.give(std::move(a), MemoryKind::device);
    EXPECT_EQ(pool.kept(), 1u);
    // A host request of the same size does not take the device buffer.
    Buffer h = pool.take(100'000, MemoryKind::host);
    ASSERT_NE(h.mapped(), nullptr);
    EXPECT_NE(h.handle(), ha);
    // Another size in the same class does.
    Buffer b = pool.take(99'000, MemoryKind::device);
    EXPECT_EQ(b.handle(), ha);
    EXPECT_EQ(pool.kept(), 0u);
    // Three given back of one kind: the oldest is freed.
    Buffer c = pool.take(300'000, MemoryKind::device), d = pool.take(5'000, MemoryKind::device);
    const VkBuffer hc = c.handle(), hd = d.handle();
    pool.give(std::move(b), MemoryKind::device);
    pool.give(std::move(c), MemoryKind::device);
    pool.give(std::move(d), MemoryKind::device);
    pool.give(std::move(h), MemoryKind::host);
    EXPECT_EQ(pool.kept(), 3u);
    // (Handles of freed buffers may be reused by the driver: the kept count says it is new.)
    Buffer e = pool.take(99'000, MemoryKind::device);
    EXPECT_EQ(pool.kept(), 3u);
    EXPECT_EQ(pool.take(300'000, MemoryKind::device).handle(), hc);
    EXPECT_EQ(pool.take(5'000, MemoryKind::device).handle(), hd);
}

// A request takes the smallest kept buffer of its class or above, up to twice its class; a
// buffer more than twice as large stays kept, and the request gets a buffer of its own class.
TEST(VulkanDevice, BufferPoolServesASmallerClassFromTheSmallestFit) {
    VK_TEST_DEVICE();
    BufferPool pool(dev, 4);
    const uint64_t want = BufferPool::class_size(1'000'000);
    Buffer big = pool.take(2 * want, MemoryKind::host);            // twice the class: fits
    Buffer bigger = pool.take(3 * want, MemoryKind::host);         // beyond twice: does not
    Buffer middle = pool.take(want + want / 2, MemoryKind::host);  // fits, and is smaller
    Buffer small = pool.take(want / 2, MemoryKind::host);          // too small
    ASSERT_EQ(big.size(), 2 * want);
    const VkBuffer h_big = big.handle(), h_middle = middle.handle();
    pool.give(std::move(big), MemoryKind::host);
    pool.give(std::move(bigger), MemoryKind::host);
    pool.give(std::move(middle), MemoryKind::host);
    pool.give(std::move(small), MemoryKind::host);
    Buffer a = pool.take(1'000'000, MemoryKind::host);
    EXPECT_EQ(a.handle(), h_middle);
    Buffer b = pool.take(1'000'000, MemoryKind::host);
    EXPECT_EQ(b.handle(), h_big);
    EXPECT_EQ(pool.kept(), 2u);
    Buffer c = pool.take(1'000'000, MemoryKind::host);  // the other two do not fit: a new one
    EXPECT_EQ(c.size(), want);
    EXPECT_EQ(pool.kept(), 2u);
    // A device request never takes a host buffer.
    pool.give(std::move(a), MemoryKind::host);
    EXPECT_EQ(pool.take(1'000'000, MemoryKind::device).size(), want);
    EXPECT_EQ(pool.kept(), 3u);
}

TEST(VulkanDevice, UnknownVariantDeclines) {
    VK_TEST_DEVICE();
    DeviceOptions o;
    o.variant = "tensor_magic";
    auto d = Device::open(o);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.reason().find("tensor_magic"), std::string::npos);
}

TEST(VulkanDevice, MissingDeviceIndexDeclines) {
    VK_TEST_DEVICE();
    DeviceOptions o;
    o.index = 999;
    auto d = Device::open(o);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.reason().find("999"), std::string::npos);
}

TEST(VulkanDevice, EveryBuiltModuleCreatesAPipeline) {
    VK_TEST_DEVICE();
    // The scalar modules must all be accepted by the driver (the coopmat ones by a device that
    // supports them; see the matmul test).
    Pipelines pipes(dev);
    for (const char* m : {"gemv_f32", "gemv_f16", "gemv_q4_0", "gemv_q8_0", "gemv_q4_k",
                          "gemv_q5_k", "gemv_q6_k"}) {
        EXPECT_FALSE(find_module(m).empty()) << m;
        EXPECT_NO_THROW(pipes.get(m, 3, 28, {64, 2})) << m;
    }
    EXPECT_NO_THROW(pipes.get("rms_norm", 3, 28, {64}));
    EXPECT_NO_THROW(pipes.get("swiglu", 3, 16));
    EXPECT_NO_THROW(pipes.get("argmax", 2, 12, {256}));
    EXPECT_FALSE(find_module("matmul_f16@scalar").empty());
    EXPECT_TRUE(find_module("no_such_kernel").empty());
    EXPECT_THROW(pipes.get("no_such_kernel", 1, 0), Error);
}

// A device opened with the validation layer, the device list read meanwhile (an instance of its
// own, without the debug-utils extension, whose entry points the loader then holds), and the
// device closed: it still destroys its messenger, so closing it leaves the layer nothing to
// report (the messenger outliving its device would report its own leak into the freed device).
TEST(VulkanDevice, ClosesItsMessengerAfterAnotherInstanceWasMade) {
    VK_TEST_DEVICE();
    DeviceOptions o;
    o.robust = test::robust();
    o.validation = true;
    auto d = Device::open(o);
    ASSERT_TRUE(d.ok()) << d.reason();
    if (!(*d)->validating()) GTEST_SKIP() << "the validation layer is not installed";
    ASSERT_TRUE(list_devices().ok());
    const int before = Device::validation_errors_all();
    (*d).reset();
    EXPECT_EQ(Device::validation_errors_all(), before);
}

// Two devices in one process, one with the validation layer and one without (so their device
// functions differ: the layer's and the driver's), each used after the other was opened and
// after the other was closed: every call reaches its own device, the results are right and the
// layer reports nothing.
TEST(VulkanDevice, DevicesWithAndWithoutTheLayerInOneProcess) {
    VK_TEST_DEVICE();
    DeviceOptions plain;
    plain.robust = test::robust();
    plain.validation = false;
    DeviceOptions layered = plain;
    layered.validation = true;
    auto a = Device::open(plain);
    ASSERT_TRUE(a.ok()) << a.reason();
    auto b = Device::open(layered);
    ASSERT_TRUE(b.ok()) << b.reason();
    if (!(*b)->validating()) GTEST_SKIP() << "the validation layer is not installed";
    ASSERT_FALSE((*a)->validating());
    const int before = Device::validation_errors_all();
    // SwiGLU of 1000 values on a device: y = silu(g) * u, checked against the host.
    auto run = [](Device& d, float scale) {
        constexpr uint32_t n = 1000;
        std::vector<float> g(n), u(n);
        for (uint32_t i = 0; i < n; ++i) {
            g[i] = scale * (float(i % 17) - 8.0f) / 4.0f;
            u[i] = float(i % 5) - 2.0f;
        }
        Buffer gb = test::to_device(d, g), ub = test::to_device(d, u), yb = test::poisoned(d, n);
        Pipelines pipes(d);
        Kernels K(d, pipes);
        test::run(d,
                  [&](CommandList& cl) { K.swiglu(cl, view(gb), 0, view(ub), 0, view(yb), 0, n); });
        const std::vector<float> y = test::from_device<float>(d, yb, n);
        for (uint32_t i = 0; i < n; ++i) {
            const float want = g[i] / (1.0f + std::exp(-g[i])) * u[i];
            ASSERT_NEAR(y[i], want, 1e-5f * (1.0f + std::fabs(want))) << d.name() << " value " << i;
        }
    };
    run(**a, 1.0f);
    run(**b, 2.0f);
    run(**a, 3.0f);
    (*b).reset();
    run(**a, 4.0f);
    EXPECT_EQ(Device::validation_errors_all(), before);
}

// The driver's own bounds checks are left out of the pipelines exactly where the device offers
// VK_EXT_pipeline_robustness and neither robustBufferAccess nor DELTALLM_VK_BOUNDS_CHECKS asks
// for checks; the pipelines are created either way.
TEST(VulkanDevice, BoundsChecksAreLeftOutOnlyWhereTheDeviceAllows) {
    VK_TEST_DEVICE();
    const bool can = dev.features().pipeline_robustness;
    for (int robust = 0; robust < 2; ++robust)
        for (int checks = 0; checks < 2; ++checks) {
            DeviceOptions o;
            o.robust = robust;
            o.bounds_checks = checks;
            auto d = Device::open(o);
            ASSERT_TRUE(d.ok()) << d.reason();
            EXPECT_EQ((*d)->unchecked_buffers(), can && !robust && !checks)
                << "robust " << robust << ", bounds checks " << checks;
            Pipelines pipes(**d);
            EXPECT_NO_THROW(pipes.get("gemv_q4_k", 3, 28, {64, 2}));
        }
}

// A wait for a submitted command polls its fence for DeviceOptions::wait_spin_us, then blocks:
// never (0), at once after a poll that finds the work unfinished (1 us), or not at all for work
// shorter than the poll (a second). Each wait returns with the command's writes done.
TEST(VulkanDevice, WaitsForEveryCommandWhetherItPollsOrBlocks) {
    VK_TEST_DEVICE();
    for (int64_t spin : {int64_t{0}, int64_t{1}, int64_t{1000000}}) {
        DeviceOptions o;
        o.wait_spin_us = spin;
        auto d = Device::open(o);
        ASSERT_TRUE(d.ok()) << d.reason();
        Device& dv = **d;
        // 24 MiB: more than one staging chunk, so each upload and download is several waits.
        const size_t n = (24u << 20) / 4;
        Buffer b = dv.create_buffer(n * 4, MemoryKind::device);
        for (uint32_t round = 0; round < 3; ++round) {
            const uint32_t word = 0x01010101u * (round + 1) + (uint32_t)spin;
            dv.fill(b, 0, n * 4, word);
            std::vector<uint32_t> v(n);
            dv.download(b, 0, v.data(), n * 4);
            ASSERT_EQ(std::count(v.begin(), v.end(), word), (std::ptrdiff_t)n)
                << "spin " << spin << ", round " << round;
        }
    }
}

TEST(VulkanDevice, ANegativePollTimeIsRefused) {
    const char* was = std::getenv("DELTALLM_VK_WAIT_SPIN_US");
    const std::string saved = was ? was : "";
    setenv("DELTALLM_VK_WAIT_SPIN_US", "-5", 1);
    EXPECT_THROW(DeviceOptions::from_env(), Error);
    if (was)
        setenv("DELTALLM_VK_WAIT_SPIN_US", saved.c_str(), 1);
    else
        unsetenv("DELTALLM_VK_WAIT_SPIN_US");
    EXPECT_EQ(DeviceOptions::from_env().wait_spin_us, was ? std::stoll(saved) : 20000);
}

// DELTALLM_VK_KERNEL_STATS: on a device that can report them, every pipeline carries what the
// driver's compiler says of it; elsewhere the option changes nothing.
TEST(VulkanDevice, KernelStatisticsWhereTheDeviceReportsThem) {
    VK_TEST_DEVICE();
    Pipelines pipes(dev);
    const Kernel& k = pipes.get("rms_norm", 3, 28, {64});
    EXPECT_EQ(dev.kernel_stats(),
              DeviceOptions::from_env().kernel_stats && dev.features().pipeline_statistics);
    if (!dev.kernel_stats()) {
        EXPECT_TRUE(k.statistics.empty()) << k.statistics;
        return;
    }
    EXPECT_FALSE(k.statistics.empty());
    EXPECT_EQ(k.statistics.find("no statistics"), std::string::npos) << k.statistics;
}

// A command queued in parts as it is recorded (CommandList::submit_early), as a prefill window's
// is on first use: a chain of SwiGLUs, each reading the one before, one part each. The first run
// queues only the last part at its end; a replay queues every part again, in order; each value of
// every link is written (the outputs poisoned) and equals the host's chain.
TEST(VulkanCommandList, PartsQueuedWhileRecordingRunInOrderAndReplay) {
    VK_TEST_DEVICE();
    constexpr uint32_t n = 777, links = 5;
    std::vector<std::vector<float>> u(links, std::vector<float>(n));
    for (uint32_t l = 0; l < links; ++l)
        for (uint32_t i = 0; i < n; ++i) u[l][i] = 0.5f + float((i * 7 + l * 3) % 11) / 8.0f;
    auto chain = [&](const std::vector<float>& x) {
        std::vector<std::vector<float>> y(links, std::vector<float>(n));
        for (uint32_t l = 0; l < links; ++l)
            for (uint32_t i = 0; i < n; ++i) {
                const float g = l == 0 ? x[i] : y[l - 1][i];
                y[l][i] = g / (1.0f + std::exp(-g)) * u[l][i];
            }
        return y;
    };
    std::vector<float> x(n);
    for (uint32_t i = 0; i < n; ++i) x[i] = (float(i % 13) - 6.0f) / 3.0f;
    Buffer xb = test::to_device(dev, x);
    std::vector<Buffer> ub, yb;
    for (uint32_t l = 0; l < links; ++l) {
        ub.push_back(test::to_device(dev, u[l]));
        yb.push_back(test::poisoned(dev, n));
    }
    auto check = [&](const std::vector<float>& input, const char* what) {
        const auto want = chain(input);
        for (uint32_t l = 0; l < links; ++l) {
            const auto y = test::from_device<float>(dev, yb[l], n);
            for (uint32_t i = 0; i < n; ++i)
                ASSERT_NEAR(y[i], want[l][i], 1e-5f * (1.0f + std::fabs(want[l][i])))
                    << what << ", link " << l << ", value " << i;
        }
    };
    {
        CommandList cl(dev);
        cl.begin(true);
        for (uint32_t l = 0; l < links; ++l) {
            K.swiglu(cl, view(l == 0 ? xb : yb[l - 1]), 0, view(ub[l]), 0, view(yb[l]), 0, n);
            cl.barrier();
            if (l + 1 < links) cl.submit_early();
        }
        cl.host_barrier();
        cl.end();
        EXPECT_EQ(cl.n_parts(), links);
        cl.submit_and_wait();
        check(x, "first run");
        for (auto& v : x) v = -0.75f * v + 0.25f;
        dev.upload(xb, 0, x.data(), n * 4);
        for (const Buffer& b : yb) dev.fill(b, 0, n * 4, test::kPoison);
        cl.submit_and_wait();
        check(x, "replay");
        for (auto& v : x) v = 0.5f * v - 1.0f;
        dev.upload(xb, 0, x.data(), n * 4);
        for (const Buffer& b : yb) dev.fill(b, 0, n * 4, test::kPoison);
        cl.submit_and_wait();
        check(x, "second replay");
    }
    // Destroyed with parts queued and never waited for (a recording that failed part way): the
    // queued parts still complete, and nothing of them is freed while they run.
    for (auto& v : x) v = 1.25f * v;
    dev.upload(xb, 0, x.data(), n * 4);
    for (const Buffer& b : yb) dev.fill(b, 0, n * 4, test::kPoison);
    {
        CommandList cl(dev);
        cl.begin(true);
        for (uint32_t l = 0; l < links; ++l) {
            K.swiglu(cl, view(l == 0 ? xb : yb[l - 1]), 0, view(ub[l]), 0, view(yb[l]), 0, n);
            cl.barrier();
            cl.submit_early();
        }
    }
    check(x, "queued parts of a command never finished");
}

}  // namespace
}  // namespace dl::vk
