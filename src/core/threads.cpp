// The worker pool.
#include "core/threads.h"

#include <cstring>
#include <memory>
#include <system_error>

#include "core/env.h"
#include "core/error.h"

namespace dl {

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads < 0 || n_threads > kMaxThreads)
        fail("the number of threads must be 0 (one per core) to {}, not {}", kMaxThreads,
             n_threads);
    if (n_threads == 0) {
        const int64_t env_threads = env::get_int("DELTALLM_THREADS");
        if (env_threads < 0 || env_threads > kMaxThreads)
            fail("DELTALLM_THREADS must be 0 (one per core) to {}, not {}", kMaxThreads,
                 env_threads);
        n_threads = static_cast<int>(env_threads);
    }
    if (n_threads == 0)
        n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    try {
        for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
    } catch (const std::system_error& e) {
        // The system's thread limit: the workers already started must be joined before the
        // error leaves the constructor, or their std::thread objects would terminate the process.
        const size_t started = workers_.size();
        stop_workers();
        fail("cannot start {} threads (the system allowed {}): {}", n_threads_, started + 1,
             e.what());
    }
}

ThreadPool::~ThreadPool() {
    stop_workers();
}

void ThreadPool::stop_workers() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
}

void ThreadPool::work(int thread) {
    for (;;) {
        int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
        if (i >= n_tasks_) break;
        thunk_(ctx_, i, thread);
    }
}

void ThreadPool::run_erased(int64_t n_tasks, void* ctx, Thunk thunk) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        n_tasks_ = n_tasks;
        ctx_ = ctx;
        thunk_ = thunk;
        next_.store(0);
        active_.store(n_threads_ - 1);
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    work(0);
    // Wait for the workers to finish their last task.
    for (int spins = 0; active_.load(std::memory_order_acquire) > 0; ++spins)
        if (spins > 1000) std::this_thread::yield();
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        uint64_t g;
        // Spin a little before sleeping: decode issues many short loops back to back.
        int spins = 0;
        while ((g = generation_.load(std::memory_order_acquire)) == seen && spins < 20000) ++spins;
        if (g == seen) {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load() != seen; });
            g = generation_.load();
        }
        seen = g;
        // stop_ is set before the generation bump that woke us, so no lock is needed here.
        if (stop_.load(std::memory_order_acquire)) return;
        work(index);
        active_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

namespace {
std::unique_ptr<ThreadPool>& global_slot() {
    static std::unique_ptr<ThreadPool> pool;
    return pool;
}
}  // namespace

ThreadPool& ThreadPool::global() {
    auto& p = global_slot();
    if (!p) p = std::make_unique<ThreadPool>();
    return *p;
}

void ThreadPool::set_global_threads(int n) {
    global_slot() = std::make_unique<ThreadPool>(n);
}

}  // namespace dl
