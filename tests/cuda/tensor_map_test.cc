// The host side of the TMA tensor maps over the paged K/V cache (tensor_map.h): bad geometry is
// refused before the driver is asked (so these run without a GPU), good geometry encodes, and the
// cache hands back the same descriptor for the same cache and geometry.
#include "backend/cuda/tensor_map.h"

#include <gtest/gtest.h>

#include <cstring>

#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

TEST(TensorMapTest, RejectsGeometryTheBoxCannotDescribe) {
  alignas(64) CUtensorMap map;
  alignas(16) static unsigned char cache[4096];
  // head_dim not a multiple of the 64-column box; no heads; boxes of 0 and 257 slots.
  EXPECT_EQ(encode_paged_cache_map(&map, DType::kBF16, cache, 8, 80, 16).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(encode_paged_cache_map(&map, DType::kBF16, cache, 0, 128, 16).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(encode_paged_cache_map(&map, DType::kBF16, cache, 8, 128, 0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(encode_paged_cache_map(&map, DType::kFP16, cache, 8, 128, 257).code(),
            StatusCode::kInvalidArgument);
  // TMA needs a 16-byte-aligned global address.
  EXPECT_EQ(encode_paged_cache_map(&map, DType::kBF16, cache + 8, 8, 128, 16).code(),
            StatusCode::kInvalidArgument);
}

TEST(TensorMapTest, EncodesAndCachesPerCacheAndGeometry) {
  FOLIO_REQUIRE_GPU();
  auto cache = DeviceBuffer::allocate(size_t{64} * 16 * 8 * 128 * 2);  // 64 pages of 16 slots
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  alignas(64) CUtensorMap a, b, c;
  FOLIO_ASSERT_OK(cached_paged_cache_map(&a, DType::kBF16, cache->data(), 8, 128, 16));
  FOLIO_ASSERT_OK(cached_paged_cache_map(&b, DType::kBF16, cache->data(), 8, 128, 16));
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  FOLIO_ASSERT_OK(cached_paged_cache_map(&c, DType::kBF16, cache->data(), 8, 128, 1));
  EXPECT_NE(std::memcmp(&a, &c, sizeof a), 0);  // another box: another descriptor
  FOLIO_ASSERT_OK(encode_paged_cache_map(&b, DType::kBF16, cache->data(), 8, 128, 16));
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);  // the cached one is what encoding gives
}

TEST(TensorMapTest, RowsMapsAreCachedPerArrayAndBox) {
  FOLIO_REQUIRE_GPU();
  auto rows = DeviceBuffer::allocate(size_t{256} * 4096 * 2);  // [256, 4096] bf16
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  alignas(64) CUtensorMap a, b, c;
  FOLIO_ASSERT_OK(cached_rows_map(&a, DType::kBF16, rows->data(), 256, 1, 4096, 1, 128));
  FOLIO_ASSERT_OK(cached_rows_map(&b, DType::kBF16, rows->data(), 256, 1, 4096, 1, 128));
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  FOLIO_ASSERT_OK(cached_rows_map(&c, DType::kBF16, rows->data(), 256, 1, 4096, 1, 64));
  EXPECT_NE(std::memcmp(&a, &c, sizeof a), 0);  // another box: another descriptor
  FOLIO_ASSERT_OK(encode_rows_map(&b, DType::kBF16, rows->data(), 256, 1, 4096, 1, 128));
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);  // the cached one is what encoding gives
  EXPECT_EQ(cached_rows_map(&c, DType::kBF16, rows->data(), 256, 1, 4096, 1, 300).code(),
            StatusCode::kInvalidArgument);  // errors are not cached as maps
}

}  // namespace
}  // namespace folio::cuda
