// Every decoding method in one batch on one memory manager: a seeded sampled request, an n=3
// seeded request and a greedy one give the same tokens alone, mixed with each other and with a
// beam-search request, and on a tiny pool that preempts (recompute and swap).
#include <gtest/gtest.h>

#include "engine_runner.h"

namespace folio {
namespace {

GenerateRequest req(std::vector<int32_t> prompt, int max_tokens) {
  GenerateRequest g;
  g.prompt_token_ids = std::move(prompt);
  g.params.max_tokens = max_tokens;
  g.params.ignore_eos = true;
  return g;
}

std::vector<GenerateRequest> workload() {
  std::vector<GenerateRequest> r;
  GenerateRequest sampled = req({11, 12, 13, 14, 15, 16, 17}, 14);
  sampled.params.temperature = 0.9f;
  sampled.params.top_p = 0.9f;
  sampled.params.seed = 1234;
  sampled.params.has_temperature = true;
  r.push_back(sampled);
  GenerateRequest parallel = req({21, 22, 23, 24, 25}, 10);
  parallel.params.temperature = 1.0f;
  parallel.params.n = 3;
  parallel.params.seed = 99;
  parallel.params.presence_penalty = 0.5f;
  r.push_back(parallel);
  GenerateRequest greedy = req(std::vector<int32_t>(37, 41), 12);
  greedy.params.temperature = 0.0f;
  greedy.params.has_temperature = true;
  r.push_back(greedy);
  GenerateRequest beam = req({31, 32, 33, 34, 35, 36, 37, 38, 39}, 8);
  beam.params.use_beam_search = true;
  beam.params.temperature = 0.0f;
  beam.params.n = 3;
  r.push_back(beam);
  return r;
}

std::vector<std::vector<int32_t>> all_tokens(const RequestOutput& o) {
  std::vector<std::vector<int32_t>> t;
  for (const auto& d : o.deltas) t.push_back(d.token_ids);
  return t;
}

TEST(MixedDecoding, SameTokensAloneMixedAndPreempted) {
  auto reqs = workload();
  EngineConfig roomy;
  roomy.num_kv_blocks = 512;
  roomy.block_size = 4;
  std::vector<std::vector<std::vector<int32_t>>> alone;
  for (const auto& r : reqs) {
    auto e = testing::make_engine("qwen3_hd64", roomy);
    ASSERT_NE(e, nullptr);
    auto res = testing::run_all(*e, {r});
    ASSERT_TRUE(res.add_status[0].ok()) << res.add_status[0].to_string();
    alone.push_back(all_tokens(res.outputs[0]));
  }
  EXPECT_EQ(alone[1].size(), 3u);
  EXPECT_NE(alone[1][0], alone[1][1]);  // the n=3 siblings diverge
  EXPECT_EQ(alone[3].size(), 3u);

  // The tiny pools admit as vLLM does (no headroom), so that they preempt; the last setup keeps
  // the default admission headroom, which holds requests back instead.
  struct Setup {
    const char* name;
    int blocks;
    PreemptionMode mode;
    double conservativeness = 0.0;
  };
  for (Setup s : {Setup{"mixed", 512, PreemptionMode::kRecompute},
                  Setup{"tiny pool, recompute", 16, PreemptionMode::kRecompute},
                  Setup{"tiny pool, swap", 16, PreemptionMode::kSwap},
                  Setup{"tiny pool, headroom", 16, PreemptionMode::kRecompute, 1.0}}) {
    EngineConfig c = roomy;
    c.num_kv_blocks = s.blocks;
    c.sched.preemption_mode = s.mode;
    c.sched.schedule_conservativeness = s.conservativeness;
    c.swap_space_gib = 1.0 / 256;
    c.sched.max_num_batched_tokens = 16;
    auto e = testing::make_engine("qwen3_hd64", c);
    ASSERT_NE(e, nullptr);
    auto res = testing::run_all(*e, reqs);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(all_tokens(res.outputs[i]), alone[i]) << s.name << ", request " << i;
    if (s.blocks < 100 && s.conservativeness == 0.0) {
      EXPECT_GT(e->scheduler().stats().num_preemptions, 0) << s.name;
    }
    EXPECT_EQ(e->kv().num_free_blocks(), e->kv().num_total_blocks()) << s.name;
  }
}

}  // namespace
}  // namespace folio
