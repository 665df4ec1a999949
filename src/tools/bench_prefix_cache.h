// The served engine's prefix-cache counters around a serving benchmark, read from its Prometheus
// /metrics (folio's `folio:prefix_cache_{queries,hits}_total` or vLLM's `vllm:` names).
//
// Why: bench serve's prompts follow --seed, so a second run with the same seed against the same
// server sends the same prompts, and the server's prefix cache answers their prefill. Its
// latencies and throughput then describe a cache, not the workload (session 41 read 74 req/s
// where a fresh server gave 55). The run reports the hits it saw and warns when they are many.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tools/bench_http_client.h"

namespace folio::tools {

struct PrefixCacheCounters {
  double queries = 0;  // prompt tokens looked up
  double hits = 0;     // of them, found cached
};

// The sum of a metric's samples over its label sets in Prometheus text ("name 12" or
// "name{a="b"} 12" lines); nullopt when no sample has that exact name.
std::optional<double> prometheus_sample_sum(std::string_view text, std::string_view name);

// folio's counters, else vLLM's; nullopt when the text has neither.
std::optional<PrefixCacheCounters> parse_prefix_cache_counters(std::string_view metrics_text);

// GET base_path + "/metrics" (outside the timed window, on its own io_context): the body of a
// 200 response, else an error ("HTTP 404", "connect: ...", "timed out after N ms").
Result<std::string> fetch_metrics_text(const BaseUrl& url, const Endpoints& endpoints,
                                       const std::vector<std::pair<std::string, std::string>>& headers,
                                       std::chrono::milliseconds timeout);

// The run's hit share worth a warning: hits over this fraction of the prompt tokens sent.
constexpr double kPrefixHitWarnFraction = 0.10;

// The warning for a run whose hits pass that share of `prompt_tokens`; nullopt below it.
std::optional<std::string> prefix_cache_warning(const PrefixCacheCounters& run,
                                                int64_t prompt_tokens);

}  // namespace folio::tools
