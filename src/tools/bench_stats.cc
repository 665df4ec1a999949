#include "tools/bench_stats.h"

#include <algorithm>
#include <cmath>

namespace folio::tools {

double percentile_sorted(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0.0;
  p = std::clamp(p, 0.0, 100.0);
  // numpy "linear": rank = p/100 * (n-1), interpolate between floor and ceil.
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

double percentile(std::span<const double> values, double p) {
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  return percentile_sorted(sorted, p);
}

double mean(std::span<const double> values) {
  if (values.empty()) return 0.0;
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double stddev(std::span<const double> values) {
  if (values.size() < 2) return 0.0;
  const double m = mean(values);
  double sq = 0.0;
  for (double v : values) sq += (v - m) * (v - m);
  return std::sqrt(sq / static_cast<double>(values.size()));
}

Summary summarize(std::span<const double> values) {
  Summary s;
  if (values.empty()) return s;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  s.count = static_cast<int>(sorted.size());
  s.mean = mean(sorted);
  s.median = percentile_sorted(sorted, 50);
  s.p90 = percentile_sorted(sorted, 90);
  s.p99 = percentile_sorted(sorted, 99);
  s.min = sorted.front();
  s.max = sorted.back();
  s.std_dev = stddev(sorted);
  return s;
}

void add_summary_json(nlohmann::json& out, const std::string& name, const Summary& s,
                      double scale) {
  out["mean_" + name] = s.mean * scale;
  out["median_" + name] = s.median * scale;
  out["p90_" + name] = s.p90 * scale;
  out["p99_" + name] = s.p99 * scale;
  out["std_" + name] = s.std_dev * scale;
}

}  // namespace folio::tools
