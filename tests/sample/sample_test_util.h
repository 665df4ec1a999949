// Helpers shared by the sampler tests: deterministic logits and float64 references.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace folio::testing {

// Deterministic pseudo-random logits in [-scale, scale): std::mt19937's raw output is specified
// by the standard, and the mapping to floats is ours, so the values are the same everywhere.
inline std::vector<float> random_logits(size_t n, uint32_t seed, float scale = 5.0f) {
  std::mt19937 gen(seed);
  std::vector<float> out(n);
  for (float& x : out) x = (static_cast<float>(gen() >> 8) * 0x1p-24f * 2.0f - 1.0f) * scale;
  return out;
}

// log-softmax in float64.
inline std::vector<double> log_softmax64(const std::vector<float>& row) {
  double m = -INFINITY;
  for (float x : row) m = std::max(m, static_cast<double>(x));
  double s = 0.0;
  for (float x : row) s += std::exp(static_cast<double>(x) - m);
  std::vector<double> out(row.size());
  for (size_t i = 0; i < row.size(); ++i) out[i] = static_cast<double>(row[i]) - m - std::log(s);
  return out;
}

// Upper critical value of chi-square with `df` degrees of freedom at p = 1e-4
// (Wilson-Hilferty approximation, accurate to a few percent for df >= 2).
inline double chi2_critical_1e4(int df) {
  const double z = 3.719;  // standard normal quantile at 1 - 1e-4
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Pearson's statistic of `counts` against probabilities `p` (entries with p == 0 must have
// count 0; they are skipped). Returns the statistic; `df` gets (#p > 0) - 1.
inline double chi2_statistic(const std::vector<int>& counts, const std::vector<double>& p,
                             int total, int* df) {
  double stat = 0.0;
  int cells = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0.0) continue;
    const double expect = p[i] * total;
    stat += (counts[i] - expect) * (counts[i] - expect) / expect;
    ++cells;
  }
  *df = cells - 1;
  return stat;
}

}  // namespace folio::testing
