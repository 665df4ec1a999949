// EngineConfig: every engine knob, validated once, shared by `generate`, `serve` and `bench`.
#pragma once

#include <cstdint>
#include <string>

#include "backend/kv_cache_dtype.h"
#include "base/status.h"
#include "sched/scheduler_config.h"

namespace folio {

enum class KvCacheMode { kPaged, kToken };

// Who runs the engine, for the defaults that differ (engine/batch_defaults.h): an offline batch
// (generate, bench) or a server (vLLM's LLM_CLASS and OPENAI_API_SERVER usage contexts).
enum class UsageContext { kOffline, kServer };

struct EngineConfig {
  KvCacheMode kv_mode = KvCacheMode::kPaged;
  int block_size = 16;                // paged mode; token mode is 1
  int num_kv_blocks = 0;              // 0: sized from kv_cache_memory_gib (paged mode)
  int max_total_tokens = 0;           // token mode pool; 0: sized from kv_cache_memory_gib
  double kv_cache_memory_gib = 0.25;  // CPU backend: KV budget when no explicit size is given
  double swap_space_gib = 0.0;        // host swap pool
  // --kv-cache-dtype: how K and V are stored (backend/kv_cache_dtype.h). kFp8E4m3 halves a
  // 16-bit cache on the GPU; the CPU reference keeps fp32 storage holding the rounded values.
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  // CUDA executor (added by the CUDA executor's author): the share of the GPU's memory the
  // engine may use (weights + activations + KV cache), and the weights' dtype
  // ("auto" | "bfloat16" | "float16").
  double gpu_memory_utilization = 0.9;
  std::string dtype = "auto";
  // Tensor parallelism (CUDA): the model is split over this many GPUs of the host, one scheduler
  // and KV manager for all of them (model/cuda_tp_executor.h).
  int tensor_parallel_size = 1;
  // vLLM's --disable-custom-all-reduce turns this off: under TP, all-reduces go over NVLink by
  // peer loads and stores (backend/cuda/peer_all_reduce.h) instead of NCCL.
  bool custom_all_reduce = true;
  bool enable_prefix_caching = true;
  // Sample on the device when the backend can (the CUDA executor): logits stay on the GPU. Off:
  // every logits row comes to the host and the host Sampler draws (same contract, for checks).
  bool device_sampling = true;
  // vLLM's --async-scheduling: where the backend launches steps asynchronously (the CUDA
  // executor, one GPU or tensor parallel), the next step is scheduled and its inputs built while
  // the device runs the current one (EngineCore::step). Off: every step waits for its tokens.
  bool async_scheduling = true;
  // vLLM's --enforce-eager: run every step op by op (no CUDA graphs for decode steps).
  bool enforce_eager = false;
  // sched.max_num_batched_tokens and sched.max_num_seqs at 0 (the flags left unset) are set by
  // load_engine for the device and this usage (engine/batch_defaults.h).
  UsageContext usage = UsageContext::kOffline;
  SchedulerConfig sched;
  int max_logprobs = 20;
  uint64_t seed = 0;        // engine seed for requests without their own
  int log_every_steps = 0;  // 0: only a summary at the end

  Status validate() const;
};

}  // namespace folio
