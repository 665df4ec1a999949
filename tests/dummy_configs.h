// Small config.json objects for dummy-weight tests (`--load-format dummy --model-config FILE`,
// LoadOptions::model_config_file): tiny shapes, so a CPU engine loads them in a moment.
#pragma once

#include <nlohmann/json.hpp>

namespace folio::testing {

// A one-layer Llama with Llama 3's vocabulary (128256 ids), so data/tokenizers/llama3's ids fit.
inline nlohmann::json tiny_llama3_vocab_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 1},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"vocab_size", 128256},
          {"max_position_embeddings", 256},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"torch_dtype", "float32"}};
}

// A two-layer model of `architecture` (vocabulary 256, 512 positions) to load on the CPU in a
// moment; callers add or change the keys under test (sliding_window, rope_scaling, ...).
inline nlohmann::json tiny_config(const char* architecture) {
  return {{"architectures", {architecture}},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"vocab_size", 256},
          {"max_position_embeddings", 512},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"torch_dtype", "float32"}};
}

}  // namespace folio::testing
