// The host side of cascade attention's launches (no GPU needed): the wgmma kernel's packs on the
// bench's shapes (cascade_wgmma_packs) and the bounded form's counts (cascade_counts).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "backend/cascade_plan.h"
#include "backend/cuda/attention_params.h"
#include "backend/cuda/cascade_attention.h"

namespace folio::cuda {
namespace {

// cascade_wgmma_packs on the bench's shapes (host only): rows of `own` tokens after a prefix of
// `prefix` tokens shared by groups of `group` rows (0: none shared), page 16, 32 q / 8 kv heads,
// on 132 SMs, with the engine's options. Returns the items in the largest pack and checks that
// the packs cover every item past the wide ones, each within 64 query rows.
int largest_pack(int rows, int group, int prefix, int own) {
  constexpr int kPage = 16;
  std::vector<int32_t> ctx, bts{0}, table;
  int32_t next = 0;
  std::vector<int32_t> shared;
  for (int r = 0; r < rows; ++r) {
    if (group > 0 && r % group == 0) {
      shared.clear();
      for (int b = 0; b < prefix / kPage; ++b) shared.push_back(next++);
    }
    for (int b = 0; b < prefix / kPage; ++b) table.push_back(group > 0 ? shared[b] : next++);
    for (int b = 0; b < own / kPage; ++b) table.push_back(next++);
    ctx.push_back(prefix + own);
    bts.push_back(static_cast<int32_t>(table.size()));
  }
  PagedAttentionParams p;
  p.dtype = DType::kBF16;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.block_size = kPage;
  CascadeOptions o;
  o.max_rows_per_item = cascade_max_rows_per_item(32, 8);
  o.min_items = cascade_min_items(8, 132);
  o.wide_min_rows = cascade_wide_min_rows(p);
  const CascadePlan plan = plan_cascade(ctx, bts, table, kPage, o);
  const std::vector<int32_t> packs = cascade_wgmma_packs(plan, 32, 8, 132);
  EXPECT_EQ(packs.front(), plan.num_wide_items);
  EXPECT_EQ(packs.back(), static_cast<int32_t>(plan.items.size()));
  int largest = 0;
  for (size_t b = 0; b + 1 < packs.size(); ++b) {
    int q_rows = 0;
    for (int32_t i = packs[b]; i < packs[b + 1]; ++i) q_rows += 4 * plan.items[i].num_rows;
    EXPECT_LE(q_rows, 64) << "pack " << b;
    largest = std::max(largest, packs[b + 1] - packs[b]);
  }
  return largest;
}

TEST(CascadeAttention, PacksFollowThePlan) {
  // Groups of 16 sharing 2048 tokens: packs as long as the 1024-token wide items (16 tiles) of
  // 256-token suffixes (4 tiles): 4, the H200 sweep's best at b32 and b256 (b1024: 8, 3% ahead).
  EXPECT_EQ(largest_pack(1024, 16, 2048, 256), 4);
  EXPECT_EQ(largest_pack(256, 16, 2048, 256), 4);
  EXPECT_EQ(largest_pack(32, 16, 2048, 256), 4);
  // No wide items: packs of the longest item's tiles or kMinPackTiles (16), within a wave of
  // blocks. Own suffixes alone (not a plan the engine runs: nothing shared) four to a block;
  // few rows: the wave rule (b32: 3 tiles, each alone); rows that share nothing (16 / 16 / 4
  // tiles) each alone, the fastest in session 49's sweep.
  EXPECT_EQ(largest_pack(1024, 0, 0, 256), 4);
  EXPECT_EQ(largest_pack(256, 0, 0, 256), 4);
  EXPECT_EQ(largest_pack(32, 0, 0, 256), 1);
  EXPECT_EQ(largest_pack(256, 0, 0, 2304), 1);
  // Groups of 4 (n = 4 samples of a prompt): the 4-row prefix items (16 query rows, 16 tiles)
  // alone, the suffixes 4 to a block.
  EXPECT_EQ(largest_pack(1024, 4, 2048, 256), 4);
  EXPECT_EQ(largest_pack(256, 4, 2048, 256), 4);
}

// cascade_counts (host only): the bounded form's counts from a plan and its packs, as the
// executor uploads them for its graphs.
TEST(CascadeAttention, BoundedCountsSplitTheItemsAsTheExactFormDoes) {
  CascadePlan plan;
  plan.items.resize(10);
  plan.num_wide_items = 2;
  // Every item past the wide ones packed (the default): no mma.sync items.
  CascadeCounts c = cascade_counts(plan, {2, 5, 10});
  EXPECT_EQ(c.num_wide, 2);
  EXPECT_EQ(c.num_packs, 2);
  EXPECT_EQ(c.mma_begin, 2);
  EXPECT_EQ(c.mma_count, 0);
  // One-row packs only: items [2, 6) on the mma.sync kernel, [6, 10) in one pack.
  c = cascade_counts(plan, {6, 10});
  EXPECT_EQ(c.num_packs, 1);
  EXPECT_EQ(c.mma_begin, 2);
  EXPECT_EQ(c.mma_count, 4);
  // No wgmma kernel (no packs, no wide items): every item on the mma.sync kernel.
  plan.num_wide_items = 0;
  c = cascade_counts(plan, {});
  EXPECT_EQ(c.num_wide, 0);
  EXPECT_EQ(c.num_packs, 0);
  EXPECT_EQ(c.mma_begin, 0);
  EXPECT_EQ(c.mma_count, 10);
  // The real planner's default plan: everything on wgmma.
  const std::vector<int32_t> ctx = {300, 300, 300, 40};
  const std::vector<int32_t> bts = {0, 19, 38, 57, 60};
  std::vector<int32_t> table;
  for (int r = 0; r < 3; ++r)
    for (int b = 0; b < 19; ++b) table.push_back(b < 16 ? b : 100 + 19 * r + b);
  for (int b = 0; b < 3; ++b) table.push_back(200 + b);
  CascadeOptions o;
  o.max_rows_per_item = cascade_max_rows_per_item(32, 8);
  o.wide_min_rows = 2;
  const CascadePlan real = plan_cascade(ctx, bts, table, 16, o);
  ASSERT_GT(real.num_segments, 0);
  const std::vector<int32_t> packs = cascade_wgmma_packs(real, 32, 8, 132);
  c = cascade_counts(real, packs);
  EXPECT_EQ(c.num_wide, real.num_wide_items);
  EXPECT_EQ(c.num_packs, static_cast<int32_t>(packs.size()) - 1);
  EXPECT_EQ(c.mma_count, 0);
}

}  // namespace
}  // namespace folio::cuda
