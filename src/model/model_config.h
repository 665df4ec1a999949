// ModelConfig: the parts of a Hugging Face `config.json` (and `generation_config.json`) that the
// Llama family needs: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM.
//
// Both spellings that published checkpoints use are accepted: `rope_theta` + `rope_scaling` +
// `torch_dtype` (most models) and `rope_parameters` + `dtype` (newer transformers).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace folio {

enum class Architecture { kLlama, kMistral, kQwen2, kQwen3 };

struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // "default", "linear", "llama3" or "yarn"
  // linear (transformers' position interpolation: inv_freq / factor), llama3 and yarn scaling.
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3 (required) and yarn (default: the config's max_position_embeddings): the context
  // the model was pretrained at, which sets the band of frequencies that scaling blends.
  int original_max_position_embeddings = 8192;
  // yarn: frequencies that turn more than beta_fast times over the original context keep their
  // value, those under beta_slow turns are divided by `factor`, and a linear ramp over the
  // dimensions between blends the two; `truncate` rounds the band's ends outward to integers.
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
  // transformers' attention_scaling: cos and sin are multiplied by it, so every attention logit
  // by its square (yarn: `attention_factor`, else 0.1 ln(factor) + 1, or the ratio of the two
  // mscale terms when `mscale` and `mscale_all_dim` are both set; 1 for the other types).
  double attention_factor = 1.0;
  // transformers keeps `inv_freq` as a buffer that is cast with the model: a checkpoint loaded
  // in bf16 rotates with bf16-rounded frequencies, and its outputs depend on it measurably
  // (~1e-3 relative logits on the fixtures). We follow transformers so outputs match the models'
  // reference implementation: "bfloat16" for bf16 checkpoints, else "float32".
  std::string inv_freq_precision = "float32";
};

struct GenerationDefaults {
  std::vector<int32_t> eos_token_ids;  // from generation_config.json, else config.json
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string architecture_name;  // as written in config.json
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // independent of hidden_size / num_heads when the config says so
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2
  bool qk_norm = false;   // Qwen3: RMSNorm over head_dim on q and k before rope
  std::string dtype = "bfloat16";
  std::optional<int32_t> bos_token_id;
  // The attention window of a model whose layers (some or all) slide it: such a layer lets
  // position i attend to positions (i - N, i] only. Read as transformers reads it: Mistral's
  // `sliding_window` (4096 when the key is absent, none when null); Qwen2/3's only with
  // `use_sliding_window` and a layer past `max_window_layers` (or a "sliding_attention" entry of
  // `layer_types`); never Llama's.
  std::optional<int> sliding_window;
  // Which layers slide it, by index, where only some do (Qwen2/3); empty: every layer.
  std::vector<bool> sliding_layers;
  RopeConfig rope;
  GenerationDefaults generation;

  int q_size() const { return num_heads * head_dim; }
  int kv_size() const { return num_kv_heads * head_dim; }
  // The longest sequence the model's positions reach, as vLLM derives it: max_position_embeddings,
  // times `factor` under linear scaling, original_max_position_embeddings times `factor` under
  // yarn (llama3's configs already give the extended length).
  int rope_scaled_max_len() const;
  // The longest sequence (prompt + output) this model runs at as its reference does.
  int max_context_len() const { return rope_scaled_max_len(); }
  // Layer `layer`'s attention window: sliding_window where that layer slides, else 0 (none).
  int layer_window(int layer) const;
  // The window every layer slides, or 0 where some layer attends to every position: a position
  // below it is never read again once the next query is past it (the KV manager frees it).
  int kv_window() const;
  // The attention logits' scale: rope's attention_factor squared over sqrt(head_dim). Folding
  // the factor here rather than into cos and sin is the same product up to rounding.
  double softmax_scale() const;

  // Parses and validates a config.json object; `source` names the file in error messages.
  static Result<ModelConfig> from_json(const nlohmann::json& j, const std::string& source);
  // Reads DIR/config.json (with `overrides` applied, see apply_hf_overrides) and, if present,
  // DIR/generation_config.json.
  static Result<ModelConfig> load(const std::string& model_dir,
                                  const nlohmann::json& overrides = nlohmann::json::object());
};

// vLLM's --hf-overrides: each top-level key of the `overrides` object replaces config.json's
// (PretrainedConfig.update: a nested object such as rope_scaling is replaced whole, and null
// sets null). An error if `overrides` is not an object.
Status apply_hf_overrides(nlohmann::json& config, const nlohmann::json& overrides);

}  // namespace folio
