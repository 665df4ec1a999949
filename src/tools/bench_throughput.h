// Offline throughput (benchmarks B1, B2, M1): every request submitted to one EngineCore at once,
// EOS ignored (max_tokens = the output length, so the work is fixed), run to completion on the
// calling thread. Items with a max_tokens (WorkloadItem) stop early instead: sent with that
// budget and EOS honoured, each is aborted after the step whose output reaches its output_len,
// which frees its KV blocks as the EOS would have (with async scheduling the step already in
// flight computes one more token for it, as it would after a real EOS). Sampling is vLLM's
// throughput setting: temperature 1, top-p 1, no generation config defaults.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/engine_core.h"
#include "tools/bench_workload.h"

namespace folio::tools {

struct ThroughputResult {
  int num_requests = 0;
  int n = 1;                      // sequences per request (parallel sampling)
  int num_failed = 0;             // requests the engine finished with an error
  int64_t prompt_tokens = 0;      // of the workload
  int64_t output_tokens = 0;      // generated, as the engine reported per request
  double elapsed_s = 0.0;         // first submit to the last step
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  double kv_slot_utilization = 0.0;  // mean over steps: filled slots / allocated slots
  int peak_running_sequences = 0;
  int peak_kv_blocks_used = 0;
  int kv_num_blocks = 0;
  int kv_block_size = 0;
  std::string kv_cache_dtype = "auto";  // the engine's --kv-cache-dtype (kv_cache_dtype_name)
  // The step budget and seats the engine ran with: given, or its defaults for the device
  // (engine/batch_defaults.h), which the command line alone does not show.
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
  double schedule_conservativeness = 0.0;
  // Requests the benchmark ended at their output_len (items with max_tokens; the others end by
  // themselves, at max_tokens or at a real EOS).
  int num_ended_at_output_len = 0;
  // Tokens the model ran (prompt chunks, recompute, decode) and prompt tokens the prefix cache
  // answered at admission: what shared prefixes ("prefix_group") saved.
  int64_t scheduled_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
};

// Errors (nothing run) when a request cannot fit the engine's context length; an engine
// failure mid-run is an error too. Prompts: make_random_prompts(items, vocab, seed). n: sequences
// sampled per prompt (parallel sampling, vLLM's `--n`): each request asks for n, its sequences
// share the prompt's KV blocks, and output_tokens counts every sequence's; n > 1 does not
// combine with items that stop early (an error).
Result<ThroughputResult> run_throughput(EngineCore& engine, const std::vector<WorkloadItem>& items,
                                        uint64_t seed, int n = 1);

// requests_per_second (prompts), output_tokens_per_second (every sequence's), n,
// total_tokens_per_second, elapsed_seconds,
// kv_slot_utilization, num_preemptions, peak_running_sequences, kv_cache_dtype,
// max_num_batched_tokens, max_num_seqs, schedule_conservativeness, num_ended_at_output_len,
// scheduled_tokens, prefix_cache_hit_tokens and the raw counts.
nlohmann::json throughput_json(const ThroughputResult& r);

// Aborts, when it goes out of scope, every request it saw added that is still live: an early
// return must not leave the engine holding sinks that point into a finished stack frame.
// Declare it after whatever the sinks capture.
class LiveRequestGuard {
 public:
  explicit LiveRequestGuard(EngineCore& engine) : engine_(engine) {}
  ~LiveRequestGuard() {
    for (const auto& id : ids_)
      if (engine_.is_live(id)) engine_.abort(id);
  }
  LiveRequestGuard(const LiveRequestGuard&) = delete;
  LiveRequestGuard& operator=(const LiveRequestGuard&) = delete;
  void added(std::string id) { ids_.push_back(std::move(id)); }

 private:
  EngineCore& engine_;
  std::vector<std::string> ids_;
};

// Sampling for benchmark requests: fixed length, no defaults from generation_config.json.
SamplingParams bench_sampling_params(int output_len, float temperature);

}  // namespace folio::tools
