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

Result<std::unique_ptr<EngineCore>> load(const std::string& config_path, int max_model_len,
                                         const EngineConfig& c = EngineConfig()) {
  return testing::load_dummy_engine(config_path, max_model_len, "", c);
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

// The engine frees the blocks that fell out of the window (paged mode): requests of 20 + 40
// tokens run to full length on a cache of 12 blocks of 4 (48 tokens, 11 usable), several at a
// time, and produce the greedy tokens of a roomy cache; in token mode every slot stays held, so
// the same cache ends each request where it runs out (finish reason length).
TEST(SlidingWindow, BlocksOutsideTheWindowAreFreedAndTheTokensDoNotChange) {
  const testing::ScratchDir dir;
  const std::string path = write_mistral_config(dir, 8);
  std::vector<GenerateRequest> reqs;
  for (int r = 0; r < 6; ++r) {
    GenerateRequest g;
    for (int i = 0; i < 20; ++i) g.prompt_token_ids.push_back((r * 31 + i * 7 + 3) % 256);
    g.params.temperature = 0;
    g.params.max_tokens = 40;
    g.params.ignore_eos = true;
    reqs.push_back(g);
  }
  auto tokens_of = [](const testing::RunResult& out) {
    std::vector<std::vector<int32_t>> t;
    for (const RequestOutput& o : out.outputs) {
      EXPECT_TRUE(o.error.ok()) << o.error.message();
      t.emplace_back();
      for (const CompletionDelta& d : o.deltas)
        t.back().insert(t.back().end(), d.token_ids.begin(), d.token_ids.end());
    }
    return t;
  };
  EngineConfig roomy_config;
  roomy_config.block_size = 4;
  roomy_config.num_kv_blocks = 512;
  auto roomy = load(path, 0, roomy_config);
  ASSERT_TRUE(roomy.ok()) << roomy.status().message();
  const auto want = tokens_of(testing::run_all(**roomy, reqs));
  for (const auto& t : want) ASSERT_EQ(t.size(), 40u);

  EngineConfig tiny_config = roomy_config;
  tiny_config.num_kv_blocks = 12;
  auto tiny = load(path, 0, tiny_config);
  ASSERT_TRUE(tiny.ok()) << tiny.status().message();
  EXPECT_EQ((*tiny)->kv().num_total_blocks(), 11);  // one block is the null block
  EXPECT_EQ(tokens_of(testing::run_all(**tiny, reqs)), want);
  EXPECT_EQ((*tiny)->kv().num_used_blocks(), 0);
  EXPECT_TRUE((*tiny)->kv().check_invariants().ok());

  EngineConfig token_config;
  token_config.kv_mode = KvCacheMode::kToken;
  token_config.max_total_tokens = 48;
  auto token = load(path, 0, token_config);
  ASSERT_TRUE(token.ok()) << token.status().message();
  for (const auto& t : tokens_of(testing::run_all(**token, reqs))) EXPECT_EQ(t.size(), 28u);
}

}  // namespace
}  // namespace folio
