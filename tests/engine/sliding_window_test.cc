// A model whose attention slides a window (Mistral-7B-v0.1's 4096 tokens, Qwen2 with
// use_sliding_window) keeps its whole length, and each layer attends over the window only: what
// lies outside every layer's window cannot reach the output.
#include <gtest/gtest.h>

#include "dummy_configs.h"
#include "engine/engine_factory.h"
#include "engine_runner.h"
#include "scratch_dir.h"

namespace folio {
namespace {

using nlohmann::json;

// A tiny Mistral config (dummy weights) with the given window, written into `dir`.
std::string write_mistral_config(const testing::ScratchDir& dir, const json& window) {
  json c = testing::tiny_config("MistralForCausalLM");
  c["sliding_window"] = window;
  return dir.write("config.json", c.dump());
}

Result<std::unique_ptr<EngineCore>> load(const std::string& config_path, int max_model_len) {
  return testing::load_dummy_engine(config_path, max_model_len);
}

TEST(SlidingWindow, TheModelKeepsItsFullLength) {
  const testing::ScratchDir dir;
  const std::string path = write_mistral_config(dir, 128);
  auto e = load(path, 0);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ((*e)->max_model_len(), 512);
  auto far = load(path, 1000);
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find("max_position_embeddings 512"), std::string::npos)
      << far.status().message();
}

// Greedy continuation (token ids and their cumulative logprob) of a prompt of 60 tokens.
struct Continuation {
  std::vector<int32_t> tokens;
  double cumulative_logprob = 0;
  bool operator==(const Continuation&) const = default;
};

Continuation continue_prompt(EngineCore& engine, const std::vector<int32_t>& prompt) {
  GenerateRequest r;
  r.prompt_token_ids = prompt;
  r.params.temperature = 0;
  r.params.max_tokens = 6;
  r.params.ignore_eos = true;
  const testing::RunResult out = testing::run_all(engine, {r});
  EXPECT_TRUE(out.add_status[0].ok());
  EXPECT_TRUE(out.outputs[0].error.ok()) << out.outputs[0].error.message();
  Continuation c;
  for (const CompletionDelta& d : out.outputs[0].deltas) {
    c.tokens.insert(c.tokens.end(), d.token_ids.begin(), d.token_ids.end());
    c.cumulative_logprob = d.cumulative_logprob;
  }
  EXPECT_EQ(c.tokens.size(), 6u);
  return c;
}

// With a window of 8 over 2 layers, the last position's output depends on the 2 x 7 positions
// before it and no further: prompts that differ only in their first 20 of 60 tokens continue
// identically (bit for bit), while one that differs at position 55 does not. Under full
// attention (no window) the early difference shows.
TEST(SlidingWindow, TokensOutsideTheLayersWindowsDoNotReachTheOutput) {
  std::vector<int32_t> a(60), early(60), late(60);
  for (int i = 0; i < 60; ++i) a[i] = (i * 37 + 11) % 256;
  early = late = a;
  for (int i = 0; i < 20; ++i) early[i] = (early[i] + 101) % 256;
  late[55] = (late[55] + 101) % 256;
  const testing::ScratchDir dir, dir_full;
  auto windowed = load(write_mistral_config(dir, 8), 0);
  ASSERT_TRUE(windowed.ok()) << windowed.status().message();
  const Continuation base = continue_prompt(**windowed, a);
  EXPECT_EQ(continue_prompt(**windowed, early), base);
  EXPECT_NE(continue_prompt(**windowed, late), base);
  auto full = load(write_mistral_config(dir_full, nullptr), 0);
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_NE(continue_prompt(**full, early), continue_prompt(**full, a));
}

}  // namespace
}  // namespace folio
