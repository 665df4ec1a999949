#include "kv/paged_kv_cache_manager.h"

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

PagedKvConfig config(int num_blocks, int block_size = 4, int host = 0) {
  PagedKvConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.num_host_blocks = host;
  return c;
}

// Registers `seq` with `tokens`, reserves and "computes" them all.
int prefill(PagedKvCacheManager& m, SeqId seq, const std::vector<TokenId>& tokens,
            std::string_view salt = "") {
  int hit = m.get_computed_prefix(seq, tokens, salt);
  EXPECT_TRUE(m.append_slots(seq, static_cast<int>(tokens.size())));
  m.mark_computed(seq, tokens, static_cast<int>(tokens.size()));
  return hit;
}

TEST(PagedKv, AllocatesOnDemandAndFreesEverything) {
  PagedKvCacheManager m(config(8));
  EXPECT_EQ(m.get_computed_prefix(1, iota_tokens(6, 0), ""), 0);
  EXPECT_EQ(m.num_blocks_needed(1, 6), 2);
  ASSERT_TRUE(m.append_slots(1, 6));
  EXPECT_EQ(m.block_table(1).size(), 2u);
  EXPECT_EQ(m.num_filled_slots(), 6);  // 2 blocks of 4: 2 slots wasted in the last
  EXPECT_EQ(m.num_blocks_needed(1, 8), 0);
  EXPECT_EQ(m.num_blocks_needed(1, 9), 1);
  ASSERT_TRUE(m.append_slots(1, 9));
  EXPECT_EQ(m.num_used_blocks(), 3);
  EXPECT_FALSE(m.append_slots(1, 100));  // out of memory: nothing changes
  EXPECT_EQ(m.num_used_blocks(), 3);
  EXPECT_TRUE(m.check_invariants().ok());
  m.free(1);
  EXPECT_EQ(m.num_free_blocks(), 8);
  EXPECT_EQ(m.num_filled_slots(), 0);
  EXPECT_TRUE(m.check_invariants().ok());
}

TEST(PagedKv, PrefixHitSharesFullBlocksButNeverTheWholePrompt) {
  PagedKvCacheManager m(config(16));
  auto a = iota_tokens(12, 100);  // exactly 3 full blocks
  EXPECT_EQ(prefill(m, 1, a), 0);
  // Same prompt: at most (12 - 1) / 4 = 2 blocks may be reused, one token must be computed.
  EXPECT_EQ(m.get_computed_prefix(2, a, ""), 8);
  EXPECT_EQ(V(m.block_table(2).begin(), m.block_table(2).end()),
            V(m.block_table(1).begin(), m.block_table(1).begin() + 2));
  EXPECT_EQ(m.ref_count(m.block_table(1)[0]), 2);
  // Diverging in the second block: only the first is shared.
  auto b = a;
  b[5] = 7;
  EXPECT_EQ(m.get_computed_prefix(3, b, ""), 4);
  // A different salt sees nothing.
  EXPECT_EQ(m.get_computed_prefix(4, a, "tenant-b"), 0);
  EXPECT_EQ(m.stats().prefix_hit_tokens, 12);
  EXPECT_EQ(m.stats().prefix_query_tokens, 48);
  EXPECT_TRUE(m.check_invariants().ok());
}

TEST(PagedKv, FreedCachedBlocksAreReusedThenEvictedInLruOrder) {
  PagedKvCacheManager m(config(4));
  auto a = iota_tokens(8, 0), b = iota_tokens(8, 50);
  prefill(m, 1, a);  // blocks 0, 1
  prefill(m, 2, b);  // blocks 2, 3
  m.free(1);
  m.free(2);
  // Each sequence's last block goes first: eviction order 1, 0, 3, 2.
  EXPECT_EQ(m.free_list(), (V{1, 0, 3, 2}));
  // Hit on a's first block: removed from the middle of the free list.
  EXPECT_EQ(m.get_computed_prefix(3, iota_tokens(5, 0), ""), 4);
  EXPECT_EQ(m.block_table(3)[0], 0);
  EXPECT_EQ(m.free_list(), (V{1, 3, 2}));
  // New blocks evict the least recently used: 1 (a's tail), then 3.
  EXPECT_EQ(m.get_computed_prefix(4, iota_tokens(8, 900), ""), 0);
  ASSERT_TRUE(m.append_slots(4, 8));
  EXPECT_EQ(V(m.block_table(4).begin(), m.block_table(4).end()), (V{1, 3}));
  EXPECT_FALSE(m.is_cached(1));
  EXPECT_EQ(m.stats().evictions, 2);
  // b's first block (2) is still cached; its second (3) is gone, so the hit stops at 4 tokens.
  auto b_longer = b;
  b_longer.push_back(999);
  EXPECT_EQ(m.get_computed_prefix(5, b_longer, ""), 4);
  EXPECT_TRUE(m.check_invariants().ok());
}

TEST(PagedKv, HashCollisionIsCaughtByTheTokenCheck) {
  PagedKvConfig c = config(8);
  c.hash_fn = [](uint64_t, std::span<const TokenId>, std::string_view) { return 42ull; };
  PagedKvCacheManager m(c);
  auto a = iota_tokens(9, 0), b = iota_tokens(9, 500);
  prefill(m, 1, a);  // block 0 cached under key 42; block 1 collides with a block in use
  EXPECT_EQ(m.get_computed_prefix(2, b, ""), 0);  // same key, other tokens: a miss
  EXPECT_EQ(m.get_computed_prefix(3, a, ""), 4);  // the real owner still hits, one block
  m.free(1);
  m.free(3);  // a's block is now free but still cached
  ASSERT_TRUE(m.append_slots(2, 9));
  m.mark_computed(2, b, 9);  // b's first block takes over key 42 from the free one
  EXPECT_TRUE(m.check_invariants().ok());
  EXPECT_EQ(m.get_computed_prefix(4, a, ""), 0);
  EXPECT_EQ(m.get_computed_prefix(5, b, ""), 4);
  EXPECT_EQ(m.block_table(5)[0], m.block_table(2)[0]);
  EXPECT_TRUE(m.check_invariants().ok());
}

TEST(PagedKv, ForkSharesAndCopiesTheLastBlockOnWrite) {
  PagedKvCacheManager m(config(8));
  auto p = iota_tokens(6, 0);  // blocks: [0..3] full, [4,5] partial
  prefill(m, 1, p);
  m.fork(1, 2);
  EXPECT_EQ(m.ref_count(m.block_table(1)[0]), 2);
  EXPECT_EQ(m.ref_count(m.block_table(1)[1]), 2);
  EXPECT_EQ(m.num_blocks_needed(2, 7), 1);  // the copy
  ASSERT_TRUE(m.append_slots(2, 7));
  auto copies = m.take_pending_copies();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, m.block_table(1)[1]);
  EXPECT_EQ(copies[0].dst, m.block_table(2)[1]);
  EXPECT_EQ(m.block_table(1)[0], m.block_table(2)[0]);  // the full block stays shared
  // The parent now owns its partial block alone: no copy.
  ASSERT_TRUE(m.append_slots(1, 7));
  EXPECT_TRUE(m.take_pending_copies().empty());
  EXPECT_EQ(m.stats().cow_copies, 1);
  EXPECT_TRUE(m.check_invariants().ok());
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.num_used_blocks(), 0);
}

TEST(PagedKv, SwapOutAndInKeepsSharingAndReturnsPairs) {
  PagedKvCacheManager m(config(6, 4, 6));
  auto p = iota_tokens(6, 0);
  prefill(m, 1, p);
  m.fork(1, 2);
  ASSERT_TRUE(m.append_slots(2, 7));  // 1: [b0, b1], 2: [b0, b2] after the copy
  m.take_pending_copies();
  V t1(m.block_table(1).begin(), m.block_table(1).end());
  V t2(m.block_table(2).begin(), m.block_table(2).end());
  std::vector<SeqId> group{1, 2};
  EXPECT_EQ(m.num_blocks_to_swap(group), 3);
  std::vector<KvCopy> out;
  ASSERT_TRUE(m.swap_out(group, &out));
  ASSERT_EQ(out.size(), 3u);  // the shared block moves once
  EXPECT_EQ(out[0].src, t1[0]);
  EXPECT_EQ(out[1].src, t1[1]);
  EXPECT_EQ(out[2].src, t2[1]);
  EXPECT_EQ(m.num_free_host_blocks(), 3);
  EXPECT_TRUE(m.is_swapped(1));
  EXPECT_EQ(m.block_table(1)[0], m.block_table(2)[0]);  // host ids, still shared
  EXPECT_EQ(m.block_table(1)[0], out[0].dst);
  EXPECT_TRUE(m.check_invariants().ok());
  std::vector<KvCopy> in;
  ASSERT_TRUE(m.can_swap_in(group));
  ASSERT_TRUE(m.swap_in(group, &in));
  ASSERT_EQ(in.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(in[i].src, out[i].dst);
  EXPECT_EQ(m.block_table(1)[0], m.block_table(2)[0]);
  EXPECT_EQ(m.block_table(1)[0], in[0].dst);
  EXPECT_EQ(m.num_free_host_blocks(), 6);
  EXPECT_TRUE(m.check_invariants().ok());
  // Too little host space: refused, nothing moves.
  PagedKvCacheManager small(config(6, 4, 1));
  prefill(small, 1, p);
  std::vector<KvCopy> none;
  std::vector<SeqId> one{1};
  EXPECT_FALSE(small.swap_out(one, &none));
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(small.is_swapped(1));
}

}  // namespace
}  // namespace folio
