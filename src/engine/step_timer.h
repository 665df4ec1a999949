// StepTimer: adds one model step's wall time, from before schedule() to the end of the step, to
// the engine's counters when it goes out of scope (engine-private; see EngineCounters).
#pragma once

#include <chrono>

#include "engine/engine_core.h"

namespace folio {

struct StepTimer {
  EngineCounters& c;
  std::chrono::steady_clock::time_point t0;
  ~StepTimer() {
    c.model_steps++;
    c.step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

}  // namespace folio
