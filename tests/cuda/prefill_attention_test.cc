// Causal paged prefill attention against the CPU reference, for each kernel variant (v1 wmma,
// v2 / v2x2 mma.sync, v3 / v3p / v3pq / v3n128 / v3pw / v3pwpp / v3tma / v3tmap / v3tmapp /
// v3tmaq wgmma): mixed query lengths in one launch, chunked prefill over a cached prefix, decode
// rows in the same batch, block sizes 1..128, head_dim 16..256 (64/128 for v1), MHA/GQA/MQA and
// odd head counts, contexts past 16k, NaN in the pool's slots past a sequence's end; v3tmaq's
// dynamically dealt items over repeated launches.
#include "backend/cuda/prefill_attention.h"

#include <cstring>

#include "attention_test_util.h"

namespace folio::cuda {
namespace {

using testing::AttentionProblem;
using testing::SeqSpec;

struct PrefillCase {
  PrefillKernel kernel;
  DType dt;
  int heads, kv_heads, head_dim, block_size;
};

// Runs one problem through `kernel` and returns the relative error (infinite on NaN/poison).
double run_problem(PrefillKernel kernel, const testing::AttentionProblem& prob) {
  auto plan = plan_prefill_attention(prob.query_start, prob.num_heads, prob.num_kv_heads);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return INFINITY;
  plan->kernel = kernel;
  const Status st = prefill_attention(prob.params(), *plan, nullptr);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(synchronize().ok());
  return prob.error();
}

class PrefillAttentionTest : public ::testing::TestWithParam<PrefillCase> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }

  void run(const std::vector<SeqSpec>& seqs, bool poison_past_end = false) {
    const PrefillCase& c = GetParam();
    std::mt19937 rng(11 + c.heads * 17 + c.block_size + c.head_dim);
    AttentionProblem prob(c.dt, c.heads, c.kv_heads, c.head_dim, c.block_size, seqs, rng);
    if (poison_past_end) prob.poison_slots_past_end();
    EXPECT_LT(run_problem(c.kernel, prob), testing::attention_tol(c.dt));
  }
};

TEST_P(PrefillAttentionTest, FullPrefillsOfMixedLengths) {
  run({{37, 37}, {1, 1}, {64, 64}, {200, 200}, {65, 65}});
}

TEST_P(PrefillAttentionTest, ChunkedPrefillOverCachedPrefixWithDecodes) {
  // (context after the step, new tokens): prefix-cache hits, a chunk, decodes, a full prompt.
  run({{300, 100}, {129, 1}, {70, 65}, {17, 16}, {1000, 1}, {96, 96}, {513, 3}});
}

TEST_P(PrefillAttentionTest, DecodeRowsOnly) {
  run({{1, 1}, {5, 1}, {64, 1}, {65, 1}, {130, 1}});
}

TEST_P(PrefillAttentionTest, TileEdges) {
  // Query and context lengths around the 64-key and 64/128-row tile edges.
  run({{63, 63}, {64, 64}, {128, 127}, {129, 129}, {191, 64}, {192, 1}, {257, 130}});
}

TEST_P(PrefillAttentionTest, NaNInSlotsPastTheEndStaysOut) {
  // Ends inside a block (the last key tile's partial page) and a chunk over a cached prefix.
  run({{37, 37}, {300, 100}, {17, 16}, {129, 129}, {70, 65}}, /*poison_past_end=*/true);
}

constexpr auto kV1 = PrefillKernel::kV1;
constexpr auto kV2 = PrefillKernel::kV2;
constexpr auto kV2x2 = PrefillKernel::kV2x2;
constexpr auto kV3 = PrefillKernel::kV3;
constexpr auto kV3p = PrefillKernel::kV3p;
constexpr auto kV3pq = PrefillKernel::kV3pq;
constexpr auto kV3n128 = PrefillKernel::kV3n128;
constexpr auto kV3pw = PrefillKernel::kV3pw;
constexpr auto kV3pwpp = PrefillKernel::kV3pwpp;
constexpr auto kV3tma = PrefillKernel::kV3tma;
constexpr auto kV3tmap = PrefillKernel::kV3tmap;
constexpr auto kV3tmapp = PrefillKernel::kV3tmapp;
constexpr auto kV3tmaq = PrefillKernel::kV3tmaq;

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillAttentionTest,
    ::testing::Values(
        // v1 (wmma), head_dim 64 / 128 only.
        PrefillCase{kV1, DType::kBF16, 32, 8, 128, 16}, PrefillCase{kV1, DType::kFP16, 5, 5, 64, 1},
        PrefillCase{kV1, DType::kBF16, 12, 1, 128, 8},
        // v2: GQA 4 / MHA / MQA / GQA 8 / GQA 3 over block sizes 16 / 1 / 8 / 32.
        PrefillCase{kV2, DType::kBF16, 32, 8, 128, 16}, PrefillCase{kV2, DType::kFP16, 5, 5, 64, 1},
        PrefillCase{kV2, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV2, DType::kFP16, 16, 2, 128, 32},
        PrefillCase{kV2, DType::kFP16, 6, 2, 128, 32},
        PrefillCase{kV2, DType::kBF16, 14, 2, 64, 16},
        // v2 head dims: the tiny model's 16, and 32 / 80 / 96 / 256; 40 and 112 run padded.
        PrefillCase{kV2, DType::kBF16, 4, 2, 16, 16}, PrefillCase{kV2, DType::kFP16, 4, 4, 16, 1},
        PrefillCase{kV2, DType::kBF16, 8, 8, 32, 8}, PrefillCase{kV2, DType::kBF16, 8, 2, 80, 16},
        PrefillCase{kV2, DType::kFP16, 6, 1, 80, 1}, PrefillCase{kV2, DType::kBF16, 12, 4, 96, 32},
        PrefillCase{kV2, DType::kBF16, 8, 2, 256, 16}, PrefillCase{kV2, DType::kFP16, 4, 4, 256, 8},
        PrefillCase{kV2, DType::kBF16, 4, 1, 40, 16}, PrefillCase{kV2, DType::kFP16, 6, 3, 112, 8},
        // The smallest head_dim, and 24 padded to 32 on v2x2.
        PrefillCase{kV2, DType::kBF16, 4, 2, 8, 16}, PrefillCase{kV2x2, DType::kFP16, 6, 2, 24, 1},
        // Block sizes that are not powers of two (the kernel divides instead of shifting).
        PrefillCase{kV2, DType::kBF16, 8, 2, 64, 3},
        PrefillCase{kV2x2, DType::kFP16, 4, 1, 128, 24},
        // v2x2 (32 rows per warp; head_dim > 128 falls back to v2).
        PrefillCase{kV2x2, DType::kBF16, 32, 8, 128, 16},
        PrefillCase{kV2x2, DType::kFP16, 5, 5, 64, 1},
        PrefillCase{kV2x2, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV2x2, DType::kBF16, 8, 2, 80, 32},
        PrefillCase{kV2x2, DType::kBF16, 4, 2, 16, 16},
        PrefillCase{kV2x2, DType::kBF16, 8, 2, 256, 16},
        // v3 (wgmma, sm_90a): head_dim 64 / 128 over GQA 4 / MHA / MQA / GQA 8 / GQA 3 and
        // block sizes 16 / 1 / 8 / 32 / 3 / 24; other head dims run as v2x2 inside launch_v3.
        PrefillCase{kV3, DType::kBF16, 32, 8, 128, 16}, PrefillCase{kV3, DType::kFP16, 5, 5, 64, 1},
        PrefillCase{kV3, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV3, DType::kFP16, 16, 2, 128, 32},
        PrefillCase{kV3, DType::kFP16, 6, 2, 128, 3}, PrefillCase{kV3, DType::kBF16, 14, 2, 64, 24},
        PrefillCase{kV3, DType::kBF16, 8, 8, 64, 16}, PrefillCase{kV3, DType::kBF16, 8, 2, 80, 16},
        PrefillCase{kV3, DType::kFP16, 4, 4, 256, 8},
        // v3p (v3 with P·V overlapping the next softmax): the same head dims and groupings.
        PrefillCase{kV3p, DType::kBF16, 32, 8, 128, 16},
        PrefillCase{kV3p, DType::kFP16, 5, 5, 64, 1},
        PrefillCase{kV3p, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV3p, DType::kFP16, 6, 2, 128, 3},
        PrefillCase{kV3p, DType::kBF16, 14, 2, 64, 24},
        PrefillCase{kV3p, DType::kBF16, 8, 2, 80, 16},
        // v3pq (v3p with Q in registers).
        PrefillCase{kV3pq, DType::kBF16, 32, 8, 128, 16},
        PrefillCase{kV3pq, DType::kFP16, 5, 5, 64, 1},
        PrefillCase{kV3pq, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV3pq, DType::kFP16, 6, 2, 128, 3},
        PrefillCase{kV3pq, DType::kBF16, 14, 2, 64, 24},
        // v3n128 (128-key tiles at head_dim 128; 64 runs as v3, 80 as v2x2).
        PrefillCase{kV3n128, DType::kBF16, 32, 8, 128, 16},
        PrefillCase{kV3n128, DType::kFP16, 5, 5, 128, 1},
        PrefillCase{kV3n128, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV3n128, DType::kFP16, 16, 2, 128, 32},
        PrefillCase{kV3n128, DType::kFP16, 6, 2, 128, 3},
        PrefillCase{kV3n128, DType::kBF16, 8, 8, 128, 24},
        PrefillCase{kV3n128, DType::kBF16, 14, 2, 64, 24},
        PrefillCase{kV3n128, DType::kBF16, 8, 2, 80, 16},
        // v3pw (producer warp + mbarrier ring at head_dim 128; 64 runs as v3, 80 as v2x2).
        PrefillCase{kV3pw, DType::kBF16, 32, 8, 128, 16},
        PrefillCase{kV3pw, DType::kFP16, 5, 5, 128, 1},
        PrefillCase{kV3pw, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV3pw, DType::kFP16, 16, 2, 128, 32},
        PrefillCase{kV3pw, DType::kFP16, 6, 2, 128, 3},
        PrefillCase{kV3pw, DType::kBF16, 8, 8, 128, 24},
        PrefillCase{kV3pw, DType::kBF16, 14, 2, 64, 24},
        PrefillCase{kV3pw, DType::kBF16, 8, 2, 80, 16},
        // v3pwpp (v3pw with ping-pong turns of the two warpgroups).
        PrefillCase{kV3pwpp, DType::kBF16, 32, 8, 128, 16},
        PrefillCase{kV3pwpp, DType::kFP16, 5, 5, 128, 1},
        PrefillCase{kV3pwpp, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV3pwpp, DType::kFP16, 16, 2, 128, 32},
        PrefillCase{kV3pwpp, DType::kFP16, 6, 2, 128, 3},
        PrefillCase{kV3pwpp, DType::kBF16, 8, 8, 128, 24},
        PrefillCase{kV3pwpp, DType::kBF16, 14, 2, 64, 24},
        // v3tma (TMA-filled ring at head_dim 128, power-of-two blocks 8..128; block sizes 1, 3
        // and 24 and head_dim 64 run as v3).
        PrefillCase{kV3tma, DType::kBF16, 32, 8, 128, 16},
        PrefillCase{kV3tma, DType::kFP16, 5, 5, 128, 1},
        PrefillCase{kV3tma, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV3tma, DType::kFP16, 16, 2, 128, 32},
        PrefillCase{kV3tma, DType::kBF16, 8, 2, 128, 64},
        PrefillCase{kV3tma, DType::kFP16, 6, 2, 128, 128},
        PrefillCase{kV3tma, DType::kFP16, 6, 2, 128, 3},
        PrefillCase{kV3tma, DType::kBF16, 8, 8, 128, 24},
        PrefillCase{kV3tma, DType::kBF16, 14, 2, 64, 16},
        // v3tmap (v3tma with pipelined consumers).
        PrefillCase{kV3tmap, DType::kBF16, 32, 8, 128, 16},
        PrefillCase{kV3tmap, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV3tmap, DType::kFP16, 16, 2, 128, 32},
        PrefillCase{kV3tmap, DType::kBF16, 8, 2, 128, 64},
        PrefillCase{kV3tmap, DType::kFP16, 6, 2, 128, 128},
        PrefillCase{kV3tmap, DType::kFP16, 5, 5, 128, 1},
        // v3tmapp (v3tma with ping-pong consumers).
        PrefillCase{kV3tmapp, DType::kBF16, 32, 8, 128, 16},
        PrefillCase{kV3tmapp, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV3tmapp, DType::kFP16, 16, 2, 128, 32},
        PrefillCase{kV3tmapp, DType::kBF16, 8, 2, 128, 64},
        PrefillCase{kV3tmapp, DType::kFP16, 6, 2, 128, 128},
        PrefillCase{kV3tmapp, DType::kFP16, 5, 5, 128, 1},
        // v3tmaq (v3tma with Q by TMA from the producer; group 12 runs as v3tma, block size 3
        // as v3).
        PrefillCase{kV3tmaq, DType::kBF16, 32, 8, 128, 16},
        PrefillCase{kV3tmaq, DType::kFP16, 5, 5, 128, 16},
        PrefillCase{kV3tmaq, DType::kBF16, 16, 2, 128, 32},
        PrefillCase{kV3tmaq, DType::kFP16, 8, 1, 128, 64},
        PrefillCase{kV3tmaq, DType::kBF16, 4, 2, 128, 128},
        PrefillCase{kV3tmaq, DType::kBF16, 64, 1, 128, 16},
        PrefillCase{kV3tmaq, DType::kBF16, 12, 1, 128, 8},
        PrefillCase{kV3tmaq, DType::kFP16, 6, 2, 128, 3}),
    [](const auto& info) {
      const auto& c = info.param;
      return std::string(prefill_kernel_name(c.kernel)) + "_" + dtype_name(c.dt) + "_h" +
             std::to_string(c.heads) + "_kv" + std::to_string(c.kv_heads) + "_d" +
             std::to_string(c.head_dim) + "_bs" + std::to_string(c.block_size);
    });

class PrefillAttentionLongTest : public ::testing::TestWithParam<PrefillKernel> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
};

TEST_P(PrefillAttentionLongTest, OneLongPrompt) {
  std::mt19937 rng(5);
  AttentionProblem prob(DType::kBF16, 8, 2, 128, 16, {{1500, 1500}}, rng);
  EXPECT_LT(run_problem(GetParam(), prob), testing::attention_tol(DType::kBF16));
}

TEST_P(PrefillAttentionLongTest, ChunksPast16kOverCachedPrefix) {
  // Chunks at the end of 16k+ contexts (a partial last block of 16), a decode row, and a short
  // full prompt in the same launch.
  std::mt19937 rng(6);
  AttentionProblem prob(DType::kBF16, 8, 2, 128, 16, {{16500, 130}, {17001, 1}, {40, 40}}, rng);
  EXPECT_LT(run_problem(GetParam(), prob), testing::attention_tol(DType::kBF16));
}

TEST_P(PrefillAttentionLongTest, TokenModePast16kFp16) {
  std::mt19937 rng(7);
  AttentionProblem prob(DType::kFP16, 4, 1, 64, 1, {{16999, 77}}, rng);
  EXPECT_LT(run_problem(GetParam(), prob), testing::attention_tol(DType::kFP16));
}

INSTANTIATE_TEST_SUITE_P(Kernels, PrefillAttentionLongTest,
                         ::testing::Values(kV1, kV2, kV2x2, kV3, kV3p, kV3pq, kV3n128, kV3pw,
                                           kV3pwpp, kV3tma, kV3tmap, kV3tmapp, kV3tmaq),
                         [](const auto& info) { return prefill_kernel_name(info.param); });

// v3tma and v3tmaq in a persistent launch deal the items past the grid's first wave from a
// counter (prefill_attention_items.cuh). These problems have more live work items than the H100's
// 132 SMs and most (row tile, sequence) pairs live, so their launches are persistent and dealt.
std::vector<SeqSpec> dealt_problem_seqs() {
  return {{600, 600}, {500, 500}, {560, 300}};  // 19 x 3 x 8 = 456 items, 45 of 57 pairs live
}

TEST(PrefillAttentionDynamicItemsTest, DealtItemsMatchTheReference) {
  FOLIO_REQUIRE_GPU();
  for (PrefillKernel k : {kV3tma, kV3tmaq})
    for (DType dt : {DType::kBF16, DType::kFP16}) {
      std::mt19937 rng(9);
      AttentionProblem prob(dt, 32, 8, 128, 16, dealt_problem_seqs(), rng);
      EXPECT_LT(run_problem(k, prob), testing::attention_tol(dt))
          << prefill_kernel_name(k) << " " << dtype_name(dt);
    }
}

// Each launch's last draw resets its counter (kTicketSlots counters, taken in turn): 140
// launches of one problem into a poisoned output give the first launch's bits every time. A
// counter left non-zero would skip items and leave their rows poisoned; an item dealt twice or
// not at all would change bits.
TEST(PrefillAttentionDynamicItemsTest, RepeatedLaunchesGiveTheSameBits) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(10);
  AttentionProblem prob(DType::kBF16, 32, 8, 128, 16, dealt_problem_seqs(), rng);
  auto plan = plan_prefill_attention(prob.query_start, 32, 8);
  ASSERT_TRUE(plan.ok());
  plan->kernel = kV3tmaq;
  std::vector<float> first;
  for (int launch = 0; launch < 140; ++launch) {
    prob.dout = testing::DevTensor::poisoned(DType::kBF16, prob.q.size());
    ASSERT_TRUE(prefill_attention(prob.params(), *plan, nullptr).ok());
    ASSERT_TRUE(synchronize().ok());
    if (launch == 0) {
      ASSERT_LT(prob.error(), testing::attention_tol(DType::kBF16));
      first = prob.dout.download();
      continue;
    }
    const std::vector<float> got = prob.dout.download();
    ASSERT_EQ(std::memcmp(got.data(), first.data(), first.size() * sizeof(float)), 0)
        << "launch " << launch;
  }
}

TEST(PrefillAttentionArgsTest, RejectsUnsupportedHeadDim) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(8);
  AttentionProblem prob(DType::kBF16, 4, 2, 64, 16, {{10, 10}}, rng);
  auto plan = plan_prefill_attention(prob.query_start, 4, 2);
  ASSERT_TRUE(plan.ok());
  for (int hd : {0, 4, 12, 264}) {
    PagedAttentionParams p = prob.params();
    p.head_dim = hd;
    EXPECT_FALSE(prefill_attention(p, *plan, nullptr).ok()) << hd;
  }
  PagedAttentionParams p = prob.params();
  p.head_dim = 80;  // fine for v2, not for v1
  plan->kernel = kV1;
  EXPECT_EQ(prefill_attention(p, *plan, nullptr).code(), StatusCode::kUnimplemented);
}

TEST(PrefillAttentionPlanTest, TakesV3tmaqWhateverTheChunkLength) {
  if (prefill_kernel_override().has_value()) GTEST_SKIP() << "FOLIO_PREFILL_KERNEL is set";
  const auto kernel = [](std::vector<int32_t> qs) {
    auto plan = plan_prefill_attention(qs, 32, 8);
    EXPECT_TRUE(plan.ok());
    return plan.ok() ? plan->kernel : PrefillKernel::kV1;
  };
  EXPECT_EQ(kernel({0, 1024, 2048, 3072}), kV3tmaq);  // chunks of 1024
  EXPECT_EQ(kernel({0, 2048, 4096}), kV3tmaq);        // of 2048 (v3tma until session 15)
  EXPECT_EQ(kernel({0, 1, 2, 3, 4099}), kV3tmaq);     // decode rows beside a 4096-token chunk
  EXPECT_EQ(kernel({0}), kV3tmaq);                    // nothing to do
}

TEST(PrefillAttentionPlanTest, CountsRowTilesPerKvHead) {
  const std::vector<int32_t> qs = {0, 10, 110, 111};
  auto plan = plan_prefill_attention(qs, 32, 8);  // group 4: 400 rows -> 7 tiles of 64
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->num_seqs, 3);
  EXPECT_EQ(plan->max_rows, 400);
  EXPECT_EQ(plan->max_row_tiles, 7);
  EXPECT_EQ(plan->live_row_tiles_128, 1 + 4 + 1);  // 40, 400 and 4 rows in tiles of 128
  EXPECT_FALSE(plan_prefill_attention(qs, 32, 6).ok());
}

}  // namespace
}  // namespace folio::cuda
