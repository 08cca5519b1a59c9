// The server's Prometheus metrics: token and request totals from the scheduler, latency
// histograms kept here, rendered in Prometheus' text format for GET /metrics.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/scheduler.h"

namespace dl::server {

class Histogram {
  public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double x);
    // The _bucket, _sum and _count lines of a histogram named `name`.
    std::string render(const std::string& name, const std::string& help) const;

  private:
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;  // per bucket (not cumulative), the last for +Inf
    double sum_ = 0;
    uint64_t count_ = 0;
    mutable std::mutex mutex_;
};

// HTTP connections open now, and those closed for sending no whole request in time.
struct ConnectionCounts {
    size_t open = 0;
    uint64_t cut_off = 0;
};

class Metrics {
  public:
    Metrics();
    // A request that ended: its whole time, time to first token (when it made one), and the
    // time per output token after the first.
    void record(const GenerationEvent& done);
    void count_request(int status);
    // A chat's next turn warmed (ServerOptions::warm_next_turn), with the prompt tokens it holds;
    // or its warm-up given up for the next turn that came first (superseded).
    void count_warmup(int64_t tokens, bool superseded);
    std::string render(const SchedulerStats& s, ConnectionCounts c = {}) const;

  private:
    Histogram latency_, ttft_, tpot_, queue_;
    mutable std::mutex mutex_;
    uint64_t ok_ = 0, client_errors_ = 0, server_errors_ = 0;
    uint64_t warmups_ = 0, warmup_tokens_ = 0, warmups_superseded_ = 0;
};

}  // namespace dl::server
