// Causal paged prefill attention (wmma flash-attention tiles) against the CPU reference: mixed
// query lengths in one launch, chunked prefill over a cached prefix, decode rows in the same
// batch, block sizes 1/8/16/32, head_dim 64/128, MHA/GQA/MQA and odd head counts.
#include "attention_test_util.h"
#include "backend/cuda/prefill_attention.h"

namespace folio::cuda {
namespace {

using testing::AttentionProblem;
using testing::SeqSpec;

struct PrefillCase {
  DType dt;
  int heads, kv_heads, head_dim, block_size;
};

class PrefillAttentionTest : public ::testing::TestWithParam<PrefillCase> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }

  void run(const std::vector<SeqSpec>& seqs) {
    const PrefillCase& c = GetParam();
    std::mt19937 rng(11 + c.heads * 17 + c.block_size);
    AttentionProblem prob(c.dt, c.heads, c.kv_heads, c.head_dim, c.block_size, seqs, rng);
    auto plan = plan_prefill_attention(prob.query_start, c.heads, c.kv_heads);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    FOLIO_ASSERT_OK(prefill_attention(prob.params(), *plan, nullptr));
    FOLIO_ASSERT_OK(synchronize());
    EXPECT_LT(prob.error(), testing::attention_tol(c.dt));
  }
};

TEST_P(PrefillAttentionTest, FullPrefillsOfMixedLengths) {
  run({{37, 37}, {1, 1}, {64, 64}, {200, 200}, {65, 65}});
}

TEST_P(PrefillAttentionTest, ChunkedPrefillOverCachedPrefixWithDecodes) {
  // (context after the step, new tokens): prefix-cache hits, a chunk, decodes, a full prompt.
  run({{300, 100}, {129, 1}, {70, 65}, {17, 16}, {1000, 1}, {96, 96}, {513, 3}});
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillAttentionTest,
    ::testing::Values(PrefillCase{DType::kBF16, 32, 8, 128, 16},
                      PrefillCase{DType::kFP16, 5, 5, 64, 1},
                      PrefillCase{DType::kBF16, 12, 1, 128, 8},
                      PrefillCase{DType::kFP16, 6, 2, 128, 32},
                      PrefillCase{DType::kBF16, 14, 2, 64, 16}),
    [](const auto& info) {
      const auto& c = info.param;
      return std::string(dtype_name(c.dt)) + "_h" + std::to_string(c.heads) + "_kv" +
             std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim) + "_bs" +
             std::to_string(c.block_size);
    });

TEST(PrefillAttentionLongTest, OneLongPrompt) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(5);
  AttentionProblem prob(DType::kBF16, 8, 2, 128, 16, {{1500, 1500}}, rng);
  auto plan = plan_prefill_attention(prob.query_start, 8, 2);
  ASSERT_TRUE(plan.ok());
  FOLIO_ASSERT_OK(prefill_attention(prob.params(), *plan, nullptr));
  EXPECT_LT(prob.error(), testing::attention_tol(DType::kBF16));
}

TEST(PrefillAttentionPlanTest, CountsRowTilesPerKvHead) {
  const std::vector<int32_t> qs = {0, 10, 110, 111};
  auto plan = plan_prefill_attention(qs, 32, 8);  // group 4: 400 rows -> 7 tiles of 64
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->num_seqs, 3);
  EXPECT_EQ(plan->max_row_tiles, 7);
  EXPECT_FALSE(plan_prefill_attention(qs, 32, 6).ok());
}

}  // namespace
}  // namespace folio::cuda
