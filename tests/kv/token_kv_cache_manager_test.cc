#include "kv/token_kv_cache_manager.h"

#include <numeric>

#include <gtest/gtest.h>

namespace folio {
namespace {

using V = std::vector<int32_t>;

std::vector<TokenId> iota_tokens(int n, TokenId first) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

TokenKvConfig config(int slots, int host = 0) {
  TokenKvConfig c;
  c.max_total_tokens = slots;
  c.num_host_slots = host;
  return c;
}

int prefill(TokenKvCacheManager& m, SeqId seq, const std::vector<TokenId>& tokens,
            std::string_view salt = "") {
  int hit = m.get_computed_prefix(seq, tokens, salt);
  EXPECT_TRUE(m.append_slots(seq, static_cast<int>(tokens.size())));
  m.mark_computed(seq, tokens, static_cast<int>(tokens.size()));
  return hit;
}

TEST(TokenPool, PrefersOneContiguousRunThenScatters) {
  TokenPool pool(10);
  V a, b, c, d;
  pool.allocate(3, &a);  // 0..2
  pool.allocate(2, &b);  // 3..4
  pool.allocate(3, &c);  // 5..7
  EXPECT_EQ(a, (V{0, 1, 2}));
  pool.release(a);
  pool.release(c);  // free runs: [0,3) and [5,10)
  EXPECT_EQ(pool.num_free_runs(), 2);
  V e;
  pool.allocate(3, &e);  // best fit: the run of exactly 3
  EXPECT_EQ(e, (V{0, 1, 2}));
  V f;
  pool.allocate(4, &f);  // from [5,10)
  EXPECT_EQ(f, (V{5, 6, 7, 8}));
  pool.release(e);       // runs [0,3) and [9,10)
  pool.allocate(4, &d);  // no run of 4: longest first, then the rest
  EXPECT_EQ(d, (V{0, 1, 2, 9}));
  EXPECT_EQ(pool.num_free(), 0);
  pool.release(d);
  pool.release(b);
  pool.release(f);
  EXPECT_EQ(pool.num_free_runs(), 1);  // coalesced back into one run
  EXPECT_EQ(pool.largest_free_run(), 10);
  EXPECT_TRUE(pool.check().ok());
}

TEST(TokenKv, RadixTreeReusesPrefixesAtTokenGranularity) {
  TokenKvCacheManager m(config(64));
  auto a = iota_tokens(10, 0);
  EXPECT_EQ(prefill(m, 1, a), 0);
  auto b = a;
  b[7] = 99;  // shares 7 tokens with a
  EXPECT_EQ(m.get_computed_prefix(2, b, ""), 7);
  EXPECT_EQ(V(m.block_table(2).begin(), m.block_table(2).end()),
            V(m.block_table(1).begin(), m.block_table(1).begin() + 7));
  // The whole prompt is cached, yet one token is left to compute.
  EXPECT_EQ(m.get_computed_prefix(3, a, ""), 9);
  EXPECT_EQ(m.get_computed_prefix(4, a, "other-salt"), 0);
  ASSERT_TRUE(m.append_slots(2, 10));
  m.mark_computed(2, b, 10);  // splits a's edge at 7 and adds b's branch
  EXPECT_EQ(m.cached_tokens(), 13);
  EXPECT_TRUE(m.check_invariants().ok());
  for (SeqId s : {1, 2, 3, 4}) m.free(s);
  EXPECT_EQ(m.num_used_blocks(), 0);
  EXPECT_EQ(m.num_free_blocks(), 64);  // cached tokens count as free (evictable)
  EXPECT_TRUE(m.check_invariants().ok());
}

TEST(TokenKv, EvictsUnreferencedLeavesLeastRecentlyUsedFirst) {
  TokenKvCacheManager m(config(12));
  auto a = iota_tokens(4, 0), b = iota_tokens(4, 100), c = iota_tokens(4, 200);
  prefill(m, 1, a);
  prefill(m, 2, b);
  prefill(m, 3, c);
  m.free(1);
  m.free(2);
  m.free(3);
  auto b5 = b;
  b5.push_back(7);
  EXPECT_EQ(m.get_computed_prefix(4, b5, ""), 4);  // touches b
  m.free(4);
  // Need 4 fresh slots: a is the least recently used leaf.
  m.get_computed_prefix(5, iota_tokens(4, 300), "");
  ASSERT_TRUE(m.append_slots(5, 4));
  EXPECT_EQ(m.stats().evictions, 4);
  auto a5 = a, c5 = c;
  a5.push_back(7);
  c5.push_back(7);
  EXPECT_EQ(m.get_computed_prefix(6, a5, ""), 0);
  EXPECT_EQ(m.get_computed_prefix(7, c5, ""), 4);
  EXPECT_EQ(m.get_computed_prefix(8, b5, ""), 4);
  EXPECT_TRUE(m.check_invariants().ok());
}

TEST(TokenKv, ForkSharesSlotsWithoutCopies) {
  TokenKvCacheManager m(config(16));
  auto p = iota_tokens(5, 0);
  prefill(m, 1, p);
  m.fork(1, 2);
  EXPECT_EQ(m.pool().ref_count(m.block_table(1)[4]), 3);  // two sequences + the tree
  ASSERT_TRUE(m.append_slots(1, 6));
  ASSERT_TRUE(m.append_slots(2, 6));
  EXPECT_TRUE(m.take_pending_copies().empty());
  EXPECT_NE(m.block_table(1)[5], m.block_table(2)[5]);
  EXPECT_TRUE(m.check_invariants().ok());
  std::vector<SeqId> group{1, 2};
  EXPECT_EQ(m.num_blocks_to_swap(group), 7);  // 5 shared + 1 each
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.num_used_blocks(), 0);
  EXPECT_TRUE(m.check_invariants().ok());
}

TEST(TokenKv, SwapKeepsSharing) {
  TokenKvCacheManager m(config(16, 8));
  auto p = iota_tokens(5, 0);
  prefill(m, 1, p);
  m.fork(1, 2);
  ASSERT_TRUE(m.append_slots(2, 6));
  std::vector<SeqId> group{1, 2};
  std::vector<KvCopy> out, in;
  ASSERT_TRUE(m.swap_out(group, &out));
  EXPECT_EQ(out.size(), 6u);
  EXPECT_EQ(m.num_free_host_blocks(), 2);
  EXPECT_TRUE(m.check_invariants().ok());
  ASSERT_TRUE(m.swap_in(group, &in));
  ASSERT_EQ(in.size(), 6u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(m.block_table(1)[i], m.block_table(2)[i]);
  EXPECT_EQ(m.num_free_host_blocks(), 8);
  EXPECT_TRUE(m.check_invariants().ok());
  // Too little host space: refused, nothing moves.
  TokenKvCacheManager small(config(16, 5));
  prefill(small, 1, p);
  small.fork(1, 2);
  ASSERT_TRUE(small.append_slots(2, 6));
  std::vector<KvCopy> none;
  EXPECT_FALSE(small.swap_out(group, &none));
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(small.is_swapped(1));
}

}  // namespace
}  // namespace folio
