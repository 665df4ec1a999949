// The serving benchmark's load generator, like `vllm bench serve`: requests arrive as a Poisson
// process at `request_rate` (all at once for +inf), at most `max_concurrency` in flight (0: no
// cap; an arrived request waits for a free slot, and its latencies count from when it is sent),
// each a streaming POST /v1/completions with the prompt as token ids, ignore_eos and
// max_tokens = the workload's output length. An item with its own max_tokens (an output that
// stops early: bench_workload.h) is sent with that budget, EOS honoured and the usage on every
// chunk, and the client closes the stream once output_len tokens have come, as a client whose
// reply is complete would; the server aborts it then, freeing its KV blocks as an EOS would.
// Runs on the calling thread (one io_context, async connections); bounded by a per-request
// timeout and a whole-run limit.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tools/bench_prefix_cache.h"
#include "tools/bench_serve_metrics.h"
#include "tools/bench_workload.h"

namespace folio::tools {

struct ServeBenchConfig {
  std::string base_url;                     // http://HOST:PORT
  std::string endpoint = "/v1/completions";
  std::string model;                        // "" sends no "model" (the server's own)
  std::string api_key;                      // "" sends no Authorization header
  double request_rate = std::numeric_limits<double>::infinity();
  int max_concurrency = 0;                  // 0: unlimited
  std::vector<WorkloadItem> workload;
  int vocab_size = 32000;                   // prompt ids are drawn from [0, vocab_size)
  uint64_t seed = 0;                        // prompts and arrival times
  double request_timeout_s = 600.0;
  double max_duration_s = 3600.0;           // unfinished requests then count as failed
};

struct ServeBenchResult {
  std::vector<RequestRecord> records;  // in workload order
  double duration_s = 0.0;             // start to the last completion
  // The server's prefix-cache tokens queried and hit during the run (its /metrics counters
  // after minus before); nullopt where the server exposes neither folio's nor vLLM's counters.
  std::optional<PrefixCacheCounters> prefix_cache;
};

// Fails only on setup errors (bad URL, unresolvable host); a request that fails is a record.
Result<ServeBenchResult> run_serve_benchmark(const ServeBenchConfig& config);

// The /v1/completions body for one request: ignore_eos and max_tokens = output_len, or, for an
// item with a max_tokens, that budget with EOS honoured and the usage on every chunk.
std::string completion_request_body(const std::vector<int32_t>& prompt, const WorkloadItem& item,
                                    const std::string& model);

}  // namespace folio::tools
