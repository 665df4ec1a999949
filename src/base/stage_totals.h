// StageTotals: per-stage durations summed per step, and a report of where a step's time goes.
// Host-only bookkeeping behind the CUDA stage timer (backend/cuda/stage_timer.h), kept apart so it
// is tested without a GPU.
//
// Why the median and the first step: a step's stage times include one-time costs that land in
// whichever op first meets them (a GEMM shape's plan and heuristic query, a kernel's lazy load,
// the profiling forward's own shapes). Averaged over a short run they read as a slow op: a
// 16384-token prefill's qkv product looked 60% slower than in isolation (session 34) for this
// reason. The median step leaves them out; the first step shows them.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace folio {

class StageTotals {
 public:
  // One step's ops in launch order: (stage, milliseconds). A stage may repeat within a step
  // (one per layer); its times are summed.
  void add_step(const std::vector<std::pair<std::string, double>>& ops);

  int steps() const { return steps_; }
  // Per step of `stage`: the mean over all steps, the median step, the first step (0 if absent).
  double mean_ms(const std::string& stage) const;
  double median_ms(const std::string& stage) const;
  double first_ms(const std::string& stage) const;
  // Whole steps (every stage summed).
  double mean_step_ms() const;
  double median_step_ms() const;

  // "GPU stage times over N steps ..." then one line per stage (alphabetical): mean per step,
  // share of the mean step, median step, first step.
  std::string report() const;

 private:
  // stage -> its time in each step so far (0 in the steps it did not run in).
  std::map<std::string, std::vector<double>> per_step_;
  std::vector<double> step_ms_;
  int steps_ = 0;
};

}  // namespace folio
