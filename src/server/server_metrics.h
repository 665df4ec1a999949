// The server's Prometheus metrics, named after vLLM's `vllm:` ones with a `folio:` prefix.
// Latency histograms are what the server itself sees (submit -> first output -> last output);
// engine gauges and token counters come from EngineClient::stats() at render time.
#pragma once

#include <string>

#include "engine/engine_client.h"
#include "server/metrics.h"

namespace folio {

class ServerMetrics {
 public:
  ServerMetrics();

  // One finished engine request (a sub-request of an HTTP request). Times in seconds;
  // `ttft_s` < 0 when no token arrived; `tpot_s` < 0 when fewer than two tokens did.
  struct RequestRecord {
    std::string finished_reason;  // stop | length | abort | error
    double e2e_s = 0.0;
    double ttft_s = -1.0;
    double tpot_s = -1.0;
    double queue_s = -1.0;
  };
  void record_request(const RequestRecord& r);
  void record_http_status(int status);  // every HTTP response, by status class

  std::string render(const EngineStats& stats, const std::string& model_name) const;

 private:
  LabeledCounter request_success_;
  LabeledCounter http_responses_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
  Histogram queue_;
};

}  // namespace folio
