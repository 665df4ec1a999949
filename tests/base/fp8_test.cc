// The host FP8 E4M3 codec (base/fp8.h) against a brute-force definition: decode each of the 256
// codes from the bit fields, and check that encoding picks the nearest finite code (ties to the
// even mantissa), saturates and keeps NaN.
#include "base/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace folio {
namespace {

TEST(Fp8E4m3, DecodesKnownCodes) {
  EXPECT_EQ(fp8_e4m3_to_float(0x00), 0.f);
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_float(0x80)));
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.f);       // 0.0111.000: 2^0
  EXPECT_EQ(fp8_e4m3_to_float(0x7E), 448.f);     // largest finite
  EXPECT_EQ(fp8_e4m3_to_float(0xFE), -448.f);
  EXPECT_EQ(fp8_e4m3_to_float(0x08), 0x1p-6f);   // smallest normal
  EXPECT_EQ(fp8_e4m3_to_float(0x01), 0x1p-9f);   // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_float(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(fp8_e4m3_to_float(0x3C), 1.5f);      // 0.0111.100
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xFF)));
}

TEST(Fp8E4m3, EveryFiniteCodeRoundTrips) {
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(v)) continue;
    ++finite;
    EXPECT_EQ(float_to_fp8_e4m3(v), c) << "code " << c << " value " << v;
  }
  EXPECT_EQ(finite, 254);
}

// The nearest finite code by search; ties go to the even code (an even mantissa), values past
// 448 saturate.
uint8_t nearest_code(float x) {
  if (std::fabs(x) >= 448.f) return std::signbit(x) ? 0xFE : 0x7E;
  uint8_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(v) || std::signbit(v) != std::signbit(x)) continue;
    const double err = std::fabs(static_cast<double>(v) - x);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best_err = err;
      best = static_cast<uint8_t>(c);
    }
  }
  return best;
}

TEST(Fp8E4m3, EncodesToTheNearestCode) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mag(-12.f, 9.5f);  // 2^-12 .. 2^9.5: every range
  for (int i = 0; i < 20000; ++i) {
    float x = std::exp2(mag(rng));
    if (rng() & 1) x = -x;
    ASSERT_EQ(float_to_fp8_e4m3(x), nearest_code(x)) << "x = " << x;
  }
}

TEST(Fp8E4m3, TiesGoToEvenMantissas) {
  // Midpoints between neighbouring codes, normal and subnormal.
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    const float hi = fp8_e4m3_to_float(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;  // exact in float
    const int want = (c & 1) == 0 ? c : c + 1;
    EXPECT_EQ(float_to_fp8_e4m3(mid), want) << "between " << lo << " and " << hi;
    EXPECT_EQ(float_to_fp8_e4m3(-mid), want | 0x80);
  }
}

TEST(Fp8E4m3, SaturatesAndKeepsNaN) {
  EXPECT_EQ(float_to_fp8_e4m3(449.f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(1e30f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(float_to_fp8_e4m3(std::nanf("")), 0x7F);
  EXPECT_EQ(float_to_fp8_e4m3(-std::nanf("")), 0x7F);  // as cvt.rn.satfinite.e4m3x2.f32
  EXPECT_EQ(float_to_fp8_e4m3(1e-30f), 0x00);
  EXPECT_EQ(float_to_fp8_e4m3(-1e-30f), 0x80);
  EXPECT_EQ(round_to_fp8_e4m3(0.3f), 0.3125f);  // 0.0101.010 = 1.25 * 2^-2
}

}  // namespace
}  // namespace folio
