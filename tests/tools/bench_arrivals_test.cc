// The Poisson arrival generator: exponential gaps with mean 1/rate, seeded, zero for inf.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "tools/bench_arrivals.h"

namespace folio::tools {
namespace {

TEST(BenchArrivals, GapsAreExponentialWithMeanOneOverRate) {
  const int n = 20001;
  const double rate = 50.0;
  auto t = poisson_arrival_times(n, rate, 7);
  ASSERT_EQ(t.size(), static_cast<size_t>(n));
  EXPECT_EQ(t[0], 0.0);
  double sum = 0, sq = 0;
  int below_mean = 0;
  for (int i = 1; i < n; ++i) {
    const double gap = t[i] - t[i - 1];
    ASSERT_GE(gap, 0.0);
    sum += gap;
    sq += gap * gap;
    if (gap < 1.0 / rate) ++below_mean;
  }
  const double m = sum / (n - 1);
  const double sd = std::sqrt(sq / (n - 1) - m * m);
  // 20000 samples: the mean's standard error is 0.7% of the mean; allow 3%.
  EXPECT_NEAR(m, 1.0 / rate, 0.03 / rate);
  EXPECT_NEAR(sd / m, 1.0, 0.05);                                 // exponential: CV = 1
  EXPECT_NEAR(below_mean / double(n - 1), 1.0 - std::exp(-1.0), 0.02);  // P(X < mean)
}

TEST(BenchArrivals, SeededAndRepeatable) {
  EXPECT_EQ(poisson_arrival_times(100, 3.0, 1), poisson_arrival_times(100, 3.0, 1));
  EXPECT_NE(poisson_arrival_times(100, 3.0, 1), poisson_arrival_times(100, 3.0, 2));
  // Doubling the rate halves every time for the same seed (same uniform draws).
  auto a = poisson_arrival_times(50, 2.0, 9), b = poisson_arrival_times(50, 4.0, 9);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i] / 2, 1e-12);
}

TEST(BenchArrivals, InfiniteRateSendsEverythingAtOnce) {
  auto t = poisson_arrival_times(10, std::numeric_limits<double>::infinity(), 3);
  ASSERT_EQ(t.size(), 10u);
  for (double x : t) EXPECT_EQ(x, 0.0);
  EXPECT_TRUE(poisson_arrival_times(0, 5.0, 3).empty());
}

}  // namespace
}  // namespace folio::tools
