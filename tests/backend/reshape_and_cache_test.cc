// cpu::reshape_and_cache, the reference of the CUDA kernel: rows land at their slots, negative
// slots are skipped, and with an fp8 cache every written value is round_to_fp8_e4m3 of the input
// (saturating at +-448) while untouched slots keep what they held.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "base/fp8.h"

namespace folio {
namespace {

constexpr int kTokens = 3, kWidth = 8, kSlots = 6;

struct Caches {
  std::vector<float> k = std::vector<float>(kSlots * kWidth, -7.f);
  std::vector<float> v = std::vector<float>(kSlots * kWidth, -7.f);
};

void fill(std::vector<float>& x, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 3.f);
  for (auto& e : x) e = d(rng);
}

TEST(ReshapeAndCache, Fp8StoresRoundedValuesAndSkipsPadding) {
  std::vector<float> k(kTokens * kWidth), v(kTokens * kWidth);
  fill(k, 1);
  fill(v, 2);
  k[3] = 1000.f;   // saturates to 448
  v[5] = -1e-4f;   // subnormal range
  const std::vector<int64_t> slots = {4, -1, 1};
  Caches a, f;
  cpu::reshape_and_cache(k.data(), v.data(), slots.data(), kTokens, kWidth, a.k.data(), a.v.data());
  cpu::reshape_and_cache(k.data(), v.data(), slots.data(), kTokens, kWidth, f.k.data(), f.v.data(),
                         KvCacheDtype::kFp8E4m3);
  int rounded = 0;
  for (int t = 0; t < kTokens; ++t) {
    const int64_t s = slots[t];
    if (s < 0) continue;
    for (int i = 0; i < kWidth; ++i) {
      const float kin = k[t * kWidth + i], vin = v[t * kWidth + i];
      EXPECT_EQ(a.k[s * kWidth + i], kin);
      EXPECT_EQ(a.v[s * kWidth + i], vin);
      EXPECT_EQ(f.k[s * kWidth + i], round_to_fp8_e4m3(kin));
      EXPECT_EQ(f.v[s * kWidth + i], round_to_fp8_e4m3(vin));
      rounded += f.k[s * kWidth + i] != kin;
    }
  }
  EXPECT_GT(rounded, kWidth);  // normal(0, 3) samples are almost never e4m3 values already
  EXPECT_EQ(f.k[4 * kWidth + 3], 448.f);
  EXPECT_EQ(f.v[4 * kWidth + 5], round_to_fp8_e4m3(-1e-4f));
  for (int s : {0, 2, 3, 5})  // not written (slot -1 included): untouched
    for (int i = 0; i < kWidth; ++i) {
      EXPECT_EQ(f.k[s * kWidth + i], -7.f);
      EXPECT_EQ(f.v[s * kWidth + i], -7.f);
    }
}

}  // namespace
}  // namespace folio
