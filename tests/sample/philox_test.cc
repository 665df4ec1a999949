// Philox4x32-10 against Random123's known-answer vectors, the uniform mapping's range, and the
// stream-key derivation (stable values, so a platform or refactor change that alters draws fails).
#include "base/philox.h"

#include <cmath>

#include <gtest/gtest.h>

#include "sample/rng_stream.h"

namespace folio {
namespace {

TEST(Philox, Random123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, UniformIsOpenAndExact) {
  EXPECT_EQ(uniform_open01(0u), 0x1p-24f);
  EXPECT_EQ(uniform_open01(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_LT(uniform_open01(0xffffffffu), 1.0f);
  EXPECT_EQ(uniform_open01(0x80000000u), 0.5f + 0x1p-24f);
  EXPECT_GT(-std::log(uniform_open01(0xffffffffu)), 0.0f);  // E is never 0
}

TEST(RngStream, KeysAreStableAndSeparated) {
  // FNV-1a published values.
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  // SplitMix64 of 0 (first output of the reference generator seeded with 0).
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  const RngStream a = RngStream::seeded(42, 0);
  EXPECT_EQ(a.key, 42u);
  EXPECT_NE(a.bits(0, 0), RngStream::seeded(42, 1).bits(0, 0));
  EXPECT_NE(a.bits(0, 0), a.bits(1, 0));
  EXPECT_NE(a.bits(0, 0), a.bits(0, 1));
  const RngStream u = RngStream::unseeded(42 ^ fnv1a64("r"), "r", 0);  // key collides with 42...
  EXPECT_EQ(u.key, splitmix64(42));
  EXPECT_NE(RngStream::unseeded(7, "req-1", 0).key, RngStream::unseeded(7, "req-2", 0).key);
  // ...and a seeded stream with the same key still differs through the tag.
  const RngStream s = RngStream::seeded(u.key, 0);
  EXPECT_NE(s.bits(3, 5), u.bits(3, 5));
}

TEST(RngStream, FourAtOnceMatchesOneAtATime) {
  const RngStream s = RngStream::seeded(123, 2);
  const PhiloxCounter four = s.bits4(9, 5);
  for (uint32_t lane = 0; lane < 4; ++lane) {
    EXPECT_EQ(four[lane], s.bits(9, 20 + lane));
    EXPECT_EQ(-std::log(uniform_open01(four[lane])), s.exponential(9, 20 + lane));
  }
}

}  // namespace
}  // namespace folio
