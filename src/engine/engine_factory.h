// Builds a ready EngineCore from a Hugging Face model folder: config, weights (or dummy ones),
// tokenizer when the folder has one, the executor for the device, and the KV cache sized from
// the config.
#pragma once

#include <memory>
#include <string>

#include "engine/engine_core.h"

namespace folio {

struct LoadOptions {
  std::string model_dir;
  std::string device = "auto";       // "cpu", "cuda" (CUDA builds), or "auto": cuda when a GPU is present
  std::string load_format = "auto";  // "auto" (safetensors) or "dummy" (random weights)
  std::string model_config_file;     // with dummy: a config.json path instead of model_dir
  // tokenizer.json (+ tokenizer_config.json, chat template) from here instead of model_dir
  // (vLLM's --tokenizer): a tokenizer for dummy weights, or one kept apart from the weights.
  std::string tokenizer_dir;
  // vLLM's --hf-overrides: a JSON object whose keys replace config.json's (apply_hf_overrides),
  // e.g. {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, ...}}. Empty: none.
  std::string hf_overrides;
  const std::string& tokenizer_source() const {
    return tokenizer_dir.empty() ? model_dir : tokenizer_dir;
  }
};

Result<std::unique_ptr<EngineCore>> load_engine(const LoadOptions& options, EngineConfig config);

// The KV cache shape the config asks for on this model (block size 1 in token mode), for the
// CPU executor: its dtype is the config's, its block count planned in fp32 (see the definition).
KvCacheShape plan_kv_cache(const EngineConfig& config, const ModelConfig& model);

}  // namespace folio
