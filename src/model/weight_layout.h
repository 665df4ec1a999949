// WeightLayout: where each checkpoint tensor of a Llama-family model goes in the CUDA executor's
// one weight arena (bf16/fp16), and which slice of it a tensor-parallel rank holds. Plain C++
// (no CUDA), so the slicing is tested on the CPU: the ranks' slices must tile every tensor.
//
// Fusions as in LlamaWeights: q/k/v into one [q + 2 kv, hidden] matrix, gate/up into one
// [2 intermediate, hidden] matrix (parts of a fused matrix follow each other). The parts come in
// the same order for every rank (dummy weights derive each tensor's values from its index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dist/tp_shard.h"
#include "model/model_config.h"

namespace folio {

inline constexpr size_t kNoTensor = std::numeric_limits<size_t>::max();
inline constexpr float kDummyOnes = -1.f;  // dummy init: constant 1 (norm weights)

// One checkpoint tensor's place in the arena: the block [row0, row0 + rows) x [col0, col0 + cols)
// of the checkpoint's [full_rows, full_cols] tensor (1-D tensors are [n, 1]), of which the first
// valid_rows rows exist in the checkpoint (the rest is vocabulary padding, zero).
struct WeightPart {
  std::string name;
  std::vector<int64_t> shape;  // the checkpoint's (whole) shape
  int64_t row0 = 0, rows = 0, col0 = 0, cols = 0, valid_rows = 0;
  size_t offset = 0;        // bytes into the arena
  float dummy_scale = 1.f;  // uniform in [-scale, scale), or kDummyOnes

  int64_t full_cols() const { return shape.size() > 1 ? shape[1] : 1; }
  bool whole_rows() const { return col0 == 0 && cols == full_cols(); }
};

struct LayerOffsets {
  size_t input_norm, qkv, qkv_bias = kNoTensor, q_norm = kNoTensor, k_norm = kNoTensor, o_proj,
                          post_norm, gate_up, down;
};

struct WeightLayout {
  std::vector<WeightPart> parts;
  size_t total = 0;  // arena bytes
  size_t embed = 0, final_norm = 0, lm_head = kNoTensor;
  std::vector<LayerOffsets> layers;
};

// `config` is the whole model's; shard == nullptr: the whole model.
WeightLayout build_weight_layout(const ModelConfig& config, const TpShard* shard);

}  // namespace folio
