#include "kv/block_pool.h"

#include <gtest/gtest.h>

namespace folio {
namespace {

using V = std::vector<int32_t>;

TEST(BlockPool, AllocatesInOrderAndRefCounts) {
  BlockPool pool(4);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  pool.incref(1);
  EXPECT_EQ(pool.ref_count(1), 2);
  EXPECT_FALSE(pool.decref(1, true));
  EXPECT_TRUE(pool.decref(1, true));
  EXPECT_EQ(pool.free_list(), (V{2, 3, 1}));  // kept blocks go to the tail
  EXPECT_TRUE(pool.check().ok());
}

TEST(BlockPool, UncachedBlocksAreReusedFirstAndHitsLeaveTheMiddle) {
  BlockPool pool(5);
  for (int i = 0; i < 5; ++i) pool.allocate();
  pool.decref(0, true);
  pool.decref(1, true);
  pool.decref(2, true);
  pool.decref(3, false);  // holds nothing: head
  EXPECT_EQ(pool.free_list(), (V{3, 0, 1, 2}));
  pool.incref(1);  // a cache hit in the middle of the list
  EXPECT_EQ(pool.free_list(), (V{3, 0, 2}));
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(pool.allocate(), 3);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_TRUE(pool.check().ok());
}

}  // namespace
}  // namespace folio
