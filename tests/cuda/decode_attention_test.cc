// Paged decode attention (flash-decoding split + reduce) against the CPU reference: bf16/fp16,
// head_dim 64/128, MHA/GQA/MQA and odd head counts, block sizes 1/8/16/32 with partial last
// blocks, forced small partitions, and contexts past 16k tokens.
#include "attention_test_util.h"
#include "backend/cuda/decode_attention.h"

namespace folio::cuda {
namespace {

using testing::AttentionProblem;
using testing::SeqSpec;

struct DecodeCase {
  DType dt;
  int heads, kv_heads, head_dim, block_size;
  int partition_size;  // 0: the planner's choice
};

std::string name(const DecodeCase& c) {
  return std::string(dtype_name(c.dt)) + "_h" + std::to_string(c.heads) + "_kv" +
         std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim) + "_bs" +
         std::to_string(c.block_size) + "_p" + std::to_string(c.partition_size);
}

class DecodeAttentionTest : public ::testing::TestWithParam<DecodeCase> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }

  void run(const std::vector<SeqSpec>& seqs, int partition_size) {
    const DecodeCase& c = GetParam();
    std::mt19937 rng(7 + c.heads * 31 + c.block_size);
    AttentionProblem prob(c.dt, c.heads, c.kv_heads, c.head_dim, c.block_size, seqs, rng);
    auto plan = plan_decode_attention(prob.context_lens, c.heads, c.kv_heads, c.head_dim,
                                      /*num_sms=*/132, partition_size);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
    ASSERT_TRUE(ws.ok());
    FOLIO_ASSERT_OK(decode_attention(prob.params(), *plan, ws->data(), nullptr));
    FOLIO_ASSERT_OK(synchronize());
    EXPECT_LT(prob.error(), testing::attention_tol(c.dt))
        << "partition " << plan->partition_size << " x " << plan->max_partitions;
    // The plan is reused by every layer: a second run into a re-poisoned output must agree.
    prob.dout.poison();
    FOLIO_ASSERT_OK(decode_attention(prob.params(), *plan, ws->data(), nullptr));
    EXPECT_LT(prob.error(), testing::attention_tol(c.dt)) << "second run";
  }
};

TEST_P(DecodeAttentionTest, MixedContextLengths) {
  run({{1, 1}, {17, 1}, {33, 1}, {1000, 1}, {2049, 1}, {130, 1}}, GetParam().partition_size);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DecodeAttentionTest,
    ::testing::Values(DecodeCase{DType::kBF16, 32, 8, 128, 16, 0},   // llama3-8B shape
                      DecodeCase{DType::kBF16, 32, 8, 128, 16, 64},  // forced split + reduce
                      DecodeCase{DType::kFP16, 7, 7, 64, 1, 0},      // MHA, odd heads, token mode
                      DecodeCase{DType::kBF16, 12, 1, 128, 8, 32},   // MQA: 12 heads in 2 chunks
                      DecodeCase{DType::kFP16, 6, 2, 64, 32, 128},   // group of 3
                      DecodeCase{DType::kBF16, 40, 8, 64, 1, 0},     // group of 5, token mode
                      DecodeCase{DType::kFP16, 16, 4, 128, 16, 0}),
    [](const auto& info) { return name(info.param); });

TEST(DecodeAttentionLongTest, ContextsPast16kTokens) {
  FOLIO_REQUIRE_GPU();
  for (int block_size : {16, 1}) {
    std::mt19937 rng(block_size);
    AttentionProblem prob(DType::kBF16, 8, 2, 128, block_size, {{16411, 1}, {20000, 1}, {5, 1}},
                          rng);
    auto plan = plan_decode_attention(prob.context_lens, 8, 2, 128, 132);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    EXPECT_GT(plan->max_partitions, 1);
    auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
    ASSERT_TRUE(ws.ok());
    FOLIO_ASSERT_OK(decode_attention(prob.params(), *plan, ws->data(), nullptr));
    EXPECT_LT(prob.error(), testing::attention_tol(DType::kBF16)) << "block_size " << block_size;
  }
}

// Shape errors come back as Status before any GPU work (runs without a GPU too).
TEST(DecodeAttentionPlanTest, RejectsUnsupportedShapes) {
  const std::vector<int32_t> ctx = {10, 20};
  EXPECT_EQ(plan_decode_attention(ctx, 8, 2, 96, 132).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(plan_decode_attention(ctx, 8, 3, 128, 132).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_decode_attention(ctx, 8, 2, 128, 132, 100).status().code(),
            StatusCode::kInvalidArgument);
  auto plan = plan_decode_attention(ctx, 8, 2, 128, 132, 32);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->max_partitions, 1);  // ceil(20 / 32)
  auto split = plan_decode_attention(std::vector<int32_t>{100}, 8, 2, 128, 132, 32);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->max_partitions, 4);
  EXPECT_EQ(split->workspace_bytes, sizeof(float) * 8 * 4 * (128 + 2));
}

}  // namespace
}  // namespace folio::cuda
