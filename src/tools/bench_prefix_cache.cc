#include "tools/bench_prefix_cache.h"

#include <cstdlib>

#include <boost/asio.hpp>

namespace folio::tools {

std::optional<double> prometheus_sample_sum(std::string_view text, std::string_view name) {
  std::optional<double> sum;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    // A sample line: the name, then labels in braces or a space, then the value.
    if (line.size() <= name.size() || line.substr(0, name.size()) != name) continue;
    std::string_view rest = line.substr(name.size());
    if (rest[0] == '{') {
      const size_t close = rest.find('}');
      if (close == std::string_view::npos) continue;
      rest.remove_prefix(close + 1);
    }
    if (rest.empty() || rest[0] != ' ') continue;
    const std::string value(rest.substr(1));
    char* stop = nullptr;
    const double v = std::strtod(value.c_str(), &stop);
    if (stop == value.c_str()) continue;
    sum = sum.value_or(0.0) + v;
  }
  return sum;
}

std::optional<PrefixCacheCounters> parse_prefix_cache_counters(std::string_view metrics_text) {
  for (const char* engine : {"folio:", "vllm:"}) {
    const std::string p = engine;
    auto queries = prometheus_sample_sum(metrics_text, p + "prefix_cache_queries_total");
    auto hits = prometheus_sample_sum(metrics_text, p + "prefix_cache_hits_total");
    if (queries && hits) return PrefixCacheCounters{*queries, *hits};
  }
  return std::nullopt;
}

std::optional<std::string> prefix_cache_warning(const PrefixCacheCounters& run,
                                                int64_t prompt_tokens) {
  if (prompt_tokens <= 0 || run.hits <= kPrefixHitWarnFraction * static_cast<double>(prompt_tokens))
    return std::nullopt;
  const int pct = static_cast<int>(100.0 * run.hits / static_cast<double>(prompt_tokens) + 0.5);
  return std::to_string(pct) + "% of the prompt tokens sent were prefix-cache hits on the " +
         "server: prompts repeated from an earlier run (same --seed)? The latencies then " +
         "measure the cache; give each run its own --seed or restart the server";
}

Result<std::string> fetch_metrics_text(const BaseUrl& url, const Endpoints& endpoints,
                                       const std::vector<std::pair<std::string, std::string>>& headers,
                                       std::chrono::milliseconds timeout) {
  boost::asio::io_context ioc;
  StreamingRequest request;
  request.get = true;
  request.target = url.base_path + "/metrics";
  request.host_header = url.host + ":" + url.port;
  request.headers = headers;
  request.timeout = timeout;
  std::string body;
  Status done = internal_error("GET /metrics did not finish");
  StreamCallbacks cb;
  cb.on_body = [&body](std::string_view piece) {
    body.append(piece);
    return true;
  };
  cb.on_done = [&done](Status s) { done = std::move(s); };
  start_streaming_request(ioc, endpoints, std::move(request), std::move(cb));
  ioc.run();  // the request's own deadline bounds it
  if (!done.ok()) return done;
  return body;
}

}  // namespace folio::tools
