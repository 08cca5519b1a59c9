// Prometheus text format for the server's metrics.
#include "server/metrics.h"

#include <fmt/format.h>

namespace dl::server {

namespace {

std::string number(double x) {
    return fmt::format("{}", x);
}

void gauge(std::string& out, const char* type, const char* name, const char* help, double v) {
    out +=
        fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, number(v));
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double x) {
    size_t i = 0;
    while (i < bounds_.size() && x > bounds_[i]) ++i;
    std::lock_guard lock(mutex_);
    ++counts_[i];
    sum_ += x;
    ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
    std::lock_guard lock(mutex_);
    std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, number(bounds_[i]), cumulative);
    }
    cumulative += counts_.back();
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
    out += fmt::format("{}_sum {}\n{}_count {}\n", name, number(sum_), name, count_);
    return out;
}

Metrics::Metrics()
    : latency_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}),
      ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      queue_({0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}) {}

void Metrics::record(const GenerationEvent& d) {
    latency_.observe(d.total_seconds);
    queue_.observe(d.queue_seconds);
    if (d.generated_tokens > 0) ttft_.observe(d.first_token_seconds);
    if (d.generated_tokens > 1)
        tpot_.observe((d.total_seconds - d.first_token_seconds) / double(d.generated_tokens - 1));
}

void Metrics::count_warmup(int64_t tokens, bool superseded) {
    std::lock_guard lock(mutex_);
    if (superseded) {
        ++warmups_superseded_;
        return;
    }
    ++warmups_;
    warmup_tokens_ += (uint64_t)tokens;
}

void Metrics::count_request(int status) {
    std::lock_guard lock(mutex_);
    if (status < 400)
        ++ok_;
    else if (status < 500)
        ++client_errors_;
    else
        ++server_errors_;
}

std::string Metrics::render(const SchedulerStats& s, ConnectionCounts c) const {
    std::string out;
    gauge(out, "counter", "deltallm_prompt_tokens_total", "Prompt tokens read (prefilled).",
          (double)s.prompt_tokens);
    gauge(out, "counter", "deltallm_generated_tokens_total", "Tokens generated.",
          (double)s.generated_tokens);
    gauge(out, "counter", "deltallm_prefix_cache_hit_tokens_total",
          "Prompt tokens restored from the prefix cache instead of prefilled.",
          (double)s.cached_tokens);
    gauge(out, "counter", "deltallm_requests_finished_total", "Generation requests finished.",
          (double)s.requests_done);
    gauge(out, "counter", "deltallm_steps_total", "Batched steps run.", (double)s.steps);
    gauge(out, "counter", "deltallm_step_seconds_total", "Time the executor's steps took.",
          s.step_seconds);
    gauge(out, "counter", "deltallm_prompt_steps_total", "Steps that carried a prompt chunk.",
          (double)s.prompt_steps);
    gauge(out, "counter", "deltallm_prompt_step_seconds_total",
          "Time the steps that carried a prompt chunk took.", s.prompt_step_seconds);
    gauge(out, "counter", "deltallm_snapshot_seconds_total",
          "Time the prefix cache's snapshots after the steps took.", s.snapshot_seconds);
    gauge(out, "counter", "deltallm_snapshots_total", "Snapshots the prefix cache took.",
          (double)s.snapshots);
    gauge(out, "counter", "deltallm_snapshot_spills_total",
          "Snapshots the prefix cache moved to host memory.", (double)s.spills);
    gauge(out, "counter", "deltallm_snapshot_spill_seconds_total",
          "Time moving snapshots to host memory took (part of the snapshots' time).",
          s.spill_seconds);
    gauge(out, "gauge", "deltallm_requests_running", "Requests generating now.", (double)s.running);
    gauge(out, "gauge", "deltallm_requests_queued", "Requests waiting for a slot.",
          (double)s.queued);
    gauge(out, "gauge", "deltallm_prefix_cache_bytes", "Bytes held by the prefix cache.",
          (double)s.cache_bytes);
    gauge(out, "gauge", "deltallm_prefix_cache_entries", "Snapshots held by the prefix cache.",
          (double)s.cache_entries);
    gauge(out, "gauge", "deltallm_prefix_cache_host_bytes",
          "Bytes of prefix-cache snapshots moved to host memory.", (double)s.cache_host_bytes);
    gauge(out, "gauge", "deltallm_prefix_cache_budget_bytes",
          "Bytes the prefix cache may hold in the executor's memory.", (double)s.cache_budget);
    gauge(out, "gauge", "deltallm_prefix_cache_host_budget_bytes",
          "Bytes of snapshots the prefix cache may keep in host memory.",
          (double)s.cache_host_budget);
    if (s.kv_total_rows > 0) {
        gauge(out, "gauge", "deltallm_kv_cache_tokens", "Tokens of the KV cache held by sequences.",
              (double)s.kv_used_rows);
        gauge(out, "gauge", "deltallm_kv_cache_capacity_tokens", "Tokens the KV cache holds.",
              (double)s.kv_total_rows);
    }
    gauge(out, "counter", "deltallm_requests_preempted_total",
          "Requests sent back to the queue because the KV cache was full.", (double)s.preempted);
    gauge(out, "gauge", "deltallm_http_connections", "HTTP connections open.", (double)c.open);
    gauge(out, "counter", "deltallm_http_connections_cut_off_total",
          "HTTP connections closed by the server for sending no whole request in time (or while "
          "every worker was taken).",
          (double)c.cut_off);
    {
        std::lock_guard lock(mutex_);
        out +=
            "# HELP deltallm_http_requests_total HTTP requests answered, by status class.\n"
            "# TYPE deltallm_http_requests_total counter\n";
        out += fmt::format("deltallm_http_requests_total{{class=\"2xx\"}} {}\n", ok_);
        out += fmt::format("deltallm_http_requests_total{{class=\"4xx\"}} {}\n", client_errors_);
        out += fmt::format("deltallm_http_requests_total{{class=\"5xx\"}} {}\n", server_errors_);
        gauge(out, "counter", "deltallm_next_turn_warmups_total",
              "Chats whose next turn's beginning was prefilled once the answer was complete.",
              (double)warmups_);
        gauge(out, "counter", "deltallm_next_turn_warmup_tokens_total",
              "Prompt tokens of those warm-ups (most restored from the prefix cache).",
              (double)warmup_tokens_);
        gauge(out, "counter", "deltallm_next_turn_warmups_superseded_total",
              "Warm-ups given up: the next turn came first (and reads those tokens itself), or "
              "the server stopped.",
              (double)warmups_superseded_);
    }
    out += latency_.render("deltallm_request_duration_seconds",
                           "Time from submission to the end of a generation request.");
    out += ttft_.render("deltallm_time_to_first_token_seconds",
                        "Time from submission to the first generated token.");
    out += tpot_.render("deltallm_time_per_output_token_seconds",
                        "Mean time between generated tokens after the first, per request.");
    out += queue_.render("deltallm_queue_seconds",
                         "Time from submission to the first step that carries the request.");
    return out;
}

}  // namespace dl::server
