// The engine warns as vLLM does when the KV cache is too small for its batch: at the first
// preemption and at every 50th, with the cumulative count and what to change; never without one.
#include <gtest/gtest.h>

#include <string>

#include "engine_runner.h"

namespace folio {
namespace {

using testing::make_engine;
using testing::run_all;

std::vector<GenerateRequest> requests() {
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    GenerateRequest g;
    for (int k = 0; k < 20 + 3 * i; ++k) g.prompt_token_ids.push_back(1 + (i * 37 + k * 11) % 90);
    g.params.temperature = 0.0f;
    g.params.has_temperature = true;
    g.params.max_tokens = 24;
    g.params.ignore_eos = true;
    reqs.push_back(std::move(g));
  }
  return reqs;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Runs the requests with `blocks` of 4 tokens; returns stderr, `preemptions` the count.
std::string run_logged(int blocks, double conservativeness, int64_t* preemptions) {
  EngineConfig c;
  c.block_size = 4;
  c.num_kv_blocks = blocks;
  c.sched.max_num_batched_tokens = 64;
  c.sched.schedule_conservativeness = conservativeness;
  auto engine = make_engine("llama_gqa", c);
  EXPECT_NE(engine, nullptr);
  if (engine == nullptr) return {};
  ::testing::internal::CaptureStderr();
  run_all(*engine, requests());
  *preemptions = engine->scheduler().stats().num_preemptions;
  return ::testing::internal::GetCapturedStderr();
}

TEST(PreemptionWarning, SaidAtTheFirstAndEveryFiftieth) {
  int64_t preemptions = 0;
  const std::string log = run_logged(/*blocks=*/14, /*vLLM's admission*/ 0.0, &preemptions);
  ASSERT_GT(preemptions, 0);
  const size_t warnings = count(log, "because the KV cache is full");
  EXPECT_GE(warnings, 1u);
  EXPECT_LE(warnings, static_cast<size_t>(1 + preemptions / 50));
  EXPECT_NE(log.find("total_num_cumulative_preemption="), std::string::npos) << log;
  EXPECT_NE(log.find("--gpu-memory-utilization"), std::string::npos) << log;
}

TEST(PreemptionWarning, SilentWithoutPreemption) {
  int64_t preemptions = 0;
  const std::string log = run_logged(/*blocks=*/512, 1.0, &preemptions);
  EXPECT_EQ(preemptions, 0);
  EXPECT_EQ(count(log, "because the KV cache is full"), 0u) << log;
}

}  // namespace
}  // namespace folio
