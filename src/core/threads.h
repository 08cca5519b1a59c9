// A fixed pool of worker threads for data-parallel loops on the hot path: run(n, fn) calls
// fn(i) for i in [0, n) spread over the pool (the calling thread takes part) and returns when all
// are done. No allocation per call; workers spin briefly, then sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace dl {

class ThreadPool {
  public:
    // More threads than any machine deltallm runs on has cores; beyond it a count is a mistake.
    static constexpr int kMaxThreads = 4096;

    // n_threads 0: DELTALLM_THREADS, else one per core. Throws dl::Error for a count outside
    // [0, kMaxThreads] or when the system refuses to start the threads.
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(task, thread) for every task in [0, n_tasks); thread is in [0, size()).
    template <typename Fn>
    void run(int64_t n_tasks, Fn&& fn) {
        if (n_tasks <= 0) return;
        if (n_threads_ == 1 || n_tasks == 1) {
            for (int64_t i = 0; i < n_tasks; ++i) fn(i, 0);
            return;
        }
        using F = std::remove_reference_t<Fn>;
        run_erased(n_tasks, &fn,
                   [](void* ctx, int64_t i, int t) { (*static_cast<F*>(ctx))(i, t); });
    }

    // Splits [0, n) into contiguous ranges, one call fn(begin, end, thread) per range.
    template <typename Fn>
    void for_range(int64_t n, Fn&& fn, int64_t min_chunk = 1) {
        if (n <= 0) return;
        int64_t chunks = std::min<int64_t>(n_threads_, (n + min_chunk - 1) / min_chunk);
        int64_t per = (n + chunks - 1) / chunks;
        run(chunks, [&](int64_t c, int t) {
            int64_t b = c * per, e = std::min(n, b + per);
            if (b < e) fn(b, e, t);
        });
    }

    // The process-wide pool used by the CPU chain.
    static ThreadPool& global();
    static void set_global_threads(int n);

  private:
    using Thunk = void (*)(void*, int64_t, int);
    void run_erased(int64_t n_tasks, void* ctx, Thunk thunk);
    void worker(int index);
    void work(int thread);
    void stop_workers();

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int64_t> next_{0};
    std::atomic<int> active_{0};
    int64_t n_tasks_ = 0;
    void* ctx_ = nullptr;
    Thunk thunk_ = nullptr;
    std::atomic<bool> stop_{false};
};

}  // namespace dl
