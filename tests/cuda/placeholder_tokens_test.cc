// The GPU's placeholder resolution (backend/cuda/placeholder_tokens.h) against the host
// reference (resolve_placeholders in backend/forward_batch.h): every id, placeholders and real
// tokens mixed, more tokens than one block.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/cuda/device_memory.h"
#include "backend/cuda/placeholder_tokens.h"
#include "backend/forward_batch.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

TEST(PlaceholderTokens, ResolvedLikeTheHostReference) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(3);
  for (int n : {1, 7, 256, 1000}) {
    const int num_samples = 1 + n / 3;
    std::vector<SampleOut> samples(static_cast<size_t>(num_samples));
    std::vector<int32_t> sampled;
    for (auto& s : samples) {
      s = SampleOut{static_cast<int32_t>(rng() % 128000), 1, -0.5f, 0};
      sampled.push_back(s.token_id);
    }
    std::vector<int32_t> ids(static_cast<size_t>(n));
    int placeholders = 0;
    for (auto& id : ids) {
      if (placeholders == 0 || rng() % 2) {
        id = placeholder_token(static_cast<int>(rng() % num_samples));
        ++placeholders;
      } else {
        id = static_cast<int32_t>(rng() % 128000);
      }
    }
    ASSERT_GT(placeholders, 0);
    std::vector<int32_t> want = ids;
    ASSERT_TRUE(resolve_placeholders(want, sampled));
    auto d_ids = DeviceBuffer::allocate(ids.size() * 4);
    auto d_samples = DeviceBuffer::allocate(samples.size() * sizeof(SampleOut));
    ASSERT_TRUE(d_ids.ok() && d_samples.ok());
    FOLIO_ASSERT_OK(copy(d_ids->data(), ids.data(), ids.size() * 4));
    FOLIO_ASSERT_OK(copy(d_samples->data(), samples.data(), samples.size() * sizeof(SampleOut)));
    FOLIO_ASSERT_OK(resolve_placeholder_tokens(d_ids->as<int32_t>(), n,
                                               d_samples->as<SampleOut>(), num_samples, nullptr));
    std::vector<int32_t> got(ids.size());
    FOLIO_ASSERT_OK(copy(got.data(), d_ids->data(), got.size() * 4));
    EXPECT_EQ(got, want) << "n " << n;
  }
}

}  // namespace
}  // namespace folio::cuda
