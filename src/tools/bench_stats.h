// Summary statistics for benchmark samples: mean, median, percentiles, as vLLM's benchmarks and
// numpy report them. Percentiles interpolate linearly between closest ranks (numpy's default
// "linear" method), so p50 of {1, 2, 3, 4} is 2.5 and p99 of 100 samples lies between the two
// largest. An empty sample set summarizes to all zeros with count 0.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace folio::tools {

// p in [0, 100]; `sorted` ascending and non-empty.
double percentile_sorted(std::span<const double> sorted, double p);
// Copies and sorts; 0 for an empty span.
double percentile(std::span<const double> values, double p);
double mean(std::span<const double> values);
// Population standard deviation (numpy's std default); 0 for fewer than 2 values.
double stddev(std::span<const double> values);

struct Summary {
  int count = 0;
  double mean = 0, median = 0, p90 = 0, p99 = 0, min = 0, max = 0, std_dev = 0;
};

Summary summarize(std::span<const double> values);

// Adds mean_<name>, median_<name>, p90_<name>, p99_<name>, std_<name> (vLLM's key names, e.g.
// name = "ttft_ms") to `out`, each value multiplied by `scale` (1000 turns seconds into ms).
void add_summary_json(nlohmann::json& out, const std::string& name, const Summary& s,
                      double scale);

}  // namespace folio::tools
