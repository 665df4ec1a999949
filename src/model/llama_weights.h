// LlamaWeights: the weights of a Llama-family model (Llama, Mistral, Qwen2, Qwen3) on the host
// in fp32, converted from the checkpoint's bf16/fp16/fp32 with every shape checked.
// q/k/v are fused into one [q_size + 2 * kv_size, hidden] matrix and gate/up into one
// [2 * intermediate, hidden] matrix so each takes one GEMM.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace folio {

struct LlamaLayerWeights {
  std::vector<float> input_norm;  // [hidden]
  std::vector<float> qkv;         // [q_size + 2 * kv_size, hidden]
  std::vector<float> qkv_bias;    // [q_size + 2 * kv_size] or empty
  std::vector<float> q_norm;      // [head_dim] or empty (Qwen3)
  std::vector<float> k_norm;      // [head_dim] or empty
  std::vector<float> o_proj;      // [hidden, q_size]
  std::vector<float> post_norm;   // [hidden]
  std::vector<float> gate_up;     // [2 * intermediate, hidden]
  std::vector<float> down;        // [hidden, intermediate]
};

struct LlamaWeights {
  std::vector<float> embed;       // [vocab, hidden]
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to embed
  std::vector<LlamaLayerWeights> layers;

  const std::vector<float>& lm_head_or_embed() const { return lm_head.empty() ? embed : lm_head; }

  static Result<LlamaWeights> load(const ModelConfig& config, const Checkpoint& checkpoint);
  // Random weights of the right shapes (`--load-format dummy`), deterministic in `seed`.
  static LlamaWeights dummy(const ModelConfig& config, uint64_t seed);
};

}  // namespace folio
