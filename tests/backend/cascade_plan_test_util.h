// Internal to the cascade plan tests (cascade_plan_test.cc, cascade_plan_merge_test.cc): a decode
// batch in ForwardBatch's layout, the plan checker every test runs (each row's context covered
// exactly once through block ids equal to the row's own, consistent slots and items) and random
// prefix-tree batches.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "backend/cascade_plan.h"

namespace folio::cascade_test {

// A decode batch in ForwardBatch's layout. add() gives a row the first ceil(ctx / bs) ids of
// `prefix` followed by fresh ids.
struct Batch {
  int bs = 16;
  std::vector<int32_t> ctx, bts{0}, table;
  int32_t num_blocks = 0;

  explicit Batch(int block_size) : bs(block_size) {}
  int32_t fresh() { return num_blocks++; }
  std::vector<int32_t> fresh_blocks(int n) {
    std::vector<int32_t> b(n);
    for (auto& x : b) x = fresh();
    return b;
  }
  void add(int32_t c, const std::vector<int32_t>& prefix) {
    const int32_t need = (c + bs - 1) / bs;
    for (int32_t i = 0; i < need; ++i)
      table.push_back(i < static_cast<int32_t>(prefix.size()) ? prefix[i] : fresh());
    bts.push_back(static_cast<int32_t>(table.size()));
    ctx.push_back(c);
  }
  // Renames the block ids by a random permutation: the plan must not depend on id order.
  void permute_ids(std::mt19937& rng) {
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (auto& b : table) b = perm[b];
  }
  int num_seqs() const { return static_cast<int>(ctx.size()); }
  CascadePlan plan(const CascadeOptions& o) const { return plan_cascade(ctx, bts, table, bs, o); }
  bool may_share() const { return rows_may_share(ctx, bts, table, bs); }
};

struct Range {
  int32_t tok_begin, tok_end, num_rows, item;
  bool operator<(const Range& o) const { return tok_begin < o.tok_begin; }
};

// The checker every test runs. Returns each row's ranges, sorted by token.
inline std::vector<std::vector<Range>> check_plan(const Batch& b, const CascadePlan& p,
                                                  const CascadeOptions& o) {
  const int n = b.num_seqs();
  std::vector<std::vector<Range>> ranges(n);
  std::vector<std::pair<int32_t, int32_t>> owner(p.num_slots, {-1, -1});  // slot -> (row, item)
  const int64_t chunk = int64_t{std::max(1, o.max_tokens_per_item / b.bs)} * b.bs;
  int32_t rows_seen = 0, slots_seen = 0;
  int64_t read = 0;
  // Wide items first (CascadeOptions::wide_min_rows), and only them.
  const int32_t num_items = static_cast<int32_t>(p.items.size());
  EXPECT_TRUE(p.num_wide_items >= 0 && p.num_wide_items <= num_items);
  if (o.wide_min_rows <= 0) {
    EXPECT_EQ(p.num_wide_items, 0);
  }
  EXPECT_TRUE(p.num_single_row_items >= 0 &&
              p.num_wide_items + p.num_single_row_items <= num_items);
  if (o.wide_min_rows <= 0) {
    EXPECT_EQ(p.num_single_row_items, 0);
  }
  for (int32_t k = 0; o.wide_min_rows > 0 && k < num_items; ++k) {
    const CascadeItem& it = p.items[k];
    EXPECT_EQ(it.num_rows >= o.wide_min_rows, k < p.num_wide_items) << "item " << k;
    EXPECT_EQ(it.num_rows == 1 && it.num_rows < o.wide_min_rows,
              k >= num_items - p.num_single_row_items)
        << "item " << k;
  }
  // The rest in the order the planner made them (rows and slots in sequence): that partition
  // moves items, never their rows or slots.
  std::vector<int32_t> made(p.items.size());
  std::iota(made.begin(), made.end(), 0);
  std::stable_sort(made.begin(), made.end(), [&](int32_t x, int32_t y) {
    return p.items[x].row_begin < p.items[y].row_begin;
  });
  for (int32_t k : made) {
    const CascadeItem& it = p.items[k];
    EXPECT_EQ(it.row_begin, rows_seen) << "item " << k;
    EXPECT_EQ(it.slot_begin, slots_seen) << "item " << k;
    EXPECT_GE(it.num_rows, 1);
    EXPECT_LE(it.num_rows, std::max(1, o.max_rows_per_item));
    EXPECT_LT(it.tok_begin, it.tok_end);
    EXPECT_LE(it.tok_end - it.tok_begin, chunk);
    EXPECT_EQ(it.tok_begin % b.bs, 0) << "item " << k << " starts off a block boundary";
    rows_seen += it.num_rows;
    slots_seen += it.num_rows;
    read += it.tok_end - it.tok_begin;
    if (rows_seen > static_cast<int32_t>(p.rows.size()) || slots_seen > p.num_slots) {
      ADD_FAILURE() << "item " << k << " runs past the rows or slots";
      return ranges;
    }
    for (int32_t i = 0; i < it.num_rows; ++i) {
      const int32_t s = p.rows[it.row_begin + i];
      EXPECT_TRUE(s >= 0 && s < n);
      if (s < 0 || s >= n) return ranges;
      owner[it.slot_begin + i] = {s, k};
      ranges[s].push_back({it.tok_begin, it.tok_end, it.num_rows, k});
      EXPECT_LE(it.tok_end, b.ctx[s]);
      // The item reads the row's tokens through its own block ids.
      for (int32_t blk = it.tok_begin / b.bs; blk * b.bs < it.tok_end; ++blk)
        EXPECT_EQ(b.table[it.bt_start + blk], b.table[b.bts[s] + blk])
            << "row " << s << " block " << blk << " item " << k;
    }
  }
  EXPECT_EQ(rows_seen, static_cast<int32_t>(p.rows.size()));
  EXPECT_EQ(slots_seen, p.num_slots);
  EXPECT_EQ(read, p.read_tokens);
  EXPECT_EQ(p.logical_tokens, std::accumulate(b.ctx.begin(), b.ctx.end(), int64_t{0}));
  // Coverage: each row's ranges tile [0, ctx), and its last token is read by an item of its own.
  for (int s = 0; s < n; ++s) {
    std::sort(ranges[s].begin(), ranges[s].end());
    int32_t at = 0;
    for (const Range& r : ranges[s]) {
      EXPECT_EQ(r.tok_begin, at) << "row " << s;
      at = r.tok_end;
    }
    EXPECT_EQ(at, b.ctx[s]) << "row " << s;
    if (!ranges[s].empty()) {
      EXPECT_EQ(ranges[s].back().num_rows, 1) << "row " << s;
    }
  }
  // The CSR lists exactly the row's slots, in token order.
  EXPECT_EQ(p.row_slot_start.size(), static_cast<size_t>(n + 1));
  if (p.row_slot_start.size() != static_cast<size_t>(n + 1)) return ranges;
  EXPECT_EQ(p.row_slot_start[0], 0);
  EXPECT_EQ(p.row_slot_start[n], p.num_slots);
  EXPECT_EQ(p.row_slots.size(), static_cast<size_t>(p.num_slots));
  std::vector<int> listed(p.num_slots, 0);
  for (int s = 0; s < n; ++s) {
    EXPECT_EQ(p.row_slot_start[s + 1] - p.row_slot_start[s],
              static_cast<int32_t>(ranges[s].size()));
    int32_t prev_tok = -1;
    for (int32_t j = p.row_slot_start[s]; j < p.row_slot_start[s + 1]; ++j) {
      const int32_t slot = p.row_slots[j];
      EXPECT_TRUE(slot >= 0 && slot < p.num_slots);
      if (slot < 0 || slot >= p.num_slots) return ranges;
      ++listed[slot];
      EXPECT_EQ(owner[slot].first, s);
      const int32_t tok = p.items[owner[slot].second].tok_begin;
      EXPECT_GT(tok, prev_tok) << "row " << s << " slots out of token order";
      prev_tok = tok;
    }
  }
  for (int32_t slot = 0; slot < p.num_slots; ++slot) EXPECT_EQ(listed[slot], 1) << slot;
  return ranges;
}

// A random tree of prefixes (each extends an earlier one), rows on random prefixes with random
// contexts (shorter or longer than their prefix), random block ids.
inline Batch random_batch(std::mt19937& rng, int bs, int max_rows) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Batch b(bs);
  std::vector<std::vector<int32_t>> prefixes = {{}};
  const int num_prefixes = uni(1, 6);
  for (int i = 0; i < num_prefixes; ++i) {
    std::vector<int32_t> p = prefixes[uni(0, static_cast<int>(prefixes.size()) - 1)];
    for (int32_t x : b.fresh_blocks(uni(0, 8))) p.push_back(x);
    prefixes.push_back(p);
  }
  const int rows = uni(1, max_rows);
  for (int s = 0; s < rows; ++s) {
    const auto& p = prefixes[uni(0, static_cast<int>(prefixes.size()) - 1)];
    const int blocks = static_cast<int>(p.size()) + uni(0, 3);
    b.add(std::max(1, uni(blocks * bs - 2 * bs, blocks * bs)), p);
  }
  b.permute_ids(rng);
  return b;
}

}  // namespace folio::cascade_test
