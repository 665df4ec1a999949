// Async scheduling under tensor parallelism: the whole engine (load_engine with
// tensor_parallel_size) with steps launched ahead against the same engine with synchronous
// steps. Rank 0 samples and broadcasts the tokens; the other ranks' placeholder tokens are
// resolved from that broadcast, so a rank that read stale or missing samples would embed other
// tokens and change every later logit. Same GPUs, same kernels and the same step shapes on both
// runs: tokens and logprobs must agree bit for bit. Skips without enough GPUs.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/engine_factory.h"
#include "engine/engine_runner.h"

namespace folio {
namespace {

using testing::model_path;
using testing::run_all;

int gpus() {
  auto n = cuda::device_count();
  return n.ok() ? *n : 0;
}

// Varied prompts (a third share a prefix) with seeded sampling, penalties on the token in
// flight, min_tokens, logprobs and n > 1; lengths only as stops, so both runs batch the same.
std::vector<GenerateRequest> tp_requests(int vocab) {
  std::mt19937 rng(77);
  std::vector<int32_t> shared(40);
  for (auto& t : shared) t = static_cast<int32_t>(rng() % vocab);
  std::vector<GenerateRequest> reqs;
  std::vector<int32_t> long_prompt(600);  // three chunks at a 256-token budget: launches that sample nothing
  for (size_t t = 0; t < long_prompt.size(); ++t) long_prompt[t] = static_cast<int32_t>((t * 37) % vocab);
  for (int i = 0; i < 33; ++i) {
    GenerateRequest g;
    if (i == 0) {
      g.prompt_token_ids = long_prompt;
    } else {
      if (i % 3 == 0) g.prompt_token_ids.assign(shared.begin(), shared.begin() + 20 + i % 17);
      const int len = 1 + static_cast<int>(rng() % 48);
      while (static_cast<int>(g.prompt_token_ids.size()) < len)
        g.prompt_token_ids.push_back(static_cast<int32_t>(rng() % vocab));
    }
    g.params.max_tokens = 4 + static_cast<int>(rng() % 20);
    g.params.ignore_eos = true;
    g.params.has_temperature = true;
    g.params.temperature = i % 2 == 0 ? 0.0f : 0.8f;
    g.params.seed = 500 + i;
    g.params.logprobs = 2;
    if (i % 3 == 1) {
      g.params.repetition_penalty = 1.2f;
      g.params.frequency_penalty = 0.3f;
      g.params.presence_penalty = 0.1f;
      g.params.min_tokens = 3;
    }
    if (i % 8 == 5) g.params.n = 3;
    reqs.push_back(std::move(g));
  }
  return reqs;
}

class TpAsync : public ::testing::TestWithParam<int> {};

TEST_P(TpAsync, LaunchedStepsMatchSynchronousSteps) {
  const int world = GetParam();
  FOLIO_REQUIRE_GPU();
  if (gpus() < world) GTEST_SKIP() << "needs " << world << " GPUs, found " << gpus();
  const std::vector<GenerateRequest> reqs = tp_requests(512);
  for (const bool token : {false, true}) {
    const std::string what = std::string("tp") + std::to_string(world) + (token ? " token" : " paged");
    auto run = [&](bool async, int64_t* async_steps) {
      EngineConfig c;
      c.kv_mode = token ? KvCacheMode::kToken : KvCacheMode::kPaged;
      c.block_size = token ? 1 : 16;
      c.num_kv_blocks = token ? 8192 : 512;
      c.max_total_tokens = 4096;
      c.sched.max_num_batched_tokens = 256;
      c.tensor_parallel_size = world;
      c.async_scheduling = async;
      LoadOptions o;
      o.model_dir = model_path("qwen3_hd64");
      o.device = "cuda";
      auto engine = load_engine(o, c);
      if (!engine.ok()) {
        ADD_FAILURE() << engine.status().to_string();
        *async_steps = 0;
        return testing::RunResult{};
      }
      auto res = run_all(**engine, reqs);
      *async_steps = (*engine)->counters().async_steps;
      EXPECT_EQ((*engine)->kv().num_free_blocks(), (*engine)->kv().num_total_blocks()) << what;
      return res;
    };
    int64_t sync_steps = 0, async_steps = 0;
    const auto want = run(false, &sync_steps), got = run(true, &async_steps);
    ASSERT_EQ(want.outputs.size(), reqs.size()) << what;
    ASSERT_EQ(got.outputs.size(), reqs.size()) << what;
    EXPECT_EQ(sync_steps, 0) << what;
    EXPECT_GT(async_steps, 10) << what;
    size_t tokens = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(got.add_status[i].ok()) << got.add_status[i].to_string();
      ASSERT_EQ(got.outputs[i].deltas.size(), want.outputs[i].deltas.size()) << what;
      for (size_t d = 0; d < got.outputs[i].deltas.size(); ++d) {
        const auto& w = want.outputs[i].deltas[d];
        const auto& g = got.outputs[i].deltas[d];
        ASSERT_EQ(g.token_ids, w.token_ids) << what << " request " << i << " sequence " << d;
        ASSERT_EQ(g.logprobs.size(), w.logprobs.size()) << what;
        for (size_t t = 0; t < g.logprobs.size(); ++t)
          EXPECT_EQ(g.logprobs[t].logprob, w.logprobs[t].logprob) << what << " request " << i;
        tokens += g.token_ids.size();
      }
    }
    std::printf("%s: %zu tokens identical, %lld steps launched ahead\n", what.c_str(), tokens,
                static_cast<long long>(async_steps));
  }
}

INSTANTIATE_TEST_SUITE_P(World, TpAsync, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "tp" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace folio
