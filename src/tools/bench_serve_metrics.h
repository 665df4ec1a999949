// Per-request measurements of the serving benchmark and the report built from them, with
// `vllm bench serve`'s definitions and JSON key names:
//   TTFT  send -> first chunk carrying a choice
//   ITL   every gap between consecutive choice chunks (all requests pooled)
//   TPOT  per request (e2e - ttft) / (output_tokens - 1), requests with >= 2 tokens
//   E2EL  send -> end of the response
// Throughputs divide by the benchmark's wall time (first send to last completion). Failed
// requests count in `failed` only.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace folio::tools {

struct RequestRecord {
  bool success = false;
  std::string error;        // why it failed
  int prompt_len = 0;
  int output_tokens = 0;    // usage.completion_tokens, else the number of choice chunks
  double ttft_s = 0.0;
  double e2e_s = 0.0;
  std::vector<double> itl_s;
  double send_time_s = 0.0;  // from the benchmark start (after any queueing for concurrency)
};

// TPOT of one request in seconds; -1 when it has fewer than 2 output tokens (undefined).
double request_tpot(const RequestRecord& r);

// completed, failed, total_input_tokens, total_output_tokens, duration, request_throughput,
// output_throughput, total_token_throughput, {mean,median,p90,p99,std}_{ttft,tpot,itl,e2el}_ms,
// and up to 5 example `errors`.
nlohmann::json serve_metrics_json(const std::vector<RequestRecord>& records, double duration_s);

}  // namespace folio::tools
