// A model whose attention slides a window (Mistral-7B-v0.1's 4096 tokens, Qwen2 with
// use_sliding_window) runs at most that many tokens per sequence: folio attends over the whole
// context, which is the model's computation only up to the window. Unset, --max-model-len takes
// the window; set past it, loading fails with a message that says why.
#include <gtest/gtest.h>

#include "engine/engine_factory.h"
#include "engine_runner.h"
#include "scratch_dir.h"

namespace folio {
namespace {

using nlohmann::json;

// A tiny Mistral config (dummy weights) with the given window, written into `dir`.
std::string write_mistral_config(const testing::ScratchDir& dir, const json& window) {
  json c = {{"architectures", {"MistralForCausalLM"}},
            {"hidden_size", 64},
            {"intermediate_size", 128},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"vocab_size", 256},
            {"max_position_embeddings", 512},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 10000.0},
            {"torch_dtype", "float32"},
            {"sliding_window", window}};
  return dir.write("config.json", c.dump());
}

Result<std::unique_ptr<EngineCore>> load(const std::string& config_path, int max_model_len) {
  EngineConfig c;
  c.sched.max_model_len = max_model_len;
  LoadOptions o;
  o.device = "cpu";
  o.load_format = "dummy";
  o.model_config_file = config_path;
  return load_engine(o, c);
}

TEST(SlidingWindow, UnsetMaxModelLenTakesTheWindow) {
  const testing::ScratchDir dir;
  const std::string path = write_mistral_config(dir, 128);
  auto e = load(path, 0);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ((*e)->max_model_len(), 128);
  auto within = load(path, 100);
  ASSERT_TRUE(within.ok()) << within.status().message();
  EXPECT_EQ((*within)->max_model_len(), 100);
}

TEST(SlidingWindow, MaxModelLenPastTheWindowIsAnError) {
  const testing::ScratchDir dir;
  const std::string path = write_mistral_config(dir, 128);
  auto e = load(path, 129);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--max-model-len 129 exceeds the model's sliding_window 128"),
            std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("sliding-window attention"), std::string::npos);
  // Past max_position_embeddings the older message stands.
  auto far = load(path, 1000);
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find("max_position_embeddings 512"), std::string::npos);
}

TEST(SlidingWindow, NoWindowOrAWiderOneLeavesTheModelsLength) {
  for (const json& window : {json(nullptr), json(4096)}) {
    const testing::ScratchDir dir;
    const std::string path = write_mistral_config(dir, window);
    auto e = load(path, 0);
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_EQ((*e)->max_model_len(), 512) << window.dump();
  }
}

}  // namespace
}  // namespace folio
