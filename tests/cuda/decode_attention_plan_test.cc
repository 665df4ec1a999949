// The decode-attention planner (decode_attention.h), on the host: the shapes and partition sizes
// it rejects, the kernel it picks from FOLIO_DECODE_KERNEL, bounded plans for CUDA graphs, and
// where it refines partitions per sequence. The kernels' own tests: decode_attention_test.cc;
// tc's launch policies (ring form, L2 prefetch): decode_tc_policy_test.cc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/decode_attention.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

// Shape errors come back as Status before any GPU work (runs without a GPU too).
TEST(DecodeAttentionPlanTest, RejectsUnsupportedShapes) {
  const std::vector<int32_t> ctx = {10, 20};
  for (int hd : {0, 4, 100, 264})
    EXPECT_EQ(plan_decode_attention(ctx, 8, 2, hd, 132).status().code(), StatusCode::kUnimplemented)
        << hd;
  EXPECT_EQ(plan_decode_attention(ctx, 8, 2, 80, 132, 0, DecodeKernel::kV1).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(plan_decode_attention(ctx, 8, 3, 128, 132).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_decode_attention(ctx, 8, 2, 128, 132, 100).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_decode_attention(ctx, 8, 2, 128, 132, 1024, DecodeKernel::kV1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_decode_attention_bounded(2, -1, 8, 2, 128, 132).status().code(),
            StatusCode::kInvalidArgument);
  auto plan = plan_decode_attention(ctx, 8, 2, 128, 132, 32);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->max_partitions, 1);  // ceil(20 / 32)
  auto split = plan_decode_attention(std::vector<int32_t>{100}, 8, 2, 128, 132, 32);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->max_partitions, 4);
  EXPECT_EQ(split->workspace_bytes, sizeof(float) * 8 * 4 * (128 + 2));
  EXPECT_TRUE(plan_decode_attention(ctx, 4, 2, 16, 132).ok());  // the tiny model
}

// FOLIO_DECODE_KERNEL picks the default kernel; v1 and tc fall back to v2 for head dims they lack.
TEST(DecodeAttentionPlanTest, KernelFromEnvironment) {
  const std::vector<int32_t> ctx = {100};
  auto kernel_for = [&](const char* env, int head_dim) -> Result<DecodeKernel> {
    if (env)
      setenv("FOLIO_DECODE_KERNEL", env, 1);
    else
      unsetenv("FOLIO_DECODE_KERNEL");
    auto plan = plan_decode_attention(ctx, 8, 2, head_dim, 132);
    unsetenv("FOLIO_DECODE_KERNEL");
    if (!plan.ok()) return plan.status();
    return plan->kernel;
  };
  EXPECT_EQ(*kernel_for(nullptr, 128), DecodeKernel::kTc);  // the default at head_dim 128
  EXPECT_EQ(*kernel_for(nullptr, 64), DecodeKernel::kV2);   // and v2 elsewhere
  EXPECT_EQ(*kernel_for("v2", 128), DecodeKernel::kV2);
  EXPECT_EQ(*kernel_for("v1", 128), DecodeKernel::kV1);
  EXPECT_EQ(*kernel_for("v1", 16), DecodeKernel::kV2);
  EXPECT_EQ(*kernel_for("tc", 128), DecodeKernel::kTc);
  EXPECT_EQ(*kernel_for("tc", 64), DecodeKernel::kV2);  // tc takes head_dim 128 only
  EXPECT_EQ(plan_decode_attention(ctx, 8, 2, 64, 132, 0, DecodeKernel::kTc).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(kernel_for("v3", 128).status().code(), StatusCode::kInvalidArgument);
  // An explicit kernel wins over the environment.
  setenv("FOLIO_DECODE_KERNEL", "v1", 1);
  auto plan = plan_decode_attention(ctx, 8, 2, 128, 132, 0, DecodeKernel::kV2);
  unsetenv("FOLIO_DECODE_KERNEL");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->kernel, DecodeKernel::kV2);
}

// Token mode on a 16-bit cache takes v2 where v2's plan is unsplit (DecodeCacheFormat); pages
// of 16, fp8 caches, split plans and an explicit choice keep tc.
TEST(DecodeAttentionPlanTest, TokenModeTakesV2WhereUnsplit) {
  unsetenv("FOLIO_DECODE_KERNEL");
  const DecodeCacheFormat token{1, false}, paged{16, false}, token_fp8{1, true};
  auto kernel_for = [](int seqs, int len, DecodeCacheFormat f, DecodeKernel k) {
    auto plan = plan_decode_attention(std::vector<int32_t>(seqs, len), 32, 8, 128, 132, 0, k, f);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    if (plan->kernel == DecodeKernel::kV2) {
      EXPECT_EQ(plan->max_partitions, 1);
    }
    return plan->kernel;
  };
  const DecodeKernel def = DecodeKernel::kDefault;
  EXPECT_EQ(kernel_for(32, 2048, token, def), DecodeKernel::kV2);
  EXPECT_EQ(kernel_for(128, 8192, token, def), DecodeKernel::kV2);
  EXPECT_EQ(kernel_for(32, 2048, paged, def), DecodeKernel::kTc);
  EXPECT_EQ(kernel_for(32, 2048, token_fp8, def), DecodeKernel::kTc);
  EXPECT_EQ(kernel_for(1, 8192, token, def), DecodeKernel::kTc);  // split: issue-bound, tc
  EXPECT_EQ(kernel_for(32, 2048, token, DecodeKernel::kTc), DecodeKernel::kTc);
  setenv("FOLIO_DECODE_KERNEL", "tc", 1);
  EXPECT_EQ(kernel_for(32, 2048, token, def), DecodeKernel::kTc);
  unsetenv("FOLIO_DECODE_KERNEL");
  // The CUDA-graph plan follows the same rule from its bound.
  auto bounded = plan_decode_attention_bounded(64, 4096, 32, 8, 128, 132, 0, def, token);
  ASSERT_TRUE(bounded.ok());
  EXPECT_EQ(bounded->kernel, DecodeKernel::kV2);
  EXPECT_EQ(bounded->workspace_bytes, 0u);
  bounded = plan_decode_attention_bounded(2, 4096, 32, 8, 128, 132, 0, def, token);
  ASSERT_TRUE(bounded.ok());
  EXPECT_EQ(bounded->kernel, DecodeKernel::kTc);
}

// FOLIO_TC_RING=0 (tc's register form everywhere) or FOLIO_TC_FRAG_GRID=0: the planner plans
// every tc grid for the registers' residency.
bool frag_plans_off() {
  auto is0 = [](const char* name) {
    const char* e = std::getenv(name);
    return e != nullptr && std::string(e) == "0";
  };
  return is0("FOLIO_TC_RING") || is0("FOLIO_TC_FRAG_GRID");
}

// On fast DRAM (the H200) token mode keeps tc where tc's unsplit grid fits one resident wave
// (2 blocks per SM): 32 sequences x 8 KV heads = 256 blocks on 132 SMs, not 48 x 8 = 384.
TEST(DecodeAttentionPlanTest, TokenModeKeepsTcForOneWaveOnFastDram) {
  unsetenv("FOLIO_DECODE_KERNEL");
  const DecodeCacheFormat h200{1, false, 4800}, h100{1, false, 3352};
  auto kernel_for = [](int seqs, int len, DecodeCacheFormat f) {
    auto plan = plan_decode_attention(std::vector<int32_t>(seqs, len), 32, 8, 128, 132, 0,
                                      DecodeKernel::kDefault, f);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    EXPECT_EQ(plan->max_partitions, 1);
    return plan->kernel;
  };
  EXPECT_EQ(kernel_for(32, 2048, h200), DecodeKernel::kTc);
  EXPECT_EQ(kernel_for(33, 2048, h200), DecodeKernel::kTc);  // 264 blocks: still one wave
  // Past it, tc where it runs the fragment ring (grids past 264 blocks, outside (396, 528]),
  // v2 in that window; with the registers forced (FOLIO_TC_RING=0) or session 31's plans
  // (FOLIO_TC_FRAG_GRID=0), v2 past the one wave.
  const DecodeKernel past = frag_plans_off() ? DecodeKernel::kV2 : DecodeKernel::kTc;
  EXPECT_EQ(kernel_for(34, 2048, h200), past);
  EXPECT_EQ(kernel_for(48, 2048, h200), past);        // 384 blocks
  EXPECT_EQ(kernel_for(50, 2048, h200), DecodeKernel::kV2);  // 400: the ring of 3's window
  EXPECT_EQ(kernel_for(64, 2048, h200), DecodeKernel::kV2);  // 512
  EXPECT_EQ(kernel_for(67, 2048, h200), past);        // 536
  EXPECT_EQ(kernel_for(128, 8192, h200), past);
  EXPECT_EQ(kernel_for(48, 2048, h100), DecodeKernel::kV2);
  EXPECT_EQ(kernel_for(32, 2048, h100), DecodeKernel::kV2);  // slower DRAM: v2 as before
  auto bounded =
      plan_decode_attention_bounded(32, 4096, 32, 8, 128, 132, 0, DecodeKernel::kDefault, h200);
  ASSERT_TRUE(bounded.ok());
  EXPECT_EQ(bounded->kernel, DecodeKernel::kTc);
}

// A bounded plan depends only on (num_seqs, bound, shape, num_sms): the same for any lengths.
TEST(DecodeAttentionPlanTest, BoundedPlanIgnoresLengths) {
  for (int seqs : {1, 32, 128}) {
    auto a = plan_decode_attention_bounded(seqs, 8192, 32, 8, 128, 132);
    ASSERT_TRUE(a.ok());
    auto b = plan_decode_attention(std::vector<int32_t>(seqs, 8192), 32, 8, 128, 132);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(a->partition_size, b->partition_size);
    EXPECT_EQ(a->max_partitions, b->max_partitions);
    EXPECT_EQ(a->workspace_bytes, b->workspace_bytes);
    EXPECT_EQ(a->max_context_len, 8192);
    EXPECT_GE(static_cast<int64_t>(a->partition_size) * a->max_partitions, 8192);
  }
  // b1 x 8192 splits to fill the SMs (v2: one wave of at most 3 blocks per SM).
  auto b1 = plan_decode_attention_bounded(1, 8192, 32, 8, 128, 132);
  ASSERT_TRUE(b1.ok());
  EXPECT_GE(int64_t{8} * b1->max_partitions, 132);
  EXPECT_LE(int64_t{8} * b1->max_partitions, 3 * 132);
  // b128 x 2048 fills the GPU without a split (no merge kernel).
  auto b128 = plan_decode_attention(std::vector<int32_t>(128, 2048), 32, 8, 128, 132);
  ASSERT_TRUE(b128.ok());
  EXPECT_EQ(b128->max_partitions, 1);
  EXPECT_EQ(b128->workspace_bytes, 0u);
  EXPECT_FALSE(b128->refine_partitions);  // nothing to refine without a split
}

// Refined partitions (DecodePlan::refine_partitions): only where every sequence may use all
// max_partitions blocks within one resident wave, and only for an automatic partition size.
TEST(DecodeAttentionPlanTest, RefinesPartitionsWhereTheGridFitsAWave) {
  if (const char* e = std::getenv("FOLIO_DECODE_REFINE"); e && std::string(e) == "0")
    GTEST_SKIP() << "FOLIO_DECODE_REFINE=0";
  for (DecodeKernel k : {DecodeKernel::kTc, DecodeKernel::kV2}) {
    SCOPED_TRACE(k == DecodeKernel::kTc ? "tc" : "v2");
    const int per_sm = k == DecodeKernel::kTc ? 2 : 3;
    for (int seqs : {1, 2, 4, 8, 16}) {  // CUDA-graph buckets of B3-like batches
      auto b = plan_decode_attention_bounded(seqs, 8192, 32, 8, 128, 132, 0, k);
      ASSERT_TRUE(b.ok());
      EXPECT_GT(b->max_partitions, 1) << seqs;
      EXPECT_TRUE(b->refine_partitions) << seqs;
      EXPECT_LE(int64_t{seqs} * 8 * b->max_partitions, per_sm * 132) << seqs;
    }
    auto forced = plan_decode_attention_bounded(1, 8192, 32, 8, 128, 132, 256, k);
    ASSERT_TRUE(forced.ok());
    EXPECT_FALSE(forced->refine_partitions);
    // Mixed lengths whose every-sequence-at-max grid would overflow the wave: not refined.
    std::vector<int32_t> lens(12, 100);
    lens[0] = 8192;
    auto mixed = plan_decode_attention(lens, 32, 8, 128, 132, 0, k);
    ASSERT_TRUE(mixed.ok());
    ASSERT_GT(mixed->max_partitions, 1);
    EXPECT_GT(int64_t{12} * 8 * mixed->max_partitions, per_sm * 132);
    EXPECT_FALSE(mixed->refine_partitions);
  }
  auto v1 = plan_decode_attention_bounded(1, 8192, 32, 8, 128, 132, 0, DecodeKernel::kV1);
  ASSERT_TRUE(v1.ok());
  EXPECT_FALSE(v1->refine_partitions);  // v1 keeps its own split
}

// tc's wave split (decode_attention.cu): a grid just past whole resident waves (132 SMs, 2 blocks
// per SM for a 16-bit cache, 3 for fp8) halves its partitions once where that takes fewer
// wave-equivalents, leaves partitions of at least 1024 tokens and splits nearly every sequence;
// graph plans leave it to each step.
TEST(DecodeAttentionPlanTest, TcWaveSplitEvensAPartialLastWave) {
  unsetenv("FOLIO_DECODE_KERNEL");
  auto plan_of = [](int seqs, int len, bool fp8) {
    auto plan = plan_decode_attention(std::vector<int32_t>(seqs, len), 32, 8, 128, 132, 0,
                                      DecodeKernel::kTc, DecodeCacheFormat{16, fp8});
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    return std::pair(plan->partition_size, plan->max_partitions);
  };
  using P = std::pair<int, int>;
  EXPECT_EQ(plan_of(33, 2048, false), P(2048, 1));  // 264 blocks: one whole wave
  EXPECT_EQ(plan_of(36, 2048, false), P(1024, 2));  // 288 blocks: 2 waves -> 3 half waves
  EXPECT_EQ(plan_of(48, 2048, false), P(1024, 2));  // 384
  EXPECT_EQ(plan_of(52, 2048, false), P(2048, 1));  // 416: 2 waves either way
  EXPECT_EQ(plan_of(64, 2048, false), P(2048, 1));
  EXPECT_EQ(plan_of(40, 8192, false), P(4096, 2));
  EXPECT_EQ(plan_of(48, 1024, false), P(1024, 1));  // partitions of 512: too short
  EXPECT_EQ(plan_of(48, 2048, true), P(2048, 1));   // fp8: 384 of 396 slots, one wave
  EXPECT_EQ(plan_of(52, 2048, true), P(1024, 2));
  EXPECT_EQ(plan_of(96, 2048, true), P(2048, 1));  // 768: 2 waves either way
  // Only where nearly every sequence splits (7/8 of the blocks): 40 sequences, 4 short, split;
  // 6 short, not.
  std::vector<int32_t> mixed(40, 2000);
  for (int i = 0; i < 4; ++i) mixed[i] = 200;
  auto plan = plan_decode_attention(mixed, 32, 8, 128, 132, 0, DecodeKernel::kTc);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->partition_size, 1024);
  for (int i = 0; i < 6; ++i) mixed[i] = 200;
  plan = plan_decode_attention(mixed, 32, 8, 128, 132, 0, DecodeKernel::kTc);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->partition_size, 2048);
  // Where the unsplit grid runs the fragment ring (a 16-bit cache, pages of 16, fast DRAM), tc
  // never wave-splits: its ring fits 3 blocks per SM, and a grid just past that takes its ring
  // of 3 (decode_tc_ring.h).
  if (!frag_plans_off()) {
    for (int seqs : {36, 40, 48, 56, 64, 72, 80, 112}) {
      auto frag_plan = plan_decode_attention(std::vector<int32_t>(seqs, 2048), 32, 8, 128, 132, 0,
                                             DecodeKernel::kTc, DecodeCacheFormat{16, false, 4800});
      ASSERT_TRUE(frag_plan.ok());
      EXPECT_EQ(frag_plan->max_partitions, 1) << seqs;
    }
    auto fp8_plan = plan_decode_attention(std::vector<int32_t>(52, 2048), 32, 8, 128, 132, 0,
                                          DecodeKernel::kTc, DecodeCacheFormat{16, true, 4800});
    ASSERT_TRUE(fp8_plan.ok());
    EXPECT_EQ(fp8_plan->max_partitions, 2);  // fp8 runs the registers there: split as before
  }
  // The CUDA-graph plan knows only the bound: its partitions keep the bound's size, and the
  // split is left to each step (GraphPlansTakeTheWaveSplitPerStep).
  auto bounded = plan_decode_attention_bounded(36, 2048, 32, 8, 128, 132, 0, DecodeKernel::kTc);
  ASSERT_TRUE(bounded.ok());
  EXPECT_EQ(bounded->partition_size, 2048);
  EXPECT_TRUE(bounded->step_split);
}

// Graph plans take tc's wave split per step (DecodePlan::step_split): buckets whose unsplit grid
// lies in (1, 1.25] resident waves get room for 2 partitions, and decode_step_partition gives
// each step the size plan_decode_attention picks for its lengths.
TEST(DecodeAttentionPlanTest, GraphPlansTakeTheWaveSplitPerStep) {
  unsetenv("FOLIO_DECODE_KERNEL");
  auto graph_plan = [](int seqs, bool fp8 = false) {
    auto plan = plan_decode_attention_bounded(seqs, 8192, 32, 8, 128, 132, 0, DecodeKernel::kTc,
                                              DecodeCacheFormat{16, fp8});
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    return *plan;
  };
  EXPECT_FALSE(graph_plan(32).step_split);  // 256 blocks: one wave
  const DecodePlan b40 = graph_plan(40);    // 320 blocks
  EXPECT_TRUE(b40.step_split);
  EXPECT_EQ(b40.max_partitions, 2);
  EXPECT_EQ(b40.partition_size, 8192);
  EXPECT_EQ(b40.workspace_bytes, sizeof(float) * 40 * 32 * 2 * (128 + 2));
  // A step that does not split runs the graph of the plan without the split.
  const DecodePlan unsplit = without_step_split(b40);
  EXPECT_FALSE(unsplit.step_split);
  EXPECT_EQ(unsplit.max_partitions, 1);
  EXPECT_EQ(unsplit.partition_size, 8192);
  EXPECT_EQ(unsplit.workspace_bytes, 0u);
  EXPECT_FALSE(graph_plan(48).step_split);        // 384 blocks: past 1.25 waves
  EXPECT_FALSE(graph_plan(80).step_split);        // 640 blocks: 2.4 waves
  EXPECT_FALSE(graph_plan(48, true).step_split);  // fp8: 384 of 396 slots
  EXPECT_TRUE(graph_plan(56, true).step_split);
  // Buckets whose unsplit grid runs the fragment ring (fast DRAM, a 16-bit cache) keep it whole.
  if (!frag_plans_off()) {
    auto frag_graph = plan_decode_attention_bounded(40, 8192, 32, 8, 128, 132, 0, DecodeKernel::kTc,
                                                    DecodeCacheFormat{16, false, 4800});
    ASSERT_TRUE(frag_graph.ok());
    EXPECT_FALSE(frag_graph->step_split);
    EXPECT_EQ(frag_graph->max_partitions, 1);
  }
  // Per step: alike lengths split, mixed ones and short ones do not; other plans never.
  EXPECT_EQ(decode_step_partition(b40, std::vector<int32_t>(40, 2048), 132), 1024);
  EXPECT_EQ(decode_step_partition(b40, std::vector<int32_t>(36, 3000), 132), 2048);
  EXPECT_EQ(decode_step_partition(b40, std::vector<int32_t>(40, 1024), 132), 0);
  std::vector<int32_t> mixed(40, 200);
  mixed[0] = 2000;
  EXPECT_EQ(decode_step_partition(b40, mixed, 132), 0);
  EXPECT_EQ(decode_step_partition(graph_plan(32), std::vector<int32_t>(32, 2048), 132), 0);
}

}  // namespace
}  // namespace folio::cuda
