// PagedKvCacheManager with a sliding window: the blocks below a sequence's window go back to the
// pool (and stay in the prefix cache), their table entries read the reserved kNullBlock, and
// forks, swaps and frees touch only the blocks still held.
#include <gtest/gtest.h>

#include <numeric>

#include "kv/paged_kv_cache_manager.h"

namespace folio {
namespace {

constexpr int32_t kNull = KvCacheManager::kNullBlock;

std::vector<TokenId> iota_tokens(int n, TokenId first) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

PagedKvConfig windowed(int num_blocks, int window, int host = 0) {
  PagedKvConfig c;
  c.num_blocks = num_blocks;
  c.block_size = 4;
  c.num_host_blocks = host;
  c.sliding_window = window;
  return c;
}

// Registers `seq`, reserves and "computes" `tokens`.
void prefill(PagedKvCacheManager& m, SeqId seq, const std::vector<TokenId>& tokens) {
  m.get_computed_prefix(seq, tokens, "");
  ASSERT_TRUE(m.append_slots(seq, static_cast<int>(tokens.size())));
  m.mark_computed(seq, tokens, static_cast<int>(tokens.size()));
}

TEST(PagedKvWindow, TheNullBlockIsReservedAndNotCounted) {
  PagedKvCacheManager m(windowed(8, 6));
  EXPECT_EQ(m.num_total_blocks(), 7);
  EXPECT_EQ(m.num_free_blocks(), 7);
  EXPECT_EQ(m.num_used_blocks(), 0);
  prefill(m, 1, iota_tokens(28, 0));  // 7 blocks: the whole pool but the null block
  for (int32_t b : m.block_table(1)) EXPECT_NE(b, kNull);
  EXPECT_EQ(m.num_free_blocks(), 0);
  EXPECT_TRUE(m.check_invariants().ok()) << m.check_invariants().to_string();
  PagedKvConfig none = windowed(8, 0);
  EXPECT_EQ(PagedKvCacheManager(none).num_total_blocks(), 8);
}

TEST(PagedKvWindow, BlocksWhollyBelowTheNextQuerysWindowAreFreed) {
  PagedKvCacheManager m(windowed(16, 6));
  prefill(m, 1, iota_tokens(10, 0));  // blocks for positions 0-3, 4-7, 8-9
  const std::vector<int32_t> before(m.block_table(1).begin(), m.block_table(1).end());
  // The next query (position 10) reads keys 5..10: block 0 (0-3) is below, block 1 (4-7) not.
  m.free_out_of_window(1, 10);
  EXPECT_EQ(std::vector<int32_t>(m.block_table(1).begin(), m.block_table(1).end()),
            (std::vector<int32_t>{kNull, before[1], before[2]}));
  EXPECT_EQ(m.num_held_blocks(1), 2);
  EXPECT_EQ(m.num_used_blocks(), 2);
  EXPECT_EQ(m.num_filled_slots(), 6);
  m.free_out_of_window(1, 10);  // idempotent
  m.free_out_of_window(1, 4);   // never takes a freed block back
  EXPECT_EQ(m.num_held_blocks(1), 2);
  // Position 13's query reads 8..13: block 1 goes too.
  ASSERT_TRUE(m.append_slots(1, 14));
  m.free_out_of_window(1, 13);
  EXPECT_EQ(m.block_table(1)[1], kNull);
  EXPECT_EQ(m.num_held_blocks(1), 2);
  EXPECT_TRUE(m.check_invariants().ok()) << m.check_invariants().to_string();
  m.free(1);
  EXPECT_EQ(m.num_used_blocks(), 0);
  EXPECT_EQ(m.num_free_blocks(), 15);
  EXPECT_TRUE(m.check_invariants().ok()) << m.check_invariants().to_string();
}

TEST(PagedKvWindow, AFreedFullBlockStaysInThePrefixCache) {
  PagedKvCacheManager m(windowed(16, 4));
  const auto tokens = iota_tokens(12, 100);
  prefill(m, 1, tokens);
  m.free_out_of_window(1, 12);  // keys 9..12: blocks 0 and 1 go
  EXPECT_EQ(m.num_held_blocks(1), 1);
  // Another request with the same 12 tokens finds blocks 0 and 1 cached (free, evictable).
  EXPECT_EQ(m.get_computed_prefix(2, tokens, ""), 8);
  EXPECT_EQ(m.num_held_blocks(2), 2);
  EXPECT_TRUE(m.check_invariants().ok()) << m.check_invariants().to_string();
}

TEST(PagedKvWindow, ABlockFreedBeforeItIsCachedEndsTheChain) {
  PagedKvCacheManager m(windowed(16, 2));
  const auto tokens = iota_tokens(12, 100);
  m.get_computed_prefix(1, tokens, "");
  ASSERT_TRUE(m.append_slots(1, 12));
  m.free_out_of_window(1, 12);  // before mark_computed (async scheduling's placeholder case)
  m.mark_computed(1, tokens, 12);
  EXPECT_EQ(m.get_computed_prefix(2, tokens, ""), 0);  // the null block was never cached
  EXPECT_TRUE(m.check_invariants().ok()) << m.check_invariants().to_string();
}

TEST(PagedKvWindow, ForksSwapsAndFreesTouchOnlyHeldBlocks) {
  PagedKvCacheManager m(windowed(16, 5, /*host=*/8));
  prefill(m, 1, iota_tokens(14, 0));  // 4 blocks
  m.free_out_of_window(1, 14);        // keys 10..14: blocks 0 and 1 go
  m.fork(1, 2);
  EXPECT_EQ(m.num_held_blocks(2), 2);
  EXPECT_EQ(m.ref_count(m.block_table(1)[2]), 2);
  const std::vector<SeqId> both{1, 2};
  EXPECT_EQ(m.num_blocks_to_swap(both), 2);
  std::vector<KvCopy> out, in;
  ASSERT_TRUE(m.swap_out(both, &out));
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(m.block_table(1)[0], kNull);
  EXPECT_EQ(m.num_used_blocks(), 0);
  EXPECT_EQ(m.num_free_host_blocks(), 6);
  m.free_out_of_window(2, 16);  // on the host: keys 12..16, block 2 (8-11) goes for seq 2
  EXPECT_EQ(m.num_held_blocks(2), 1);
  EXPECT_EQ(m.num_free_host_blocks(), 6);  // seq 1 still holds it
  ASSERT_TRUE(m.swap_in(both, &in));
  EXPECT_EQ(in.size(), 2u);
  EXPECT_EQ(m.num_used_blocks(), 2);
  EXPECT_TRUE(m.check_invariants().ok()) << m.check_invariants().to_string();
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.num_used_blocks(), 0);
  EXPECT_EQ(m.num_free_host_blocks(), 8);
  EXPECT_TRUE(m.check_invariants().ok()) << m.check_invariants().to_string();
}

TEST(PagedKvWindow, NoWindowNoFreeing) {
  PagedKvCacheManager m(windowed(16, 0));
  prefill(m, 1, iota_tokens(14, 0));
  m.free_out_of_window(1, 14);
  EXPECT_EQ(m.num_held_blocks(1), 4);
  for (int32_t b : m.block_table(1)) EXPECT_GE(b, 0);
  EXPECT_TRUE(m.check_invariants().ok());
}

}  // namespace
}  // namespace folio
