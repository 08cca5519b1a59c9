// Prometheus text for GET /metrics.
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace dl::server {
namespace {

TEST(Metrics, HistogramBucketsAreCumulativeWithSumAndCount) {
    Histogram h({0.1, 1});
    for (double x : {0.05, 0.5, 0.7, 3.0}) h.observe(x);
    const std::string t = h.render("lat_seconds", "latency");
    EXPECT_NE(t.find("# TYPE lat_seconds histogram\n"), std::string::npos);
    EXPECT_NE(t.find("lat_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << t;
    EXPECT_NE(t.find("lat_seconds_bucket{le=\"1\"} 3\n"), std::string::npos) << t;
    EXPECT_NE(t.find("lat_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << t;
    EXPECT_NE(t.find("lat_seconds_sum 4.25\n"), std::string::npos) << t;
    EXPECT_NE(t.find("lat_seconds_count 4\n"), std::string::npos) << t;
}

TEST(Metrics, RendersTheSchedulerTotalsAndGauges) {
    Metrics m;
    GenerationEvent done;
    done.kind = GenerationEvent::Kind::done;
    done.total_seconds = 0.5;
    done.first_token_seconds = 0.25;
    done.generated_tokens = 5;
    m.record(done);
    m.count_request(200);
    m.count_request(404);
    SchedulerStats s;
    s.prompt_tokens = 120;
    s.generated_tokens = 5;
    s.cached_tokens = 64;
    s.running = 2;
    s.queued = 1;
    s.cache_bytes = 4096;
    s.cache_entries = 3;
    s.steps = 9;
    s.prompt_steps = 4;
    s.step_seconds = 1.5;
    s.prompt_step_seconds = 1.25;
    s.snapshot_seconds = 0.5;
    s.snapshots = 7;
    s.spills = 2;
    s.spill_seconds = 0.25;
    s.cache_budget = 1 << 20;
    const std::string t = m.render(s);
    for (const char* line : {"deltallm_prompt_tokens_total 120\n",
                             "deltallm_generated_tokens_total 5\n",
                             "deltallm_prefix_cache_hit_tokens_total 64\n",
                             "deltallm_requests_running 2\n",
                             "deltallm_requests_queued 1\n",
                             "deltallm_prefix_cache_bytes 4096\n",
                             "deltallm_prefix_cache_entries 3\n",
                             "deltallm_steps_total 9\n",
                             "deltallm_prompt_steps_total 4\n",
                             "deltallm_step_seconds_total 1.5\n",
                             "deltallm_prompt_step_seconds_total 1.25\n",
                             "deltallm_snapshot_seconds_total 0.5\n",
                             "deltallm_snapshots_total 7\n",
                             "deltallm_snapshot_spills_total 2\n",
                             "deltallm_snapshot_spill_seconds_total 0.25\n",
                             "deltallm_prefix_cache_budget_bytes 1048576\n",
                             "deltallm_http_requests_total{class=\"4xx\"} 1\n",
                             "deltallm_request_duration_seconds_count 1\n",
                             "deltallm_time_to_first_token_seconds_count 1\n",
                             "deltallm_time_per_output_token_seconds_sum 0.0625\n"})
        EXPECT_NE(t.find(line), std::string::npos) << line << "\n" << t;
    // Every sample line is "name{labels} value"; every metric has HELP and TYPE.
    size_t helps = 0, types = 0;
    for (size_t pos = 0; pos < t.size();) {
        size_t eol = t.find('\n', pos);
        std::string line = t.substr(pos, eol - pos);
        pos = eol + 1;
        if (line.rfind("# HELP ", 0) == 0) ++helps;
        if (line.rfind("# TYPE ", 0) == 0) ++types;
        if (line[0] != '#') {
            EXPECT_EQ(std::count(line.begin(), line.end(), ' '), 1) << line;
        }
    }
    EXPECT_EQ(helps, types);
    EXPECT_GE(helps, 14u);
}

}  // namespace
}  // namespace dl::server
