// bench latency's TPOT under async scheduling. An async step() call launches one step and
// waits for the one the call before launched, so its time is that step's: only calls whose
// collected step was a full-batch decode count. The first decode call waits for the last
// prefill step and must not (it used to, putting a prefill step into the mean). The executor
// simulates device time per token, so a prefill step is visibly longer than a decode step.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "engine/engine_core.h"
#include "engine/kv_echo_executor.h"
#include "model/model_config.h"
#include "tools/bench_latency.h"

namespace folio::tools {
namespace {

using folio::testing::kEos;
using folio::testing::KvEchoExecutor;
using folio::testing::kVocab;

TEST(BenchLatency, AsyncStepsTimeTheStepTheyWaitedFor) {
  constexpr int kUsPerToken = 300;
  for (const bool async : {false, true}) {
    EngineConfig config;
    config.block_size = 4;
    config.sched.max_model_len = 128;
    config.sched.max_num_batched_tokens = 32;  // the batch's 60 prompt tokens take two steps
    config.async_scheduling = async;
    ModelConfig model;
    model.vocab_size = kVocab;
    model.max_position_embeddings = 128;
    model.generation.eos_token_ids = {kEos};
    auto exec = std::make_unique<KvEchoExecutor>(4, 400, 0, true);
    exec->set_time_per_token_us(kUsPerToken);
    auto engine = EngineCore::create(config, model, std::move(exec), nullptr);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    LatencyConfig c;
    c.batch_size = 3;
    c.input_len = 20;
    c.output_len = 6;
    c.num_iters = 2;
    c.num_iters_warmup = 0;
    // A full-batch decode step takes 3 tokens' time (0.9 ms); the second prefill step, 29: one
    // in the mean of 4 would put it near 2.9 ms. The times are wall clock over sleeps, which a
    // loaded CI machine stretches now and then (a mean of 1.95 ms seen once in 15 runs), so the
    // time bounds get three tries; a prefill step in the mean is deterministic and fails all.
    bool in_bounds = false;
    for (int attempt = 0; attempt < 3 && !in_bounds; ++attempt) {
      auto iters = run_latency(**engine, c);
      ASSERT_TRUE(iters.ok()) << iters.status().to_string();
      in_bounds = true;
      for (const auto& it : *iters) {
        // The three decode alone in the steps computing their 3rd to 6th tokens.
        EXPECT_EQ(it.full_batch_steps, 4) << (async ? "async" : "sync");
        in_bounds = in_bounds && it.tpot_s > 0.8 * 3 * kUsPerToken * 1e-6 &&
                    it.tpot_s < 2.0 * 3 * kUsPerToken * 1e-6;
        std::printf("%s, try %d: TPOT %.3f ms\n", async ? "async" : "sync", attempt + 1,
                    it.tpot_s * 1e3);
      }
    }
    EXPECT_TRUE(in_bounds) << (async ? "async" : "sync")
                           << ": TPOT outside 0.72-1.8 ms in three tries";
    EXPECT_EQ((*engine)->counters().async_steps > 0, async);
  }
}

}  // namespace
}  // namespace folio::tools
