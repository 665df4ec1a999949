// Test helper: writes a small random Llama-family checkpoint (config.json + one bf16
// model.safetensors) into a fresh temporary folder, so the CPU and CUDA executors can load the
// very same weights through their real loaders.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace folio::testing {

struct TinyModelSpec {
  std::string architecture = "LlamaForCausalLM";
  int vocab = 384, hidden = 256, inter = 512, layers = 2, heads = 4, kv_heads = 2, head_dim = 64;
  bool tied = false;
  uint32_t seed = 1;
  nlohmann::json config_keys =
      nlohmann::json::object();  // more config.json keys (rope_scaling, ...)
};

inline uint16_t bf16_bits(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Returns the folder. Weights: uniform, scaled 1/sqrt(fan_in); norms near 1.
inline std::string write_tiny_checkpoint(const TinyModelSpec& s) {
  char tmpl[] = "/tmp/folio_tiny_ckpt_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const bool qwen2 = s.architecture == "Qwen2ForCausalLM", qwen3 = s.architecture == "Qwen3ForCausalLM";
  nlohmann::json cfg = {{"architectures", {s.architecture}},
                        {"vocab_size", s.vocab},
                        {"hidden_size", s.hidden},
                        {"intermediate_size", s.inter},
                        {"num_hidden_layers", s.layers},
                        {"num_attention_heads", s.heads},
                        {"num_key_value_heads", s.kv_heads},
                        {"head_dim", s.head_dim},
                        {"max_position_embeddings", 4096},
                        {"rms_norm_eps", 1e-6},
                        {"rope_theta", 10000.0},
                        {"tie_word_embeddings", s.tied},
                        {"torch_dtype", "bfloat16"}};
  for (const auto& [key, value] : s.config_keys.items()) cfg[key] = value;
  std::ofstream(dir + "/config.json") << cfg.dump(2);

  std::mt19937 rng(s.seed);
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint16_t> data;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float center) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    const size_t begin = data.size() * 2;
    for (size_t i = 0; i < n; ++i) data.push_back(bf16_bits(center + scale * u(rng)));
    header[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {begin, data.size() * 2}}};
  };
  const int64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim, in = s.inter;
  const float sh = 1.f / std::sqrt(float(h));
  add("model.embed_tokens.weight", {s.vocab, h}, 1.f, 0.f);
  add("model.norm.weight", {h}, 0.1f, 1.f);
  if (!s.tied) add("lm_head.weight", {s.vocab, h}, sh, 0.f);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {h}, 0.1f, 1.f);
    add(p + "self_attn.q_proj.weight", {q, h}, sh, 0.f);
    add(p + "self_attn.k_proj.weight", {kv, h}, sh, 0.f);
    add(p + "self_attn.v_proj.weight", {kv, h}, sh, 0.f);
    if (qwen2) {
      add(p + "self_attn.q_proj.bias", {q}, 0.1f, 0.f);
      add(p + "self_attn.k_proj.bias", {kv}, 0.1f, 0.f);
      add(p + "self_attn.v_proj.bias", {kv}, 0.1f, 0.f);
    }
    if (qwen3) {
      add(p + "self_attn.q_norm.weight", {s.head_dim}, 0.1f, 1.f);
      add(p + "self_attn.k_norm.weight", {s.head_dim}, 0.1f, 1.f);
    }
    add(p + "self_attn.o_proj.weight", {h, q}, 1.f / std::sqrt(float(q)), 0.f);
    add(p + "post_attention_layernorm.weight", {h}, 0.1f, 1.f);
    add(p + "mlp.gate_proj.weight", {in, h}, sh, 0.f);
    add(p + "mlp.up_proj.weight", {in, h}, sh, 0.f);
    add(p + "mlp.down_proj.weight", {h, in}, 1.f / std::sqrt(float(in)), 0.f);
  }
  std::string hdr = header.dump();
  while (hdr.size() % 8) hdr += ' ';
  std::ofstream f(dir + "/model.safetensors", std::ios::binary);
  const uint64_t len = hdr.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f.write(hdr.data(), static_cast<std::streamsize>(hdr.size()));
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * 2));
  return dir;
}

}  // namespace folio::testing
