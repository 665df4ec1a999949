// The sharding arithmetic of tensor parallelism: slices cover each dimension exactly once,
// query heads keep attending to the KV head they attend to in the whole model (also when KV
// heads are replicated), the vocabulary is padded to a multiple of the ranks, and models that
// cannot be split give clear errors.
#include "dist/tp_shard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace folio {
namespace {

std::vector<TpShard> shards(int heads, int kv, int inter, int vocab, int world) {
  std::vector<TpShard> out;
  for (int r = 0; r < world; ++r) {
    auto s = make_tp_shard(heads, kv, inter, vocab, r, world);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) out.push_back(*s);
  }
  return out;
}

TEST(TpShard, Llama3_8BOverTwoRanks) {
  auto s = shards(32, 8, 14336, 128256, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].head_start, 16);
  EXPECT_EQ(s[1].local_heads, 16);
  EXPECT_EQ(s[1].kv_head_start, 4);
  EXPECT_EQ(s[1].local_kv_heads, 4);
  EXPECT_FALSE(s[1].kv_replicated);
  EXPECT_EQ(s[1].inter_start, 7168);
  EXPECT_EQ(s[1].local_inter, 7168);
  EXPECT_EQ(s[1].local_vocab, 64128);
  EXPECT_EQ(s[1].vocab_start, 64128);
  EXPECT_EQ(s[1].padded_vocab, 128256);
  EXPECT_EQ(s[1].valid_vocab_rows(), 64128);
}

TEST(TpShard, Llama3_70BOverFourRanks) {
  auto s = shards(64, 8, 28672, 128256, 4);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[3].head_start, 48);
  EXPECT_EQ(s[3].kv_head_start, 6);
  EXPECT_EQ(s[3].local_kv_heads, 2);
  EXPECT_EQ(s[3].local_inter, 7168);
  EXPECT_EQ(s[3].local_vocab, 32064);
}

TEST(TpShard, FewerKvHeadsThanRanksAreReplicated) {
  auto one = shards(4, 1, 1024, 1000, 4);  // MQA: every rank holds kv head 0
  for (const TpShard& s : one) {
    EXPECT_TRUE(s.kv_replicated);
    EXPECT_EQ(s.local_kv_heads, 1);
    EXPECT_EQ(s.kv_head_start, 0);
  }
  auto two = shards(8, 2, 1024, 1000, 4);  // ranks 0, 1 -> kv head 0; ranks 2, 3 -> kv head 1
  ASSERT_EQ(two.size(), 4u);
  EXPECT_EQ(two[0].kv_head_start, 0);
  EXPECT_EQ(two[1].kv_head_start, 0);
  EXPECT_EQ(two[2].kv_head_start, 1);
  EXPECT_EQ(two[3].kv_head_start, 1);
}

// For every rank and every query head it holds: the KV head the whole model pairs it with is the
// one the rank's local grouping (local head / (local_heads / local_kv_heads)) gives.
TEST(TpShard, RandomizedQueryHeadsKeepTheirKvHead) {
  std::mt19937 rng(5);
  int checked = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int world = 1 << (rng() % 4);  // 1, 2, 4, 8
    const int kv = 1 << (rng() % 5);     // 1..16
    const int group = 1 + static_cast<int>(rng() % 8);
    const int heads = kv * group;
    if (!check_tp_divisibility(heads, kv, 64 * world, world).ok()) continue;
    const int vocab = 1 + static_cast<int>(rng() % 5000);
    auto s = shards(heads, kv, 64 * world, vocab, world);
    ASSERT_EQ(static_cast<int>(s.size()), world);
    int covered_heads = 0, covered_vocab = 0;
    for (const TpShard& t : s) {
      ASSERT_EQ(t.local_heads % t.local_kv_heads, 0);
      const int local_group = t.local_heads / t.local_kv_heads;
      for (int j = 0; j < t.local_heads; ++j) {
        const int global_kv = (t.head_start + j) / group;
        EXPECT_EQ(t.kv_head_start + j / local_group, global_kv)
            << "heads " << heads << " kv " << kv << " world " << world << " rank " << t.rank;
        ++checked;
      }
      EXPECT_EQ(t.head_start, covered_heads);
      covered_heads += t.local_heads;
      EXPECT_EQ(t.vocab_start, t.rank * t.local_vocab);
      EXPECT_EQ(std::min(t.vocab_start, vocab), covered_vocab);  // slices past the end: padding
      covered_vocab += t.valid_vocab_rows();
      EXPECT_EQ(t.padded_vocab % world, 0);
      EXPECT_LT(t.padded_vocab - vocab, world);
    }
    EXPECT_EQ(covered_heads, heads);
    EXPECT_EQ(covered_vocab, vocab);
  }
  EXPECT_GT(checked, 1000);
}

TEST(TpShard, VocabularyPaddingIsZeroRowsAtTheEnd) {
  auto v = shards(6, 3, 513, 1000, 3);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].local_vocab, 334);
  EXPECT_EQ(v[2].padded_vocab, 1002);
  EXPECT_EQ(v[2].vocab_start, 668);
  EXPECT_EQ(v[2].valid_vocab_rows(), 332);
  auto tiny = shards(8, 8, 64, 3, 8);  // more ranks than tokens: some slices are all padding
  ASSERT_EQ(tiny.size(), 8u);
  EXPECT_EQ(tiny[2].valid_vocab_rows(), 1);
  EXPECT_EQ(tiny[3].valid_vocab_rows(), 0);
}

TEST(TpShard, ModelsThatCannotBeSplitGiveClearErrors) {
  auto heads = make_tp_shard(6, 2, 1024, 1000, 0, 4);
  ASSERT_FALSE(heads.ok());
  EXPECT_NE(heads.status().message().find("6 attention heads"), std::string::npos)
      << heads.status().message();
  auto kv = make_tp_shard(12, 3, 1024, 1000, 0, 2);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("3 KV heads"), std::string::npos) << kv.status().message();
  auto inter = make_tp_shard(8, 8, 1001, 1000, 0, 2);
  ASSERT_FALSE(inter.ok());
  EXPECT_NE(inter.status().message().find("intermediate_size 1001"), std::string::npos);
  EXPECT_FALSE(make_tp_shard(8, 8, 1024, 1000, 2, 2).ok());  // rank outside the group
  EXPECT_FALSE(make_tp_shard(8, 8, 1024, 1000, 0, 0).ok());
  auto one = make_tp_shard(8, 8, 1024, 1000, 0, 1);  // world 1: the whole model
  ASSERT_TRUE(one.ok());
  const TpShard whole = whole_model_shard(8, 8, 1024, 1000);
  EXPECT_EQ(one->local_heads, whole.local_heads);
  EXPECT_EQ(one->local_kv_heads, whole.local_kv_heads);
  EXPECT_EQ(one->local_inter, whole.local_inter);
  EXPECT_EQ(one->local_vocab, whole.local_vocab);
  EXPECT_EQ(one->padded_vocab, 1000);
  EXPECT_FALSE(one->kv_replicated);
}

}  // namespace
}  // namespace folio
