// InstantExecutor: an Executor that samples instantly (as the CUDA executor's device sampling
// returns tokens) with no model behind it, for timing and testing the engine's host loop and the
// benchmarks' bookkeeping without a GPU. Token 1000 + row % 7 for every row, never an EOS of the
// shipped configs; KV blocks shaped as Llama-3-8B's.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/engine_core.h"

namespace folio::tools {

// Samples token 1000 + row % 7 for every row at once; `num_blocks` KV blocks of Llama-3-8B's shape.
class InstantExecutor final : public Executor {
 public:
  InstantExecutor(int vocab, int block_size, int num_blocks) : vocab_(vocab) {
    kv_.num_layers = 32;
    kv_.num_kv_heads = 8;
    kv_.head_dim = 128;
    kv_.block_size = block_size;
    kv_.num_blocks = num_blocks;
  }
  std::string device_name() const override { return "instant"; }
  int vocab_size() const override { return vocab_; }
  const KvCacheShape& kv_shape() const override { return kv_; }
  Status execute(const ForwardBatch&, std::vector<float>&) override {
    return unimplemented("instant executor: device sampling only");
  }
  bool samples_on_device() const override { return true; }
  Status execute_sampled(const ForwardBatch&, const DeviceSamplingBatch& sampling,
                         std::vector<float>& host_logits,
                         std::vector<DeviceSample>& samples) override {
    if (!sampling.host_rows.empty()) return unimplemented("instant executor: no host rows");
    host_logits.clear();
    samples.resize(sampling.rows.size());
    for (size_t i = 0; i < samples.size(); ++i) {
      samples[i].token_id = 1000 + static_cast<int32_t>(i % 7);
      samples[i].logprob = -1.0f;
      samples[i].rank = 1;
      samples[i].top.clear();
    }
    return Status();
  }
  void copy_blocks(std::span<const BlockCopy>) override {}
  void swap_out(std::span<const BlockCopy>) override {}
  void swap_in(std::span<const BlockCopy>) override {}

 private:
  int vocab_;
  KvCacheShape kv_;
};

}  // namespace folio::tools
