// CpuLlamaExecutor: the reference Executor. Runs the Llama-family forward in fp32 over a paged KV
// cache held in host memory, using the ops of backend/cpu. Every step takes a ForwardBatch that
// may mix prefill chunks and decode tokens of many sequences.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "base/host_copy_rate.h"
#include "model/llama_weights.h"
#include "model/model_config.h"

namespace folio {

class CpuLlamaExecutor final : public Executor {
 public:
  // `kv.num_layers/num_kv_heads/head_dim` are taken from the config; block_size, num_blocks,
  // num_swap_blocks and dtype from `kv`. dtype kFp8E4m3: every K/V value is rounded to e4m3 as
  // it is written (cpu::reshape_and_cache) and kept in fp32, so copies and swaps move it as is.
  CpuLlamaExecutor(ModelConfig config, LlamaWeights weights, KvCacheShape kv);

  std::string device_name() const override { return "cpu"; }
  Result<double> measure_copy_gbps() const override { return measure_host_copy_gbps(); }
  int vocab_size() const override { return config_.vocab_size; }
  const KvCacheShape& kv_shape() const override { return kv_; }
  const ModelConfig& config() const { return config_; }

  Status execute(const ForwardBatch& batch, std::vector<float>& logits) override;
  void copy_blocks(std::span<const BlockCopy> copies) override;
  void swap_out(std::span<const BlockCopy> copies) override;
  void swap_in(std::span<const BlockCopy> copies) override;

  // Bytes of KV cache one block takes over all layers (K and V), in fp32 (fp8 too: see above).
  static size_t kv_block_bytes(const ModelConfig& config, int block_size);

  // One layer's K or V cache, [num_blocks * block_size, num_kv_heads, head_dim]: for tests that
  // check what a step stored.
  const std::vector<float>& k_cache(int layer) const { return k_cache_[layer]; }
  const std::vector<float>& v_cache(int layer) const { return v_cache_[layer]; }

 private:
  void attention_block(int layer, const ForwardBatch& b, std::vector<float>& x);
  void mlp_block(int layer, int num_tokens, std::vector<float>& x);
  size_t block_elems() const;  // floats per block in one layer's K (or V) cache

  ModelConfig config_;
  LlamaWeights weights_;
  KvCacheShape kv_;
  std::vector<double> inv_freq_;
  // Per layer: [num_blocks * block_size, num_kv_heads, head_dim].
  std::vector<std::vector<float>> k_cache_, v_cache_;
  // Host swap pool, same layout with num_swap_blocks blocks.
  std::vector<std::vector<float>> k_swap_, v_swap_;
  // Scratch reused across steps (no per-step allocation once warmed up).
  std::vector<float> normed_, qkv_, q_, k_, v_, attn_, proj_, gate_up_, act_;
};

}  // namespace folio
