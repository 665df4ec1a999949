#include "tools/bench_arrivals.h"

#include <cmath>

#include "tools/bench_rng.h"

namespace folio::tools {

std::vector<double> poisson_arrival_times(int n, double rate, uint64_t seed) {
  std::vector<double> times(static_cast<size_t>(n > 0 ? n : 0), 0.0);
  if (!std::isfinite(rate) || rate <= 0.0) return times;
  SplitMix64 rng(seed);
  double t = 0.0;
  for (size_t i = 1; i < times.size(); ++i) {
    // Inverse CDF of Exp(rate); 1 - u lies in (0, 1], so the log is finite.
    t += -std::log(1.0 - rng.uniform01()) / rate;
    times[i] = t;
  }
  return times;
}

}  // namespace folio::tools
