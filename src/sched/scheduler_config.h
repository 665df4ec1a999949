// SchedulerConfig: the knobs of one Scheduler, validated once (validate()) and then read-only.
#pragma once

#include <string>

#include "base/status.h"

namespace folio {

enum class SchedulePolicy { kFcfs, kPriority };
enum class PreemptionMode { kRecompute, kSwap };

struct SchedulerConfig {
  int max_num_batched_tokens = 2048;  // token budget of one step
  int max_num_seqs = 256;             // sequences in one step
  int max_model_len = 4096;           // prompt + output cap per sequence
  SchedulePolicy policy = SchedulePolicy::kFcfs;
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  bool enable_chunked_prefill = true;

  Status validate() const;
};

}  // namespace folio
