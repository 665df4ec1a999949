// The step budget (--max-num-batched-tokens) and the seats (--max-num-seqs) when the user leaves
// them unset: vLLM V1's defaults (EngineArgs.get_batch_defaults), which depend on the GPU and on
// whether the engine serves requests as they come (latency matters: a smaller budget keeps decode
// steps short beside a prefill) or runs an offline batch.
//
//   GPU of >= 70 GiB, not an A100:   offline 16384 tokens, 1024 seqs; serving 8192, 1024
//   other GPUs:                      offline  8192 tokens,  256 seqs; serving 2048,  256
//   CPU (folio's reference backend): 2048 tokens, 256 seqs either way (folio's earlier default)
//
// On an H200, B1 at the large offline defaults runs 61.5 req/s against 55.9 at 2048 / 256
// (src/backend/cuda/NOTES.md, session 42). Without chunked prefill a whole prompt must fit in
// one step, so the unset budget is then at least max_model_len (vLLM does the same).
#pragma once

#include <cstddef>
#include <string>

#include "engine/engine_config.h"

namespace folio {

// The GPU the engine runs on (rank 0's under tensor parallelism: the ranks' GPUs are alike).
struct GpuSummary {
  std::string name;         // as the driver reports it ("NVIDIA H100 80GB HBM3")
  size_t total_memory = 0;  // bytes
};

struct BatchLimits {
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
};

// gpu: null for the CPU backend.
BatchLimits default_batch_limits(UsageContext usage, const GpuSummary* gpu);

// Sets config.sched's unset limits (0) to default_batch_limits; explicit values stay. Needs
// sched.max_model_len resolved (the budget without chunked prefill).
void resolve_batch_limits(EngineConfig& config, const GpuSummary* gpu);

}  // namespace folio
