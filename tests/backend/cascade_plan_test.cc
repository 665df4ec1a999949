// plan_cascade (src/backend/cascade_plan.h): every plan is checked (cascade_plan_test_util.h) to
// cover each row's context exactly once through block ids equal to the row's own, with
// consistent slots; the shapes of the plans for the shared-prefix workloads (one prefix for all,
// groups, nested levels, siblings with identical tables); item splitting; random prefix trees.
// cascade_plan_merge_test.cc checks what a plan means, by merging attention partials.
#include "backend/cascade_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "cascade_plan_test_util.h"

namespace folio {
namespace {

using namespace cascade_test;  // NOLINT: the tests' own helpers

TEST(CascadePlan, DistinctTablesShareNothing) {
  Batch b(16);
  for (int32_t c : {1, 15, 16, 17, 100, 200, 512, 1000}) b.add(c, {});
  const CascadeOptions o;
  const CascadePlan p = b.plan(o);
  check_plan(b, p, o);
  EXPECT_EQ(p.num_segments, 0);
  EXPECT_EQ(p.items.size(), 8u);
  EXPECT_EQ(p.num_slots, 8);
  EXPECT_EQ(p.read_tokens, p.logical_tokens);
  EXPECT_EQ(p.saving(), 0.0);
  EXPECT_FALSE(b.may_share());
}

TEST(CascadePlan, EmptyAndSingleRowBatches) {
  const CascadeOptions o;
  Batch empty(16);
  const CascadePlan e = empty.plan(o);
  EXPECT_TRUE(e.items.empty());
  EXPECT_EQ(e.row_slot_start, std::vector<int32_t>{0});
  EXPECT_FALSE(empty.may_share());
  Batch one(16);
  one.add(3000, {});
  const CascadePlan p = one.plan(o);
  check_plan(one, p, o);
  EXPECT_EQ(p.items.size(), 3u);  // 1024 + 1024 + 952 tokens
}

// 1024 rows x (2048 shared + 256 own tokens), block 16: SGLang's one-prefix workload.
TEST(CascadePlan, OnePrefixForAllRowsIsReadOncePerRowTile) {
  Batch b(16);
  const std::vector<int32_t> prefix = b.fresh_blocks(128);
  for (int s = 0; s < 1024; ++s) b.add(2048 + 256, prefix);
  const CascadeOptions o;  // 16 rows, 1024 tokens per item
  const CascadePlan p = b.plan(o);
  const auto ranges = check_plan(b, p, o);
  EXPECT_EQ(p.num_segments, 1);
  EXPECT_EQ(p.items.size(), 2u * 64 + 1024);  // 2 chunks x 64 row tiles, then one per row
  const int64_t read = int64_t{64} * 2048 + int64_t{1024} * 256;
  EXPECT_EQ(p.read_tokens, read);
  EXPECT_EQ(p.logical_tokens, int64_t{1024} * 2304);
  EXPECT_NEAR(p.saving(), 1.0 - double(read) / (1024.0 * 2304), 1e-12);
  EXPECT_GT(p.saving(), 0.83);
  for (int s = 0; s < 1024; ++s) {
    ASSERT_EQ(ranges[s].size(), 3u);
    EXPECT_EQ(ranges[s][0].num_rows, 16);
    EXPECT_EQ(ranges[s][1].tok_end, 2048);
    EXPECT_EQ(ranges[s][2].tok_begin, 2048);
  }
  EXPECT_TRUE(b.may_share());
  // Host time of the plan (printed only).
  using clock = std::chrono::steady_clock;
  double best = 1e30, total = 0;
  constexpr int kRuns = 20;
  for (int i = 0; i < kRuns; ++i) {
    const auto t0 = clock::now();
    const CascadePlan q = b.plan(o);
    const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    best = std::min(best, us);
    total += us;
    ASSERT_EQ(q.items.size(), p.items.size());
  }
  const auto t0 = clock::now();
  for (int i = 0; i < kRuns; ++i) ASSERT_TRUE(b.may_share());
  const double share_us =
      std::chrono::duration<double, std::micro>(clock::now() - t0).count() / kRuns;
  std::printf(
      "plan_cascade 1024 rows x (2048 + 256) tokens, block 16: best %.1f us, mean %.1f us;"
      " rows_may_share %.1f us\n",
      best, total / kRuns, share_us);
}

// 64 groups of 16 rows, each group with its own 1024-token prefix, rows in a shuffled order.
TEST(CascadePlan, GroupsInShuffledOrderGetOneSegmentEach) {
  std::mt19937 rng(7);
  Batch b(16);
  std::vector<std::vector<int32_t>> prefixes;
  std::vector<int> group_of;
  for (int g = 0; g < 64; ++g) prefixes.push_back(b.fresh_blocks(64));
  for (int g = 0; g < 64; ++g)
    for (int i = 0; i < 16; ++i) group_of.push_back(g);
  std::shuffle(group_of.begin(), group_of.end(), rng);
  for (int g : group_of) b.add(1024 + 1 + static_cast<int32_t>(rng() % 300), prefixes[g]);
  b.permute_ids(rng);
  const CascadeOptions o;
  const CascadePlan p = b.plan(o);
  const auto ranges = check_plan(b, p, o);
  EXPECT_EQ(p.num_segments, 64);
  for (int s = 0; s < b.num_seqs(); ++s) {
    ASSERT_EQ(ranges[s].size(), 2u);
    EXPECT_EQ(ranges[s][0].tok_end, 1024);
    const CascadeItem& it = p.items[ranges[s][0].item];
    ASSERT_EQ(it.num_rows, 16);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(group_of[p.rows[it.row_begin + i]], group_of[s]);
  }
  EXPECT_EQ(p.read_tokens, p.logical_tokens - int64_t{64} * 15 * 1024);
}

// All rows share one 16-token block (too short to pay), then groups share 512 more tokens: the
// groups' segments start at token 0 and no segment covers only the first block.
TEST(CascadePlan, ShortCommonLevelIsLeftToItsChildren) {
  Batch b(16);
  const std::vector<int32_t> root = b.fresh_blocks(1);
  std::vector<int> group_of;
  for (int g = 0; g < 4; ++g) {
    std::vector<int32_t> prefix = root;
    for (int32_t x : b.fresh_blocks(32)) prefix.push_back(x);
    for (int i = 0; i < 8; ++i) {
      b.add(528 + 40 + i, prefix);
      group_of.push_back(g);
    }
  }
  const CascadeOptions o;
  const CascadePlan p = b.plan(o);
  const auto ranges = check_plan(b, p, o);
  EXPECT_TRUE(b.may_share());
  EXPECT_EQ(p.num_segments, 4);
  for (int s = 0; s < b.num_seqs(); ++s) {
    ASSERT_EQ(ranges[s].size(), 2u);
    EXPECT_EQ(ranges[s][0].tok_begin, 0);
    EXPECT_EQ(ranges[s][0].tok_end, 528);
    EXPECT_EQ(ranges[s][0].num_rows, 8);
  }
}

// Both levels pay: [0, 512) for all rows, [512, 1024) per group; a group of one row reads past
// 512 on its own.
TEST(CascadePlan, NestedLevelsEachGetASegment) {
  Batch b(16);
  const std::vector<int32_t> root = b.fresh_blocks(32);
  const std::vector<int> sizes = {5, 7, 1, 3};
  for (size_t g = 0; g < sizes.size(); ++g) {
    std::vector<int32_t> prefix = root;
    for (int32_t x : b.fresh_blocks(32)) prefix.push_back(x);
    for (int i = 0; i < sizes[g]; ++i) b.add(1024 + 50, prefix);
  }
  CascadeOptions o;
  o.max_rows_per_item = 8;
  const CascadePlan p = b.plan(o);
  const auto ranges = check_plan(b, p, o);
  EXPECT_EQ(p.num_segments, 4);  // the root and the groups of 5, 7 and 3
  int row = 0;
  for (int size : sizes)
    for (int i = 0; i < size; ++i, ++row) {
      const auto& r = ranges[row];
      ASSERT_EQ(r.size(), size > 1 ? 3u : 2u) << row;
      EXPECT_EQ(r[0].tok_end, 512);
      EXPECT_EQ(r[0].num_rows, 8);  // 16 rows in tiles of 8
      if (size > 1) {
        EXPECT_EQ(r[1].tok_begin, 512);
        EXPECT_EQ(r[1].tok_end, 1024);
        EXPECT_EQ(r[1].num_rows, size);
      }
      EXPECT_EQ(r.back().tok_end, 1074);
    }
  EXPECT_EQ(p.read_tokens, 2 * 512 + 3 * 512 + 562 + 15 * 50);
}

// Parallel-sampling siblings with the same table and a context of whole blocks: the block of the
// newest token is not shared, so every row keeps an own suffix with its last token.
TEST(CascadePlan, IdenticalTablesKeepTheLastBlockOwn) {
  Batch b(16);
  const std::vector<int32_t> table = b.fresh_blocks(32);
  for (int s = 0; s < 4; ++s) b.add(512, table);
  CascadeOptions o;
  const CascadePlan p = b.plan(o);
  const auto ranges = check_plan(b, p, o);
  EXPECT_EQ(p.num_segments, 1);
  for (int s = 0; s < 4; ++s) {
    ASSERT_EQ(ranges[s].size(), 2u);
    EXPECT_EQ(ranges[s][0].tok_end, 496);
    EXPECT_EQ(ranges[s][1].tok_begin, 496);
    EXPECT_EQ(ranges[s][1].num_rows, 1);
  }
  EXPECT_EQ(p.read_tokens, 496 + 4 * 16);
}

TEST(CascadePlan, ItemsSplitOnBlockBoundariesAndRowTiles) {
  Batch b(16);
  const std::vector<int32_t> prefix = b.fresh_blocks(20);
  for (int s = 0; s < 10; ++s) b.add(470, prefix);  // cap 29 blocks: shared [0, 320)
  CascadeOptions o;
  o.max_tokens_per_item = 100;  // 96 tokens
  o.max_rows_per_item = 3;
  o.min_shared_tokens = 256;
  const CascadePlan p = b.plan(o);
  const auto ranges = check_plan(b, p, o);
  EXPECT_EQ(p.num_segments, 1);
  std::vector<std::pair<int32_t, int32_t>> toks;
  for (const Range& r : ranges[9]) toks.push_back({r.tok_begin, r.tok_end});
  const std::vector<std::pair<int32_t, int32_t>> want = {{0, 96},    {96, 192},  {192, 288},
                                                         {288, 320}, {320, 416}, {416, 470}};
  EXPECT_EQ(toks, want);
  EXPECT_EQ(p.items.size(), 4u * 4 + 10 * 2);  // 4 chunks x tiles of 3, 3, 3, 1; 2 per row
  std::vector<int32_t> tile_rows;
  for (const CascadeItem& it : p.items)
    if (it.tok_begin == 0) tile_rows.push_back(it.num_rows);
  EXPECT_EQ(tile_rows, (std::vector<int32_t>{3, 3, 3, 1}));
  o.max_tokens_per_item = 5;  // below a block: one block per item
  const CascadePlan q = b.plan(o);
  check_plan(b, q, o);
  for (const CascadeItem& it : q.items) EXPECT_LE(it.tok_end - it.tok_begin, 16);
  EXPECT_EQ(q.read_tokens, p.read_tokens);
}

TEST(CascadePlan, MinItemsHalvesTokenRangesDownToTwoTiles) {
  Batch b(16);
  const std::vector<int32_t> prefix = b.fresh_blocks(128);  // 2048 shared tokens
  for (int s = 0; s < 4; ++s) b.add(2048 + 100, prefix);    // + 100 own each
  auto longest_item = [](const CascadePlan& p) {
    int32_t n = 0;
    for (const CascadeItem& it : p.items) n = std::max(n, it.tok_end - it.tok_begin);
    return n;
  };
  CascadeOptions o;  // 1024 tokens per item: 2 shared items + 4 own
  const CascadePlan base = b.plan(o);
  check_plan(b, base, o);
  EXPECT_EQ(base.items.size(), 6u);
  o.min_items = 6;  // enough already: the same plan
  EXPECT_EQ(b.plan(o).items, base.items);
  o.min_items = 7;  // 512 tokens: 4 + 4
  const CascadePlan p512 = b.plan(o);
  check_plan(b, p512, o);
  EXPECT_EQ(p512.items.size(), 8u);
  EXPECT_EQ(longest_item(p512), 512);
  o.min_items = 20;  // 128 tokens: 16 + 4, which is enough
  const CascadePlan p128 = b.plan(o);
  check_plan(b, p128, o);
  EXPECT_EQ(p128.items.size(), 20u);
  EXPECT_EQ(longest_item(p128), kMinSplitTokens);
  o.min_items = 1000;  // never below two tiles, however many items are asked for
  const CascadePlan floor = b.plan(o);
  EXPECT_EQ(floor.items, p128.items);
  EXPECT_EQ(floor.read_tokens, base.read_tokens);  // splitting reads nothing more
}

TEST(CascadePlan, MinSharedRowsAndTokensGateSegments) {
  Batch b(4);
  const std::vector<int32_t> a = b.fresh_blocks(4), c = b.fresh_blocks(4);
  for (int s = 0; s < 3; ++s) b.add(17, a);
  for (int s = 0; s < 2; ++s) b.add(17, c);
  CascadeOptions o;
  o.min_shared_tokens = 16;
  o.min_shared_rows = 1;  // treated as 2
  EXPECT_EQ(b.plan(o).num_segments, 2);
  o.min_shared_rows = 3;
  EXPECT_EQ(b.plan(o).num_segments, 1);
  o.min_shared_tokens = 17;
  EXPECT_EQ(b.plan(o).num_segments, 0);
  o.min_shared_tokens = 0;  // a zero-length range is never a segment
  o.min_shared_rows = 2;
  const CascadePlan p = b.plan(o);
  check_plan(b, p, o);
  EXPECT_EQ(p.num_segments, 2);
}

TEST(CascadePlan, RowsMayShareLooksAtShareableFirstBlocks) {
  Batch b(16);
  const std::vector<int32_t> first = b.fresh_blocks(2);
  b.add(16, first);  // cap 0: its first block holds its newest token
  b.add(10, first);
  b.add(40, {});
  EXPECT_FALSE(b.may_share());
  b.add(17, first);  // cap 1
  EXPECT_FALSE(b.may_share());
  b.add(33, first);
  EXPECT_TRUE(b.may_share());
}

// 64 groups of 16 rows sharing 2048 tokens, 256 own each (the shared-prefix bench's load): with
// wide_min_rows the 128 shared items (16 rows) come first, in the order they were planned, and
// the plan is otherwise the one without it.
TEST(CascadePlan, WideItemsComeFirst) {
  Batch b(16);
  for (int g = 0; g < 64; ++g) {
    const std::vector<int32_t> prefix = b.fresh_blocks(128);
    for (int s = 0; s < 16; ++s) b.add(2048 + 256, prefix);
  }
  CascadeOptions o;
  const CascadePlan plain = b.plan(o);
  o.wide_min_rows = 9;
  const CascadePlan wide = b.plan(o);
  check_plan(b, wide, o);
  EXPECT_EQ(plain.num_wide_items, 0);
  EXPECT_EQ(plain.num_single_row_items, 0);
  ASSERT_EQ(wide.num_wide_items, 128);
  EXPECT_EQ(wide.num_single_row_items, 1024);  // every row's own suffix, packed last
  ASSERT_EQ(wide.items.size(), plain.items.size());
  std::vector<CascadeItem> expect;
  for (const CascadeItem& it : plain.items)
    if (it.num_rows >= 9) expect.push_back(it);
  for (const CascadeItem& it : plain.items)
    if (it.num_rows < 9) expect.push_back(it);
  EXPECT_EQ(wide.items, expect);
  EXPECT_EQ(wide.rows, plain.rows);
  EXPECT_EQ(wide.row_slots, plain.row_slots);
  EXPECT_EQ(wide.row_slot_start, plain.row_slot_start);
  // Every item wide, or none.
  o.wide_min_rows = 1;
  EXPECT_EQ(b.plan(o).num_wide_items, static_cast<int>(plain.items.size()));
  EXPECT_EQ(b.plan(o).num_single_row_items, 0);
  o.wide_min_rows = 17;
  EXPECT_EQ(b.plan(o).num_wide_items, 0);
  EXPECT_EQ(b.plan(o).num_single_row_items, 1024);
}

TEST(CascadePlan, RandomBatchesAreCoveredExactly) {
  std::mt19937 rng(11);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int with_segments = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int bs = std::vector<int>{1, 2, 4, 16}[uni(0, 3)];
    const Batch b = random_batch(rng, bs, 40);
    CascadeOptions o;
    o.max_rows_per_item = uni(1, 6);
    o.max_tokens_per_item = uni(1, 12 * bs);
    o.min_shared_rows = uni(0, 4);
    o.min_shared_tokens = uni(0, 4 * bs);
    o.wide_min_rows = uni(0, 4);
    const CascadePlan p = b.plan(o);
    SCOPED_TRACE(::testing::Message() << "iteration " << iter);
    check_plan(b, p, o);
    with_segments += p.num_segments > 0;
    EXPECT_LE(p.read_tokens, p.logical_tokens);
    if (p.num_segments > 0) {
      EXPECT_TRUE(b.may_share());
    }
    if (HasFailure()) return;
  }
  EXPECT_GT(with_segments, 200);
}

}  // namespace
}  // namespace folio
