// The CPU reference's sliding window: a query at position p attends to keys (p - W, p] only.
// Checked against the same op without a window over a cache that holds just those W keys (copied
// to other blocks, the query's position moved to W - 1): the two must agree exactly, for decode
// rows and for a prefill chunk whose rows each see their own window.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"

namespace folio {
namespace {

constexpr int kHeads = 4, kKvHeads = 2, kHeadDim = 16, kBlock = 4;
constexpr int kWidth = kKvHeads * kHeadDim;

struct Cache {
  std::vector<float> k, v;
};

Cache random_cache(int slots, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Cache c;
  c.k.resize(static_cast<size_t>(slots) * kWidth);
  c.v.resize(c.k.size());
  for (float& x : c.k) x = u(rng);
  for (float& x : c.v) x = u(rng);
  return c;
}

// One sequence's args over block table `table`: query rows [query_start[0], query_start[1]),
// the last at position ctx[0] - 1.
cpu::PagedAttentionArgs one_sequence(const int32_t* query_start, const int32_t* table_start,
                                     const int32_t* ctx, const int32_t* table, int window) {
  cpu::PagedAttentionArgs a;
  a.num_seqs = 1;
  a.num_heads = kHeads;
  a.num_kv_heads = kKvHeads;
  a.head_dim = kHeadDim;
  a.block_size = kBlock;
  a.scale = 0.25f;
  a.query_start = query_start;
  a.context_lens = ctx;
  a.block_table_start = table_start;
  a.block_table = table;
  a.sliding_window = window;
  return a;
}

// Attention of one query row at position `pos` of a sequence whose keys 0..pos sit in
// consecutive blocks 0, 1, ... of `cache`, with window `window` (0: none).
std::vector<float> attend(const Cache& cache, const std::vector<float>& q, int pos, int window) {
  const int blocks = pos / kBlock + 1;
  std::vector<int32_t> table(blocks);
  for (int i = 0; i < blocks; ++i) table[i] = i;
  const int32_t query_start[] = {0, 1}, table_start[] = {0, blocks}, ctx[] = {pos + 1};
  const cpu::PagedAttentionArgs a =
      one_sequence(query_start, table_start, ctx, table.data(), window);
  std::vector<float> out(q.size());
  cpu::paged_attention(a, q.data(), cache.k.data(), cache.v.data(), out.data());
  return out;
}

TEST(SlidingWindowAttention, DecodeRowSeesExactlyTheLastWindowOfKeys) {
  const Cache cache = random_cache(64, 1);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> q(kHeads * kHeadDim);
  for (float& x : q) x = u(rng);
  for (int window : {1, 5, 8, 13}) {
    for (int pos : {0, 3, window - 1, window, 20, 37}) {
      if (pos < 0) continue;
      const int first = std::max(0, pos - window + 1);
      // The window's keys alone, from slot 0 on: no window needed there.
      Cache only;
      only.k.assign(cache.k.begin() + first * kWidth, cache.k.begin() + (pos + 1) * kWidth);
      only.v.assign(cache.v.begin() + first * kWidth, cache.v.begin() + (pos + 1) * kWidth);
      only.k.resize(64 * kWidth);
      only.v.resize(64 * kWidth);
      EXPECT_EQ(attend(cache, q, pos, window), attend(only, q, pos - first, 0))
          << "window " << window << " pos " << pos;
    }
  }
  // A window wider than the context is no window; a narrower one changes the result.
  EXPECT_EQ(attend(cache, q, 20, 21), attend(cache, q, 20, 0));
  EXPECT_NE(attend(cache, q, 20, 20), attend(cache, q, 20, 0));
}

TEST(SlidingWindowAttention, PrefillRowsEachSeeTheirOwnWindow) {
  const Cache cache = random_cache(64, 3);
  const int ctx = 30, q_len = 12, window = 7;  // rows at positions 18..29
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> q(static_cast<size_t>(q_len) * kHeads * kHeadDim);
  for (float& x : q) x = u(rng);
  std::vector<int32_t> table(ctx / kBlock + 1);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  const int32_t query_start[] = {0, q_len}, table_start[] = {0, static_cast<int32_t>(table.size())},
                lens[] = {ctx};
  const cpu::PagedAttentionArgs a =
      one_sequence(query_start, table_start, lens, table.data(), window);
  std::vector<float> out(q.size());
  cpu::paged_attention(a, q.data(), cache.k.data(), cache.v.data(), out.data());
  const size_t row = kHeads * kHeadDim;
  for (int i = 0; i < q_len; ++i) {
    const std::vector<float> qi(q.begin() + i * row, q.begin() + (i + 1) * row);
    const std::vector<float> want = attend(cache, qi, ctx - q_len + i, window);
    EXPECT_EQ(std::vector<float>(out.begin() + i * row, out.begin() + (i + 1) * row), want)
        << "row " << i;
  }
}

}  // namespace
}  // namespace folio
