// FastDivmod (src/backend/cuda/fast_divmod.h, the GPU kernels' division by launch constants)
// against the / operator: every small divisor over a sweep of numerators, and the edges.
#include "backend/cuda/fast_divmod.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace folio::cuda {
namespace {

void expect_exact(int32_t d, int32_t n) {
  const FastDivmod f(d);
  ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
  ASSERT_EQ(f.mod(n), n % d) << n << " % " << d;
}

TEST(FastDivmod, MatchesDivisionForSmallDivisorsOverASweep) {
  for (int32_t d = 1; d <= 4096; ++d) {
    for (int32_t n = 0; n < 20000; n += 7) expect_exact(d, n);
    for (int32_t n = 0x7fffffff; n > 0x7fffffff - 2000; n -= 3) expect_exact(d, n);
  }
}

TEST(FastDivmod, MatchesDivisionAtTheEdges) {
  const std::vector<int32_t> divisors = {1,          2,          3,          5,
                                         7,          640,        1000003,    65535,
                                         65536,      65537,      0x3fffffff, 0x40000000,
                                         0x40000001, 0x7ffffffe, 0x7fffffff};
  for (int32_t d : divisors)
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{d} - 1, int64_t{d}, int64_t{d} + 1,
                      2 * int64_t{d} - 1, int64_t{0x7ffffffe}, int64_t{0x7fffffff}}) {
      if (n > 0x7fffffff) continue;
      expect_exact(d, static_cast<int32_t>(n));
    }
}

TEST(FastDivmod, PowersOfTwoAreShifts) {
  for (int s = 0; s < 31; ++s) {
    const FastDivmod f(int32_t{1} << s);
    EXPECT_EQ(f.shift, static_cast<uint32_t>(s));
    EXPECT_EQ(f.div(0x7fffffff), 0x7fffffff >> s);
  }
}

}  // namespace
}  // namespace folio::cuda
