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
  std::string type = "default";  // "default", "linear" or "llama3"
  // linear (transformers' position interpolation: inv_freq / factor) and llama3 scaling.
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
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
  // `layer_types`); never Llama's. folio attends over the whole context, which is the same
  // computation up to N tokens, so max_context_len() stops there (vLLM's --disable-sliding-window).
  std::optional<int> sliding_window;
  RopeConfig rope;
  GenerationDefaults generation;

  int q_size() const { return num_heads * head_dim; }
  int kv_size() const { return num_kv_heads * head_dim; }
  // The longest sequence (prompt + output) this model runs at as its reference does:
  // max_position_embeddings, capped at sliding_window.
  int max_context_len() const {
    return sliding_window && *sliding_window < max_position_embeddings ? *sliding_window
                                                                       : max_position_embeddings;
  }

  // Parses and validates a config.json object; `source` names the file in error messages.
  static Result<ModelConfig> from_json(const nlohmann::json& j, const std::string& source);
  // Reads DIR/config.json and, if present, DIR/generation_config.json.
  static Result<ModelConfig> load(const std::string& model_dir);
};

}  // namespace folio
