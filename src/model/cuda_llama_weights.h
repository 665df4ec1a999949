// CudaLlamaWeights: a Llama-family model's weights in device memory, in one arena, in the model
// dtype (bf16 or fp16). Same fusions as LlamaWeights (llama_weights.h): q/k/v into one
// [q_size + 2 * kv_size, hidden] matrix and gate/up into one [2 * intermediate, hidden] matrix,
// so each takes one GEMM. Built either from a checkpoint (every shape checked, other precisions
// converted on the GPU) or as dummy random weights generated on the GPU (no host copy).
// With a TpShard (dist/tp_shard.h), only that rank's slice of each tensor is loaded (or
// generated: the same values as the single-GPU model's, see fill_uniform_slice), the
// vocabulary-parallel embedding and lm_head padded with zero rows.
// Only compiled with FOLIO_CUDA; plain C++ header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/device_memory.h"
#include "backend/cuda/dtype.h"
#include "base/status.h"
#include "dist/tp_shard.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace folio {

struct CudaLayerWeights {
  const void* input_norm = nullptr;  // [hidden]
  const void* qkv = nullptr;         // [q_size + 2 * kv_size, hidden]
  const void* qkv_bias = nullptr;    // [q_size + 2 * kv_size] or nullptr
  const void* q_norm = nullptr;      // [head_dim] or nullptr (Qwen3)
  const void* k_norm = nullptr;      // [head_dim] or nullptr
  const void* o_proj = nullptr;      // [hidden, q_size]
  const void* post_norm = nullptr;   // [hidden]
  const void* gate_up = nullptr;     // [2 * intermediate, hidden]
  const void* down = nullptr;        // [hidden, intermediate]
};

class CudaLlamaWeights {
 public:
  // Device bytes the weights take (for planning before anything is allocated).
  // `config` is always the whole model's; shard == nullptr: the whole model.
  static size_t num_bytes(const ModelConfig& config, cuda::DType dtype,
                          const TpShard* shard = nullptr);
  static Result<CudaLlamaWeights> load(const ModelConfig& config, const Checkpoint& checkpoint,
                                       cuda::DType dtype, const TpShard* shard = nullptr);
  // Uniform random weights scaled like LlamaWeights::dummy (1/sqrt(fan_in)), norms 1.
  static Result<CudaLlamaWeights> dummy(const ModelConfig& config, cuda::DType dtype, uint64_t seed,
                                        const TpShard* shard = nullptr);

  cuda::DType dtype = cuda::DType::kBF16;
  // Shapes as seen by one rank: heads, kv heads, intermediate and vocab are the shard's local
  // counts (the whole model's without a shard).
  const void* embed = nullptr;       // [vocab, hidden]
  const void* final_norm = nullptr;  // [hidden]
  const void* lm_head = nullptr;     // [vocab, hidden]; == embed when tied
  std::vector<CudaLayerWeights> layers;
  // Owns the memory every pointer above points into (moving the weights keeps them valid).
  cuda::DeviceBuffer arena;
  size_t bytes() const { return arena.bytes(); }
};

// The model dtype for `--dtype` (auto: the checkpoint's, fp32 checkpoints run in bf16).
Result<cuda::DType> resolve_cuda_dtype(const std::string& flag, const ModelConfig& config);

}  // namespace folio
