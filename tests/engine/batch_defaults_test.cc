// The step budget and seats left unset: vLLM V1's defaults by GPU and use
// (engine/batch_defaults.h), and load_engine filling them for the backend it picks.
#include "engine/batch_defaults.h"

#include <gtest/gtest.h>

#include "engine_runner.h"

namespace folio {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

TEST(BatchDefaults, ByGpuAndUse) {
  const GpuSummary h100{"NVIDIA H100 80GB HBM3", 80 * kGiB}, h200{"NVIDIA H200", 140 * kGiB};
  const GpuSummary a100{"NVIDIA A100-SXM4-80GB", 80 * kGiB}, l4{"NVIDIA L4", 22 * kGiB};
  struct Case {
    const GpuSummary* gpu;
    UsageContext usage;
    int tokens, seqs;
  } cases[] = {
      {&h100, UsageContext::kOffline, 16384, 1024}, {&h100, UsageContext::kServer, 8192, 1024},
      {&h200, UsageContext::kOffline, 16384, 1024}, {&h200, UsageContext::kServer, 8192, 1024},
      {&a100, UsageContext::kOffline, 8192, 256},   {&a100, UsageContext::kServer, 2048, 256},
      {&l4, UsageContext::kOffline, 8192, 256},     {&l4, UsageContext::kServer, 2048, 256},
      {nullptr, UsageContext::kOffline, 2048, 256}, {nullptr, UsageContext::kServer, 2048, 256},
  };
  for (const Case& c : cases) {
    const BatchLimits d = default_batch_limits(c.usage, c.gpu);
    const std::string what = (c.gpu ? c.gpu->name : std::string("cpu")) +
                             (c.usage == UsageContext::kServer ? " serving" : " offline");
    EXPECT_EQ(d.max_num_batched_tokens, c.tokens) << what;
    EXPECT_EQ(d.max_num_seqs, c.seqs) << what;
  }
  // 70 GiB is the line: a 64 GiB part takes the smaller defaults.
  const GpuSummary small{"NVIDIA H100 64GB", 64 * kGiB};
  EXPECT_EQ(default_batch_limits(UsageContext::kOffline, &small).max_num_seqs, 256);
}

TEST(BatchDefaults, ResolveFillsOnlyWhatIsUnset) {
  const GpuSummary h100{"NVIDIA H100 80GB HBM3", 80 * kGiB};
  EngineConfig c;
  c.sched.max_num_batched_tokens = 0;
  c.sched.max_num_seqs = 64;  // explicit: kept
  c.usage = UsageContext::kServer;
  resolve_batch_limits(c, &h100);
  EXPECT_EQ(c.sched.max_num_batched_tokens, 8192);
  EXPECT_EQ(c.sched.max_num_seqs, 64);
  EXPECT_TRUE(c.validate().ok());

  EngineConfig explicit_budget;
  explicit_budget.sched.max_num_batched_tokens = 512;
  explicit_budget.sched.max_num_seqs = 0;
  resolve_batch_limits(explicit_budget, nullptr);
  EXPECT_EQ(explicit_budget.sched.max_num_batched_tokens, 512);
  EXPECT_EQ(explicit_budget.sched.max_num_seqs, 256);
}

// Without chunked prefill a whole prompt must fit in one step: the unset budget grows to
// max_model_len (an explicit one is left for validate() to reject with its message).
TEST(BatchDefaults, WithoutChunkedPrefillTheBudgetHoldsAPrompt) {
  EngineConfig c;
  c.sched.enable_chunked_prefill = false;
  c.sched.max_model_len = 32768;
  c.sched.max_num_batched_tokens = 0;
  c.sched.max_num_seqs = 0;
  resolve_batch_limits(c, nullptr);
  EXPECT_EQ(c.sched.max_num_batched_tokens, 32768);
  EXPECT_TRUE(c.validate().ok());

  c.sched.max_model_len = 1024;  // shorter than the default: the default stays
  c.sched.max_num_batched_tokens = 0;
  resolve_batch_limits(c, nullptr);
  EXPECT_EQ(c.sched.max_num_batched_tokens, 2048);
}

TEST(BatchDefaults, LoadEngineResolvesUnsetLimitsOnTheCpu) {
  EngineConfig c;
  c.sched.max_num_batched_tokens = 0;
  c.sched.max_num_seqs = 0;
  c.sched.max_model_len = 0;
  LoadOptions o;
  o.device = "cpu";
  o.model_dir = testing::model_path("llama_gqa");
  auto e = load_engine(o, c);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ((*e)->config().sched.max_num_batched_tokens, 2048);
  EXPECT_EQ((*e)->config().sched.max_num_seqs, 256);
}

}  // namespace
}  // namespace folio
