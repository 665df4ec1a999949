#include "engine/engine_config.h"

namespace folio {

Status EngineConfig::validate() const {
  if (block_size < 1 || block_size > 1024)
    return invalid_argument("--block-size must be in [1, 1024], got " + std::to_string(block_size));
  if (num_kv_blocks < 0) return invalid_argument("--num-kv-blocks must be >= 0");
  if (max_total_tokens < 0) return invalid_argument("--max-total-tokens must be >= 0");
  if (!(kv_cache_memory_gib > 0)) return invalid_argument("the KV cache memory budget must be > 0");
  if (swap_space_gib < 0) return invalid_argument("--swap-space must be >= 0");
  if (max_logprobs < 0) return invalid_argument("--max-logprobs must be >= 0");
  if (!(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1))
    return invalid_argument("--gpu-memory-utilization must be in (0, 1]");
  if (dtype != "auto" && dtype != "bfloat16" && dtype != "float16")
    return invalid_argument("--dtype must be auto, bfloat16 or float16, got " + dtype);
  if (tensor_parallel_size < 1)
    return invalid_argument("--tensor-parallel-size must be >= 1, got " +
                            std::to_string(tensor_parallel_size));
  return sched.validate();
}

}  // namespace folio
