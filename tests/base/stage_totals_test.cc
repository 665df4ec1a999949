#include "base/stage_totals.h"

#include <gtest/gtest.h>

namespace folio {
namespace {

using Ops = std::vector<std::pair<std::string, double>>;

TEST(StageTotals, SumsRepeatsWithinAStepAndKeepsTheFirstStepApart) {
  StageTotals t;
  // The first step carries a one-time cost in "qkv" (a plan, a lazy load).
  t.add_step({{"norm", 1}, {"qkv", 50}, {"norm", 1}, {"qkv", 2}});
  t.add_step({{"norm", 1}, {"qkv", 2}, {"norm", 1}, {"qkv", 2}});
  t.add_step({{"norm", 1}, {"qkv", 3}, {"norm", 1}, {"qkv", 2}});
  EXPECT_EQ(t.steps(), 3);
  EXPECT_DOUBLE_EQ(t.first_ms("qkv"), 52);
  EXPECT_DOUBLE_EQ(t.median_ms("qkv"), 5);
  EXPECT_DOUBLE_EQ(t.mean_ms("qkv"), (52 + 4 + 5) / 3.0);
  EXPECT_DOUBLE_EQ(t.median_ms("norm"), 2);
  EXPECT_DOUBLE_EQ(t.mean_step_ms(), (54 + 6 + 7) / 3.0);
  EXPECT_DOUBLE_EQ(t.median_step_ms(), 7);
}

TEST(StageTotals, AStageMissingFromAStepCountsZeroThere) {
  StageTotals t;
  t.add_step({{"attn_prefill", 4}});
  t.add_step({{"attn_decode", 1}});
  t.add_step({{"attn_decode", 1}, {"attn_prefill", 2}});
  t.add_step({{"attn_decode", 3}});
  EXPECT_DOUBLE_EQ(t.first_ms("attn_decode"), 0);
  EXPECT_DOUBLE_EQ(t.mean_ms("attn_decode"), 5 / 4.0);
  EXPECT_DOUBLE_EQ(t.median_ms("attn_decode"), 1);   // {0, 1, 1, 3}
  EXPECT_DOUBLE_EQ(t.median_ms("attn_prefill"), 1);  // {4, 0, 2, 0}: (0 + 2) / 2
  EXPECT_DOUBLE_EQ(t.mean_ms("unknown"), 0);
}

TEST(StageTotals, ReportNamesEveryStageWithItsMedianAndFirstStep) {
  StageTotals t;
  EXPECT_NE(t.report().find("over 0 steps"), std::string::npos);
  t.add_step({{"qkv_gemm", 10}, {"down_gemm", 30}});
  t.add_step({{"qkv_gemm", 2}, {"down_gemm", 30}});
  const std::string r = t.report();
  EXPECT_NE(r.find("over 2 steps (36.000 ms per step; median step 36.000, first 40.000"),
            std::string::npos)
      << r;
  // Alphabetical: down_gemm before qkv_gemm; qkv's mean 6 is 16.7% of the mean step.
  const size_t down = r.find("down_gemm"), qkv = r.find("qkv_gemm");
  ASSERT_NE(down, std::string::npos);
  ASSERT_NE(qkv, std::string::npos);
  EXPECT_LT(down, qkv);
  EXPECT_NE(r.find("qkv_gemm                6.000   16.7%      6.000     10.000"),
            std::string::npos)
      << r;
}

}  // namespace
}  // namespace folio
