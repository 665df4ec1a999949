#include "model/llama_weights.h"

#include <cmath>
#include <string>

namespace folio {
namespace {

using Shape = std::vector<int64_t>;

Status load_into(const Checkpoint& ck, const std::string& name, const Shape& shape,
                 std::vector<float>& out) {
  FOLIO_ASSIGN_OR_RETURN(const TensorView* t, ck.get(name));
  return tensor_to_f32(*t, shape, out);
}

// Appends the rows of `part` to `dst` (fusing matrices along the output dimension).
void append(std::vector<float>& dst, const std::vector<float>& part) {
  dst.insert(dst.end(), part.begin(), part.end());
}

Status load_layer(const ModelConfig& c, const Checkpoint& ck, int i, LlamaLayerWeights& L) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  std::vector<float> tmp;
  FOLIO_RETURN_IF_ERROR(load_into(ck, p + "input_layernorm.weight", {h}, L.input_norm));
  FOLIO_RETURN_IF_ERROR(load_into(ck, p + "self_attn.q_proj.weight", {q, h}, L.qkv));
  FOLIO_RETURN_IF_ERROR(load_into(ck, p + "self_attn.k_proj.weight", {kv, h}, tmp));
  append(L.qkv, tmp);
  FOLIO_RETURN_IF_ERROR(load_into(ck, p + "self_attn.v_proj.weight", {kv, h}, tmp));
  append(L.qkv, tmp);
  if (c.qkv_bias) {
    FOLIO_RETURN_IF_ERROR(load_into(ck, p + "self_attn.q_proj.bias", {q}, L.qkv_bias));
    FOLIO_RETURN_IF_ERROR(load_into(ck, p + "self_attn.k_proj.bias", {kv}, tmp));
    append(L.qkv_bias, tmp);
    FOLIO_RETURN_IF_ERROR(load_into(ck, p + "self_attn.v_proj.bias", {kv}, tmp));
    append(L.qkv_bias, tmp);
  }
  if (c.qk_norm) {
    FOLIO_RETURN_IF_ERROR(load_into(ck, p + "self_attn.q_norm.weight", {c.head_dim}, L.q_norm));
    FOLIO_RETURN_IF_ERROR(load_into(ck, p + "self_attn.k_norm.weight", {c.head_dim}, L.k_norm));
  }
  FOLIO_RETURN_IF_ERROR(load_into(ck, p + "self_attn.o_proj.weight", {h, q}, L.o_proj));
  FOLIO_RETURN_IF_ERROR(load_into(ck, p + "post_attention_layernorm.weight", {h}, L.post_norm));
  FOLIO_RETURN_IF_ERROR(load_into(ck, p + "mlp.gate_proj.weight", {inter, h}, L.gate_up));
  FOLIO_RETURN_IF_ERROR(load_into(ck, p + "mlp.up_proj.weight", {inter, h}, tmp));
  append(L.gate_up, tmp);
  FOLIO_RETURN_IF_ERROR(load_into(ck, p + "mlp.down_proj.weight", {h, inter}, L.down));
  return Status();
}

// splitmix64: a small deterministic generator for dummy weights.
struct SplitMix {
  uint64_t s;
  float next_uniform() {  // in [-1, 1)
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
};

void fill(std::vector<float>& v, size_t n, float scale, SplitMix& rng) {
  v.resize(n);
  for (float& x : v) x = rng.next_uniform() * scale;
}
void fill_ones(std::vector<float>& v, size_t n) {
  v.assign(n, 1.0f);
}

}  // namespace

Result<LlamaWeights> LlamaWeights::load(const ModelConfig& c, const Checkpoint& ck) {
  LlamaWeights w;
  const int64_t h = c.hidden_size, vocab = c.vocab_size;
  FOLIO_RETURN_IF_ERROR(load_into(ck, "model.embed_tokens.weight", {vocab, h}, w.embed));
  FOLIO_RETURN_IF_ERROR(load_into(ck, "model.norm.weight", {h}, w.final_norm));
  // Some tied checkpoints still ship lm_head.weight; the config decides.
  if (!c.tie_word_embeddings)
    FOLIO_RETURN_IF_ERROR(load_into(ck, "lm_head.weight", {vocab, h}, w.lm_head));
  w.layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) FOLIO_RETURN_IF_ERROR(load_layer(c, ck, i, w.layers[i]));
  return w;
}

LlamaWeights LlamaWeights::dummy(const ModelConfig& c, uint64_t seed) {
  SplitMix rng{seed};
  LlamaWeights w;
  const size_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  const float s_in = 1.0f / std::sqrt(static_cast<float>(h));
  fill(w.embed, c.vocab_size * h, 1.0f, rng);
  fill_ones(w.final_norm, h);
  if (!c.tie_word_embeddings) fill(w.lm_head, c.vocab_size * h, s_in, rng);
  w.layers.resize(c.num_layers);
  for (auto& L : w.layers) {
    fill_ones(L.input_norm, h);
    fill(L.qkv, (q + 2 * kv) * h, s_in, rng);
    if (c.qkv_bias) fill(L.qkv_bias, q + 2 * kv, 0.02f, rng);
    if (c.qk_norm) {
      fill_ones(L.q_norm, c.head_dim);
      fill_ones(L.k_norm, c.head_dim);
    }
    fill(L.o_proj, h * q, 1.0f / std::sqrt(static_cast<float>(q)), rng);
    fill_ones(L.post_norm, h);
    fill(L.gate_up, 2 * inter * h, s_in, rng);
    fill(L.down, h * inter, 1.0f / std::sqrt(static_cast<float>(inter)), rng);
  }
  return w;
}

}  // namespace folio
