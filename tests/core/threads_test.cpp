// The thread pool visits every task exactly once, over many back-to-back runs.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/threads.h"

namespace dl {

TEST(ThreadPool, EveryTaskOnceManyTimes) {
    ThreadPool pool(4);
    std::vector<std::atomic<int>> hits(1000);
    for (int round = 0; round < 200; ++round) {
        pool.run(1000, [&](int64_t i, int t) {
            ASSERT_GE(t, 0);
            ASSERT_LT(t, 4);
            hits[i].fetch_add(1);
        });
    }
    for (auto& h : hits) EXPECT_EQ(h.load(), 200);
}

TEST(ThreadPool, RangesCoverExactly) {
    ThreadPool pool(3);
    for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
        std::vector<int> seen(n, 0);
        pool.for_range(n, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i) seen[i]++;
        });
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << n << " " << i;
    }
}

}  // namespace dl
