#include "model/cpu_llama_executor.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "model/rope.h"

namespace folio {

CpuLlamaExecutor::CpuLlamaExecutor(ModelConfig config, LlamaWeights weights, KvCacheShape kv)
    : config_(std::move(config)), weights_(std::move(weights)), kv_(kv) {
  kv_.num_layers = config_.num_layers;
  kv_.num_kv_heads = config_.num_kv_heads;
  kv_.head_dim = config_.head_dim;
  inv_freq_ = rope_inv_freq(config_.rope, config_.head_dim);
  const size_t cache = block_elems() * kv_.num_blocks, swap = block_elems() * kv_.num_swap_blocks;
  k_cache_.assign(kv_.num_layers, std::vector<float>(cache));
  v_cache_.assign(kv_.num_layers, std::vector<float>(cache));
  k_swap_.assign(kv_.num_layers, std::vector<float>(swap));
  v_swap_.assign(kv_.num_layers, std::vector<float>(swap));
}

size_t CpuLlamaExecutor::block_elems() const {
  return static_cast<size_t>(kv_.block_size) * kv_.num_kv_heads * kv_.head_dim;
}

size_t CpuLlamaExecutor::kv_block_bytes(const ModelConfig& c, int block_size) {
  return 2ull * c.num_layers * block_size * c.kv_size() * sizeof(float);
}

Status CpuLlamaExecutor::execute(const ForwardBatch& b, std::vector<float>& logits) {
  const int T = b.num_tokens(), H = config_.hidden_size, V = config_.vocab_size;
  for (int32_t id : b.token_ids)
    if (id < 0 || id >= V)
      return invalid_argument("token id " + std::to_string(id) + " outside the vocabulary [0, " +
                              std::to_string(V) + ")");
  const int64_t num_slots = static_cast<int64_t>(kv_.num_blocks) * kv_.block_size;
  for (int64_t s : b.slot_mapping)
    if (s >= num_slots)
      return internal_error("slot " + std::to_string(s) + " outside the KV cache");
  // Embedding gather: x [T, hidden] is the residual stream.
  std::vector<float> x(static_cast<size_t>(T) * H);
  for (int t = 0; t < T; ++t)
    std::memcpy(&x[static_cast<size_t>(t) * H],
                &weights_.embed[static_cast<size_t>(b.token_ids[t]) * H], sizeof(float) * H);
  for (int l = 0; l < config_.num_layers; ++l) {
    attention_block(l, b, x);
    mlp_block(l, T, x);
  }
  // Final norm and lm_head, only for the rows whose logits are wanted.
  const int R = static_cast<int>(b.logits_rows.size());
  std::vector<float> rows(static_cast<size_t>(R) * H), normed(static_cast<size_t>(R) * H);
  for (int r = 0; r < R; ++r)
    std::memcpy(&rows[static_cast<size_t>(r) * H], &x[static_cast<size_t>(b.logits_rows[r]) * H],
                sizeof(float) * H);
  cpu::rms_norm(rows.data(), weights_.final_norm.data(), normed.data(), R, H,
                static_cast<float>(config_.rms_norm_eps));
  logits.resize(static_cast<size_t>(R) * V);
  cpu::matmul_nt(normed.data(), weights_.lm_head_or_embed().data(), logits.data(), R, V, H);
  return Status();
}

// x += o_proj(attention(rope(qkv(rms_norm(x))))), writing this step's K/V into the cache.
void CpuLlamaExecutor::attention_block(int l, const ForwardBatch& b, std::vector<float>& x) {
  const auto& L = weights_.layers[l];
  const int T = b.num_tokens(), H = config_.hidden_size, hd = config_.head_dim;
  const int q_size = config_.q_size(), kv_size = config_.kv_size(), width = q_size + 2 * kv_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  normed_.resize(static_cast<size_t>(T) * H);
  cpu::rms_norm(x.data(), L.input_norm.data(), normed_.data(), T, H, eps);
  qkv_.resize(static_cast<size_t>(T) * width);
  cpu::matmul_nt(normed_.data(), L.qkv.data(), qkv_.data(), T, width, H);
  q_.resize(static_cast<size_t>(T) * q_size);
  k_.resize(static_cast<size_t>(T) * kv_size);
  v_.resize(static_cast<size_t>(T) * kv_size);
  for (int t = 0; t < T; ++t) {
    float* row = &qkv_[static_cast<size_t>(t) * width];
    if (!L.qkv_bias.empty())
      for (int i = 0; i < width; ++i) row[i] += L.qkv_bias[i];
    std::memcpy(&q_[static_cast<size_t>(t) * q_size], row, sizeof(float) * q_size);
    std::memcpy(&k_[static_cast<size_t>(t) * kv_size], row + q_size, sizeof(float) * kv_size);
    std::memcpy(&v_[static_cast<size_t>(t) * kv_size], row + q_size + kv_size,
                sizeof(float) * kv_size);
  }
  if (config_.qk_norm) {  // Qwen3: RMSNorm over each head's head_dim, before rope
    cpu::rms_norm(q_.data(), L.q_norm.data(), q_.data(), T * config_.num_heads, hd, eps);
    cpu::rms_norm(k_.data(), L.k_norm.data(), k_.data(), T * config_.num_kv_heads, hd, eps);
  }
  cpu::apply_rope(q_.data(), b.positions.data(), T, config_.num_heads, hd, inv_freq_);
  cpu::apply_rope(k_.data(), b.positions.data(), T, config_.num_kv_heads, hd, inv_freq_);
  // K after rope (and qk-norm), exactly what attention reads back; q is never rounded.
  cpu::reshape_and_cache(k_.data(), v_.data(), b.slot_mapping.data(), T, kv_size,
                         k_cache_[l].data(), v_cache_[l].data(), kv_.dtype);
  cpu::PagedAttentionArgs args;
  args.num_seqs = b.num_seqs();
  args.num_heads = config_.num_heads;
  args.num_kv_heads = config_.num_kv_heads;
  args.head_dim = hd;
  args.block_size = kv_.block_size;
  args.scale = static_cast<float>(config_.softmax_scale());
  args.query_start = b.query_start.data();
  args.context_lens = b.context_lens.data();
  args.block_table_start = b.block_table_start.data();
  args.block_table = b.block_table.data();
  args.sliding_window = config_.layer_window(l);
  attn_.resize(static_cast<size_t>(T) * q_size);
  cpu::paged_attention(args, q_.data(), k_cache_[l].data(), v_cache_[l].data(), attn_.data());
  proj_.resize(static_cast<size_t>(T) * H);
  cpu::matmul_nt(attn_.data(), L.o_proj.data(), proj_.data(), T, H, q_size);
  for (size_t i = 0; i < x.size(); ++i) x[i] += proj_[i];
}

// x += down(silu(gate(n)) * up(n)), n = rms_norm(x).
void CpuLlamaExecutor::mlp_block(int l, int T, std::vector<float>& x) {
  const auto& L = weights_.layers[l];
  const int H = config_.hidden_size, I = config_.intermediate_size;
  normed_.resize(static_cast<size_t>(T) * H);
  cpu::rms_norm(x.data(), L.post_norm.data(), normed_.data(), T, H,
                static_cast<float>(config_.rms_norm_eps));
  gate_up_.resize(static_cast<size_t>(T) * 2 * I);
  cpu::matmul_nt(normed_.data(), L.gate_up.data(), gate_up_.data(), T, 2 * I, H);
  act_.resize(static_cast<size_t>(T) * I);
  cpu::silu_and_mul(gate_up_.data(), act_.data(), T, I);
  proj_.resize(static_cast<size_t>(T) * H);
  cpu::matmul_nt(act_.data(), L.down.data(), proj_.data(), T, H, I);
  for (size_t i = 0; i < x.size(); ++i) x[i] += proj_[i];
}

void CpuLlamaExecutor::copy_blocks(std::span<const BlockCopy> copies) {
  std::vector<int32_t> src, dst;
  for (const auto& c : copies) {
    src.push_back(c.src);
    dst.push_back(c.dst);
  }
  for (int l = 0; l < kv_.num_layers; ++l) {
    cpu::copy_blocks(k_cache_[l].data(), block_elems(), src, dst);
    cpu::copy_blocks(v_cache_[l].data(), block_elems(), src, dst);
  }
}

void CpuLlamaExecutor::swap_out(std::span<const BlockCopy> copies) {
  const size_t n = block_elems();
  for (int l = 0; l < kv_.num_layers; ++l)
    for (const auto& c : copies) {
      std::memcpy(&k_swap_[l][c.dst * n], &k_cache_[l][c.src * n], n * sizeof(float));
      std::memcpy(&v_swap_[l][c.dst * n], &v_cache_[l][c.src * n], n * sizeof(float));
    }
}

void CpuLlamaExecutor::swap_in(std::span<const BlockCopy> copies) {
  const size_t n = block_elems();
  for (int l = 0; l < kv_.num_layers; ++l)
    for (const auto& c : copies) {
      std::memcpy(&k_cache_[l][c.dst * n], &k_swap_[l][c.src * n], n * sizeof(float));
      std::memcpy(&v_cache_[l][c.dst * n], &v_swap_[l][c.src * n], n * sizeof(float));
    }
}

}  // namespace folio
