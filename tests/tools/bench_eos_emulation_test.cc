// bench throughput's outputs that stop early (workload items with "max_tokens"): each request is
// sent with that budget and EOS honoured, and ended after output_len tokens, so the scheduler
// sees an uncertain length (as with a real EOS) while the work stays the workload's. Run on the
// host loop alone (InstantExecutor: never samples an EOS), with Llama-3-8B's shapes.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "instant_executor.h"
#include "model/model_config.h"
#include "tools/bench_throughput.h"
#include "tools/bench_workload.h"

namespace folio::tools {
namespace {

ModelConfig llama3_8b() {
  std::ifstream f(std::string(FOLIO_SOURCE_DIR) + "/configs/llama-3-8b.json");
  auto model = ModelConfig::from_json(nlohmann::json::parse(f), "llama-3-8b.json");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  return *model;
}

// 40 requests: prompts 20-59 tokens, outputs 5-39; max_tokens 1000 when `stop_early`.
std::vector<WorkloadItem> mixed_items(bool stop_early) {
  std::vector<WorkloadItem> items;
  for (int i = 0; i < 40; ++i)
    items.push_back({20 + (i * 13) % 40, 5 + (i * 7) % 35, stop_early ? 1000 : 0});
  return items;
}

ThroughputResult run(const std::vector<WorkloadItem>& items, int kv_blocks, double conservativeness,
                     bool reactive = true) {
  const ModelConfig model = llama3_8b();
  EngineConfig c;
  c.block_size = 16;
  c.sched.max_num_seqs = 256;
  c.sched.max_num_batched_tokens = 4096;
  c.sched.schedule_conservativeness = conservativeness;
  c.sched.reactive_headroom = reactive;
  auto engine = EngineCore::create(
      c, model, std::make_unique<InstantExecutor>(model.vocab_size, 16, kv_blocks), nullptr);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  auto r = run_throughput(**engine, items, 7);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE((*engine)->has_unfinished());
  return r.ok() ? *r : ThroughputResult{};
}

TEST(BenchEosEmulation, EndsEachRequestAtItsOutputLen) {
  const auto items = mixed_items(true);
  const ThroughputResult r = run(items, 4096, 0.0);
  EXPECT_EQ(r.num_failed, 0);
  EXPECT_EQ(r.num_ended_at_output_len, 40);
  EXPECT_EQ(r.output_tokens, total_output_tokens(items));  // not the 40 x 1000 of max_tokens
  EXPECT_LT(r.num_steps, 100);                             // the longest output is 39 tokens
  const nlohmann::json j = throughput_json(r);
  EXPECT_EQ(j["num_ended_at_output_len"], 40);
}

TEST(BenchEosEmulation, CertainOutputsAreNotEnded) {
  const auto items = mixed_items(false);
  const ThroughputResult r = run(items, 4096, 1.0);
  EXPECT_EQ(r.num_ended_at_output_len, 0);
  EXPECT_EQ(r.output_tokens, total_output_tokens(items));
}

// SGLang's ratio counts an uncertain output by its max_tokens (0.7 x 961-1000 tokens at
// conservativeness 1) and a certain one by its length: in 200 blocks (3200 tokens) the certain
// load runs all 40 at once (4-6 blocks each), the one that stops early only a few. vLLM's
// admission (0) looks at neither and runs them alike, and so does the reactive ratio (the
// default) until a preemption.
TEST(BenchEosEmulation, TheSchedulerDoesNotKnowTheLength) {
  const ThroughputResult certain = run(mixed_items(false), 200, 1.0, /*reactive=*/false);
  const ThroughputResult early = run(mixed_items(true), 200, 1.0, /*reactive=*/false);
  EXPECT_EQ(certain.peak_running_sequences, 40);
  EXPECT_LT(early.peak_running_sequences, 10);
  EXPECT_EQ(early.output_tokens, certain.output_tokens);
  EXPECT_EQ(early.num_ended_at_output_len, 40);
  const ThroughputResult certain0 = run(mixed_items(false), 200, 0.0);
  const ThroughputResult early0 = run(mixed_items(true), 200, 0.0);
  EXPECT_EQ(early0.peak_running_sequences, certain0.peak_running_sequences);
  EXPECT_EQ(early0.num_steps, certain0.num_steps);
  const ThroughputResult reactive = run(mixed_items(true), 200, 1.0, /*reactive=*/true);
  EXPECT_EQ(reactive.peak_running_sequences, 40);
  EXPECT_EQ(reactive.num_preemptions, 0);
}

TEST(BenchEosEmulation, ABudgetOverTheContextIsRefused) {
  const ModelConfig model = llama3_8b();
  EngineConfig c;
  c.sched.max_model_len = 512;
  auto engine = EngineCore::create(
      c, model, std::make_unique<InstantExecutor>(model.vocab_size, 16, 256), nullptr);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto r = run_throughput(**engine, {WorkloadItem{100, 10, 500}}, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs 100 + 500 tokens"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace folio::tools
