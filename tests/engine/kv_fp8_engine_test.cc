// The engine with --kv-cache-dtype fp8 on the CPU reference: the config reaches the executor,
// and preemption (swap copies the rounded values as they are; recompute rounds the same values
// again) gives token for token the outputs of an unconstrained fp8 run.
#include <gtest/gtest.h>

#include <random>

#include "engine_runner.h"

namespace folio {
namespace {

using testing::make_engine;
using testing::run_all;

std::vector<GenerateRequest> requests(int vocab) {
  std::mt19937 rng(99);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 24; ++i) {
    GenerateRequest g;
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int t = 0; t < len; ++t) g.prompt_token_ids.push_back(static_cast<int32_t>(rng() % vocab));
    g.params.temperature = 0.0f;
    g.params.has_temperature = true;
    g.params.max_tokens = 1 + static_cast<int>(rng() % 12);
    g.params.ignore_eos = true;
    reqs.push_back(std::move(g));
  }
  return reqs;
}

std::vector<std::vector<int32_t>> tokens_of(const testing::RunResult& r) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& o : r.outputs)
    out.push_back(o.deltas.empty() ? std::vector<int32_t>{} : o.deltas[0].token_ids);
  return out;
}

TEST(EngineKvFp8, ConfigReachesTheExecutor) {
  EngineConfig c;
  c.num_kv_blocks = 64;
  c.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
  auto engine = make_engine("llama_gqa", c);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->executor().kv_shape().dtype, KvCacheDtype::kFp8E4m3);
  EXPECT_EQ(engine->config().kv_cache_dtype, KvCacheDtype::kFp8E4m3);
  // The CPU reference stores fp32 either way: the same budget plans the same blocks.
  EngineConfig a, f;
  f.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
  auto m = ModelConfig::load(testing::model_path("llama_gqa"));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(plan_kv_cache(f, *m).num_blocks, plan_kv_cache(a, *m).num_blocks);
  EXPECT_EQ(plan_kv_cache(f, *m).dtype, KvCacheDtype::kFp8E4m3);
  EXPECT_EQ(plan_kv_cache(a, *m).dtype, KvCacheDtype::kAuto);
}

TEST(EngineKvFp8, TinyPoolMatchesUnconstrainedRun) {
  auto reqs = requests(512);
  EngineConfig big;
  big.num_kv_blocks = 1024;
  big.enable_prefix_caching = false;
  big.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
  auto ref_engine = make_engine("llama_gqa", big);
  ASSERT_NE(ref_engine, nullptr);
  const auto ref = tokens_of(run_all(*ref_engine, reqs));
  for (const auto& t : ref) ASSERT_FALSE(t.empty());
  for (auto pre : {PreemptionMode::kSwap, PreemptionMode::kRecompute})
    for (KvCacheMode mode : {KvCacheMode::kPaged, KvCacheMode::kToken}) {
      EngineConfig c = big;
      c.kv_mode = mode;
      c.block_size = 4;
      c.num_kv_blocks = 16;      // 64 tokens: the longest request (40 + 12) and little more
      c.max_total_tokens = 64;
      c.sched.preemption_mode = pre;
      c.sched.max_num_batched_tokens = 48;
      c.sched.schedule_conservativeness = 0.0;  // vLLM's admission: the tiny pool preempts
      c.swap_space_gib = pre == PreemptionMode::kSwap ? 1.0 / 1024 : 0.0;
      auto engine = make_engine("llama_gqa", c);
      ASSERT_NE(engine, nullptr);
      const std::string what = std::string(mode == KvCacheMode::kToken ? "token" : "paged") +
                               (pre == PreemptionMode::kSwap ? " swap" : " recompute");
      EXPECT_EQ(tokens_of(run_all(*engine, reqs)), ref) << what;
      EXPECT_GT(engine->scheduler().stats().num_preemptions, 0) << what;
      if (pre == PreemptionMode::kSwap) {
        EXPECT_GT(engine->scheduler().stats().num_swapped_out_blocks, 0) << what;
      }
      EXPECT_EQ(engine->kv().num_free_blocks(), engine->kv().num_total_blocks()) << what;
    }
}

}  // namespace
}  // namespace folio
