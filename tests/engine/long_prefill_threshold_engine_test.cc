// --long-prefill-token-threshold through the whole CPU engine: long prompts prefill in chunks of
// the threshold (more steps), and every request gets the tokens and, to float rounding, the
// logprobs and prompt logprobs of an uncapped run.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine_runner.h"

namespace folio {
namespace {

using testing::make_engine;
using testing::run_all;

std::vector<GenerateRequest> mixed_lengths(int vocab) {
  std::mt19937 rng(7);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 10; ++i) {
    GenerateRequest g;
    const int len =
        i % 3 == 0 ? 90 + static_cast<int>(rng() % 60) : 2 + static_cast<int>(rng() % 20);
    for (int t = 0; t < len; ++t) g.prompt_token_ids.push_back(static_cast<int32_t>(rng() % vocab));
    g.params.temperature = 0.0f;
    g.params.has_temperature = true;
    g.params.max_tokens = 3 + static_cast<int>(rng() % 8);
    g.params.ignore_eos = true;
    g.params.logprobs = 2;
    if (i == 3) g.params.prompt_logprobs = 1;  // a long prompt whose every chunk returns rows
    reqs.push_back(std::move(g));
  }
  return reqs;
}

TEST(EngineLongPrefillThreshold, SameOutputsInMoreSteps) {
  const auto reqs = mixed_lengths(512);
  auto run = [&](int threshold, int64_t* steps) {
    EngineConfig c;
    c.sched.max_num_batched_tokens = 256;
    c.sched.long_prefill_token_threshold = threshold;
    auto e = make_engine("llama_gqa", c);
    EXPECT_NE(e, nullptr);
    auto r = run_all(*e, reqs);
    *steps = e->scheduler().stats().num_steps;
    return r;
  };
  int64_t steps_off = 0, steps_on = 0;
  const auto off = run(0, &steps_off), on = run(24, &steps_on);
  EXPECT_GT(steps_on, steps_off);  // the long prompts took several chunks
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(on.outputs[i].deltas.size(), 1u);
    const auto& a = off.outputs[i].deltas[0];
    const auto& b = on.outputs[i].deltas[0];
    ASSERT_EQ(b.token_ids, a.token_ids) << "request " << i;
    ASSERT_EQ(b.logprobs.size(), a.logprobs.size());
    for (size_t t = 0; t < b.logprobs.size(); ++t)
      EXPECT_NEAR(b.logprobs[t].logprob, a.logprobs[t].logprob, 1e-4) << "request " << i;
    const auto& pa = off.outputs[i].prompt_logprobs;
    const auto& pb = on.outputs[i].prompt_logprobs;
    ASSERT_EQ(pb.size(), pa.size()) << "request " << i;
    for (size_t t = 1; t < pb.size(); ++t)
      EXPECT_NEAR(pb[t]->logprob, pa[t]->logprob, 1e-4) << "request " << i << " position " << t;
  }
  EXPECT_EQ(on.outputs[3].prompt_logprobs.size(), reqs[3].prompt_token_ids.size());
}

}  // namespace
}  // namespace folio
