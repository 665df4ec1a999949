// The packs of a cascade plan's narrow items (backend/cascade_packs.h): consecutive runs that fit
// a block's query rows, capped by items or tiles, covering every item from `begin` once; and the
// engine's tile target (as long as the longest wide item, else a wave of blocks).
#include "backend/cascade_packs.h"

#include <gtest/gtest.h>

#include <random>

#include "cascade_plan_test_util.h"

namespace folio {
namespace {

using cascade_test::Batch;

// A plan of items with these (rows, tokens) and nothing else (the packer reads only items and
// num_wide_items).
CascadePlan items_plan(const std::vector<std::pair<int, int>>& items, int num_wide = 0) {
  CascadePlan p;
  for (auto [rows, tokens] : items) p.items.push_back({0, rows, 0, 0, tokens, 0});
  p.num_wide_items = num_wide;
  return p;
}

// Checks the packs cover items [begin, n) in order, each within the options' limits.
void check_packs(const CascadePlan& p, int begin, const CascadePackOptions& o,
                 const std::vector<int32_t>& packs) {
  ASSERT_FALSE(packs.empty());
  EXPECT_EQ(packs.front(), begin);
  EXPECT_EQ(packs.back(), static_cast<int32_t>(p.items.size()));
  for (size_t b = 0; b + 1 < packs.size(); ++b) {
    ASSERT_LT(packs[b], packs[b + 1]) << "pack " << b << " is empty";
    int rows = 0;
    int64_t tiles = 0;
    for (int32_t i = packs[b]; i < packs[b + 1]; ++i) {
      rows += p.items[i].num_rows * o.q_per_kv;
      tiles += (p.items[i].tok_end - p.items[i].tok_begin + o.tile_tokens - 1) / o.tile_tokens;
    }
    EXPECT_LE(rows, o.max_query_rows) << "pack " << b;
    if (o.max_items > 0) {
      EXPECT_LE(packs[b + 1] - packs[b], o.max_items) << "pack " << b;
    }
    if (o.target_tiles > 0 && packs[b + 1] - packs[b] > 1) {
      EXPECT_LE(tiles, o.target_tiles) << "pack " << b;
    }
  }
}

TEST(CascadePacks, QueryRowsCloseAPack) {
  // GQA 4: one-row items 4 query rows, 16 to a block; 4-row items (n = 4 samples) 16, 4 to one.
  CascadePackOptions o;
  o.q_per_kv = 4;
  const CascadePlan p = items_plan({{4, 64}, {4, 64}, {4, 64}, {4, 64}, {4, 64}, {1, 64}, {1, 64}});
  const auto packs = pack_cascade_items(p, 0, o);
  check_packs(p, 0, o, packs);
  EXPECT_EQ(packs, (std::vector<int32_t>{0, 4, 7}));
  // Mixed sizes: 8 + 4 + 2 rows = 56 query rows, then 4 more rows do not fit.
  const CascadePlan mixed = items_plan({{8, 64}, {4, 64}, {2, 64}, {4, 64}, {1, 64}});
  const auto mixed_packs = pack_cascade_items(mixed, 0, o);
  check_packs(mixed, 0, o, mixed_packs);
  EXPECT_EQ(mixed_packs, (std::vector<int32_t>{0, 3, 5}));
}

TEST(CascadePacks, ItemAndTileCapsCloseAPack) {
  CascadePackOptions o;
  o.q_per_kv = 1;
  o.max_items = 3;
  const CascadePlan p = items_plan(std::vector<std::pair<int, int>>(7, {1, 256}));
  auto packs = pack_cascade_items(p, 0, o);
  check_packs(p, 0, o, packs);
  EXPECT_EQ(packs, (std::vector<int32_t>{0, 3, 6, 7}));
  // Tiles: items of 4 tiles under a target of 10 go two to a pack; one longer than the target
  // still gets a pack of its own.
  o.max_items = 0;
  o.target_tiles = 10;
  const CascadePlan t = items_plan({{1, 256}, {1, 256}, {1, 256}, {1, 1024}, {1, 256}, {1, 65}});
  packs = pack_cascade_items(t, 0, o);
  check_packs(t, 0, o, packs);
  EXPECT_EQ(packs, (std::vector<int32_t>{0, 2, 3, 4, 6}));  // 4+4 | 4 | 16 | 4+2
}

TEST(CascadePacks, BeginSkipsTheWideItemsAndEmptyRangesHaveNoPacks) {
  CascadePackOptions o;
  o.q_per_kv = 4;
  const CascadePlan p = items_plan({{16, 1024}, {16, 1024}, {1, 256}, {1, 256}}, 2);
  const auto packs = pack_cascade_items(p, 2, o);
  check_packs(p, 2, o, packs);
  EXPECT_EQ(packs, (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(pack_cascade_items(p, 4, o), (std::vector<int32_t>{4}));
}

TEST(CascadePacks, TargetFollowsTheWideItemsElseAWave) {
  // Wide items: the longest of them (16 tiles), whatever the rest.
  const CascadePlan wide = items_plan({{16, 1024}, {16, 512}, {1, 256}}, 2);
  EXPECT_EQ(cascade_pack_target_tiles(wide, 2, 64, 8, 132), 16);
  // None: the longest packed item or kMinPackTiles, whichever is more, within the packed items'
  // tiles x kv heads over two blocks per SM (in [1, kMaxPackTiles]).
  const CascadePlan few = items_plan(std::vector<std::pair<int, int>>(32, {1, 256}));
  EXPECT_EQ(cascade_pack_target_tiles(few, 0, 64, 8, 132), 32 * 4 * 8 / 264);
  const CascadePlan many = items_plan(std::vector<std::pair<int, int>>(1024, {1, 256}));
  EXPECT_EQ(cascade_pack_target_tiles(many, 0, 64, 8, 132), kMinPackTiles);
  std::vector<std::pair<int, int>> samples(512, {4, 1280});  // 4 rows x 20 tiles, n = 4 samples
  samples.insert(samples.end(), 1024, {1, 256});
  EXPECT_EQ(cascade_pack_target_tiles(items_plan(samples), 0, 64, 8, 132), 20);
  const CascadePlan one = items_plan({{1, 16}});
  EXPECT_EQ(cascade_pack_target_tiles(one, 0, 64, 8, 132), 1);
  // Only the items from `begin` count.
  EXPECT_EQ(cascade_pack_target_tiles(many, 1000, 64, 8, 132), 24 * 4 * 8 / 264);
}

TEST(CascadePacks, RealPlansOfGroupsArePackedWithinTheLimits) {
  // Random groups of 1-12 rows sharing prefixes, planned as the engine plans them at GQA 4: every
  // item past the wide ones lands in exactly one pack within 64 query rows.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    Batch b(16);
    const int groups = 1 + static_cast<int>(rng() % 12);
    for (int g = 0; g < groups; ++g) {
      const std::vector<int32_t> prefix = b.fresh_blocks(8 + static_cast<int>(rng() % 120));
      const int rows = 1 + static_cast<int>(rng() % 12);
      for (int r = 0; r < rows; ++r)
        b.add(static_cast<int32_t>(prefix.size()) * 16 + 1 + static_cast<int32_t>(rng() % 600),
              prefix);
    }
    CascadeOptions co;
    co.max_rows_per_item = 16;
    co.wide_min_rows = 9;
    co.min_items = 33;
    const CascadePlan p = b.plan(co);
    CascadePackOptions o;
    o.q_per_kv = 4;
    o.target_tiles = cascade_pack_target_tiles(p, p.num_wide_items, 64, 8, 132);
    const auto packs = pack_cascade_items(p, p.num_wide_items, o);
    check_packs(p, p.num_wide_items, o, packs);
  }
}

}  // namespace
}  // namespace folio
