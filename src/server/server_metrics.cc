#include "server/server_metrics.h"

namespace folio {
namespace {

std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> tpot_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4,  0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> request_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

}  // namespace

ServerMetrics::ServerMetrics()
    : ttft_(ttft_buckets()),
      tpot_(tpot_buckets()),
      e2e_(request_buckets()),
      queue_(request_buckets()) {}

void ServerMetrics::record_request(const RequestRecord& r) {
  request_success_.add(r.finished_reason);
  e2e_.observe(r.e2e_s);
  if (r.ttft_s >= 0) ttft_.observe(r.ttft_s);
  if (r.tpot_s >= 0) tpot_.observe(r.tpot_s);
  if (r.queue_s >= 0) queue_.observe(r.queue_s);
}

void ServerMetrics::record_http_status(int status) {
  http_responses_.add(std::to_string(status / 100) + "xx");
}

std::string ServerMetrics::render(const EngineStats& s, const std::string& model_name) const {
  PrometheusWriter w;
  const std::string lbl = "model_name=\"" + escape_label_value(model_name) + "\"";
  auto gauge = [&](const char* name, const char* help, double v) {
    w.family(name, help, "gauge");
    w.sample(name, lbl, v);
  };
  // Counters: the family is named without _total, the sample with it (client_python's way).
  auto counter = [&](const std::string& name, const char* help, double v) {
    w.family(name, help, "counter");
    w.sample(name + "_total", lbl, v);
  };
  gauge("folio:num_requests_running", "Number of requests in model execution batches.",
        s.num_running);
  gauge("folio:num_requests_waiting", "Number of requests waiting to be processed.",
        s.num_waiting);
  gauge("folio:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
        s.kv_cache_usage);
  counter("folio:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
          static_cast<double>(s.prefix_cache_queries));
  counter("folio:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
          static_cast<double>(s.prefix_cache_hits));
  counter("folio:num_preemptions", "Cumulative number of preemptions from the engine.",
          static_cast<double>(s.num_preemptions));
  counter("folio:prompt_tokens", "Number of prefill tokens processed.",
          static_cast<double>(s.prompt_tokens));
  counter("folio:generation_tokens", "Number of generation tokens processed.",
          static_cast<double>(s.generation_tokens));

  w.family("folio:request_success", "Count of finished requests by finish reason.", "counter");
  for (const auto& [reason, v] : request_success_.snapshot())
    w.sample("folio:request_success_total",
             lbl + ",finished_reason=\"" + escape_label_value(reason) + "\"", v);
  w.family("folio:http_responses", "HTTP responses by status class.", "counter");
  for (const auto& [cls, v] : http_responses_.snapshot())
    w.sample("folio:http_responses_total", lbl + ",status=\"" + cls + "\"", v);

  w.histogram("folio:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              lbl, ttft_);
  w.histogram("folio:time_per_output_token_seconds",
              "Histogram of time per output token in seconds.", lbl, tpot_);
  w.histogram("folio:e2e_request_latency_seconds",
              "Histogram of end to end request latency in seconds.", lbl, e2e_);
  w.histogram("folio:request_queue_time_seconds",
              "Histogram of time spent in WAITING phase for request.", lbl, queue_);

  // vLLM's info-style gauge: value 1, the cache config as labels (bools as Python spells them).
  // Last, so the text before it is what it was without it.
  const CacheConfigInfo& c = s.cache_config;
  std::string info = lbl;
  auto label = [&](const char* key, const std::string& value) {
    info += std::string(",") + key + "=\"" + escape_label_value(value) + "\"";
  };
  label("block_size", std::to_string(c.block_size));
  label("cache_dtype", c.cache_dtype);
  label("kv_cache_mode", c.kv_cache_mode);
  label("num_gpu_blocks", std::to_string(c.num_gpu_blocks));
  label("num_cpu_blocks", std::to_string(c.num_cpu_blocks));
  label("enable_prefix_caching", c.enable_prefix_caching ? "True" : "False");
  w.family("folio:cache_config_info", "Information of the LLMEngine CacheConfig", "gauge");
  w.sample("folio:cache_config_info", info, 1.0);
  return w.text();
}

}  // namespace folio
