// StageTimer: where a step's GPU time goes, per op kind, from CUDA events recorded between the
// ops of one stream (the ops run in order, so the time between two consecutive events is the
// op between them, launch gaps included). Off unless FOLIO_CUDA_STAGE_TIMES=1: recording events
// costs a little, and end_step() synchronizes. The report lists each stage's mean per step, share,
// median step and first step (base/stage_totals.h: one-time costs land in the first).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/stage_totals.h"

namespace folio::cuda {

class StageTimer {
 public:
  // nullptr unless the environment asks for stage times.
  static std::unique_ptr<StageTimer> from_env();
  ~StageTimer();

  void begin_step(void* stream);
  // The op launched since the previous mark (or begin_step) belongs to `stage` (a literal).
  void mark(const char* stage, void* stream);
  void end_step();
  std::string report() const;

 private:
  StageTimer() = default;
  std::vector<void*> events_;          // cudaEvent_t, reused across steps
  std::vector<const char*> stages_;    // stage of the op ending at events_[i + 1]
  size_t used_ = 0;
  StageTotals totals_;
};

}  // namespace folio::cuda
