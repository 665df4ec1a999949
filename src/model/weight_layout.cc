#include "model/weight_layout.h"

#include <cmath>
#include <utility>

namespace folio {
namespace {

// A row range (and optionally a column range) of a tensor for one rank; -1: all.
struct Slice {
  int64_t row0 = 0, rows = -1, col0 = 0, cols = -1, valid_rows = -1;
};

struct Builder {
  WeightLayout L;

  // Starts a new (256-byte aligned) tensor and returns its offset.
  size_t begin() {
    L.total = (L.total + 255) / 256 * 256;
    return L.total;
  }
  void add(std::string name, std::vector<int64_t> shape, float scale, Slice sl = {}) {
    WeightPart p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.row0 = sl.row0;
    p.rows = sl.rows >= 0 ? sl.rows : p.shape[0];
    p.col0 = sl.col0;
    p.cols = sl.cols >= 0 ? sl.cols : p.full_cols();
    p.valid_rows = sl.valid_rows >= 0 ? sl.valid_rows : p.rows;
    p.offset = L.total;
    p.dummy_scale = scale;
    L.total += static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols) * 2;  // bf16 and fp16
    L.parts.push_back(std::move(p));
  }
  size_t tensor(std::string name, std::vector<int64_t> shape, float scale, Slice sl = {}) {
    const size_t off = begin();
    add(std::move(name), std::move(shape), scale, sl);
    return off;
  }
};

}  // namespace

// Dummy scales use the whole model's fan-in, so every rank's values are the single-GPU model's.
WeightLayout build_weight_layout(const ModelConfig& c, const TpShard* shard) {
  const TpShard t =
      shard ? *shard
            : whole_model_shard(c.num_heads, c.num_kv_heads, c.intermediate_size, c.vocab_size);
  Builder B;
  WeightLayout& L = B.L;
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  const int64_t hd = c.head_dim;
  const float s_h = 1.f / std::sqrt(static_cast<float>(h));
  const Slice vocab{t.vocab_start, t.local_vocab, 0, -1, t.valid_vocab_rows()};
  const Slice q_rows{t.head_start * hd, t.local_heads * hd};
  const Slice kv_rows{t.kv_head_start * hd, t.local_kv_heads * hd};
  const Slice q_cols{0, -1, t.head_start * hd, t.local_heads * hd};
  const Slice inter_rows{t.inter_start, t.local_inter};
  const Slice inter_cols{0, -1, t.inter_start, t.local_inter};
  L.embed = B.tensor("model.embed_tokens.weight", {c.vocab_size, h}, 1.f, vocab);
  L.final_norm = B.tensor("model.norm.weight", {h}, kDummyOnes);
  if (!c.tie_word_embeddings) L.lm_head = B.tensor("lm_head.weight", {c.vocab_size, h}, s_h, vocab);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerOffsets o;
    o.input_norm = B.tensor(p + "input_layernorm.weight", {h}, kDummyOnes);
    o.qkv = B.tensor(p + "self_attn.q_proj.weight", {q, h}, s_h, q_rows);
    B.add(p + "self_attn.k_proj.weight", {kv, h}, s_h, kv_rows);
    B.add(p + "self_attn.v_proj.weight", {kv, h}, s_h, kv_rows);
    if (c.qkv_bias) {
      o.qkv_bias = B.tensor(p + "self_attn.q_proj.bias", {q}, 0.02f, q_rows);
      B.add(p + "self_attn.k_proj.bias", {kv}, 0.02f, kv_rows);
      B.add(p + "self_attn.v_proj.bias", {kv}, 0.02f, kv_rows);
    }
    if (c.qk_norm) {
      o.q_norm = B.tensor(p + "self_attn.q_norm.weight", {c.head_dim}, kDummyOnes);
      o.k_norm = B.tensor(p + "self_attn.k_norm.weight", {c.head_dim}, kDummyOnes);
    }
    o.o_proj = B.tensor(p + "self_attn.o_proj.weight", {h, q}, 1.f / std::sqrt(float(q)), q_cols);
    o.post_norm = B.tensor(p + "post_attention_layernorm.weight", {h}, kDummyOnes);
    o.gate_up = B.tensor(p + "mlp.gate_proj.weight", {inter, h}, s_h, inter_rows);
    B.add(p + "mlp.up_proj.weight", {inter, h}, s_h, inter_rows);
    o.down =
        B.tensor(p + "mlp.down_proj.weight", {h, inter}, 1.f / std::sqrt(float(inter)), inter_cols);
    L.layers.push_back(o);
  }
  B.begin();
  return std::move(B.L);
}

}  // namespace folio
