#include "base/stage_totals.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace folio {
namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

void StageTotals::add_step(const std::vector<std::pair<std::string, double>>& ops) {
  double step = 0;
  for (const auto& [stage, ms] : ops) {
    auto& series = per_step_[stage];
    series.resize(static_cast<size_t>(steps_) + 1, 0.0);  // zeros for the steps it missed
    series.back() += ms;
    step += ms;
  }
  ++steps_;
  for (auto& [stage, series] : per_step_) series.resize(static_cast<size_t>(steps_), 0.0);
  step_ms_.push_back(step);
}

double StageTotals::mean_ms(const std::string& stage) const {
  const auto it = per_step_.find(stage);
  return it == per_step_.end() ? 0 : mean_of(it->second);
}

double StageTotals::median_ms(const std::string& stage) const {
  const auto it = per_step_.find(stage);
  return it == per_step_.end() ? 0 : median_of(it->second);
}

double StageTotals::first_ms(const std::string& stage) const {
  const auto it = per_step_.find(stage);
  return it == per_step_.end() || it->second.empty() ? 0 : it->second.front();
}

double StageTotals::mean_step_ms() const {
  return mean_of(step_ms_);
}

double StageTotals::median_step_ms() const {
  return median_of(step_ms_);
}

std::string StageTotals::report() const {
  const double mean_step = mean_step_ms();
  char line[200];
  std::snprintf(line, sizeof line,
                "GPU stage times over %d steps (%.3f ms per step; median step %.3f, first %.3f: "
                "one-time costs land in the first):",
                steps_, mean_step, median_step_ms(), step_ms_.empty() ? 0.0 : step_ms_.front());
  std::string out = line;
  std::snprintf(line, sizeof line, "\n  %-18s %10s %7s %10s %10s", "stage", "ms/step", "share",
                "median", "first");
  out += line;
  for (const auto& [stage, series] : per_step_) {
    const double mean = mean_of(series);
    std::snprintf(line, sizeof line, "\n  %-18s %10.3f %6.1f%% %10.3f %10.3f", stage.c_str(), mean,
                  mean_step > 0 ? 100.0 * mean / mean_step : 0.0, median_of(series),
                  series.front());
    out += line;
  }
  return out;
}

}  // namespace folio
