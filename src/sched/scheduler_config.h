// SchedulerConfig: the knobs of one Scheduler, validated once (validate()) and then read-only.
#pragma once

#include <string>

#include "base/status.h"

namespace folio {

// kFcfs: arrival order. kPriority: lower `priority` first, ties by arrival (vLLM's).
// kLongestOutputFirst ("lof", SGLang's name): the largest output budget first (max_tokens,
// capped by max_model_len - prompt), ties by arrival. For offline batches: a long request admitted
// last decodes alone at the end, so running the long ones first shortens the batch's makespan.
// A steady stream of long requests can hold short ones back, as with priorities.
enum class SchedulePolicy { kFcfs, kPriority, kLongestOutputFirst };
enum class PreemptionMode { kRecompute, kSwap };

struct SchedulerConfig {
  int max_num_batched_tokens = 2048;  // token budget of one step
  int max_num_seqs = 256;             // sequences in one step
  int max_model_len = 4096;           // prompt + output cap per sequence
  SchedulePolicy policy = SchedulePolicy::kFcfs;
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  bool enable_chunked_prefill = true;
  // A step's decode rows ordered by context length, longest first (ties in queue order) instead
  // of queue order. The decode kernels dispatch one block per (sequence, KV head) in row order,
  // so over uneven contexts a long sequence whose blocks start last decides when the launch
  // ends; longest first is LPT scheduling of those blocks (a simulation of B1's lengths on 264
  // resident blocks: 64-66% of the ideal makespan in queue order, 98-99% longest first; NOTES.md,
  // session 41). Results are keyed by sequence id, so outputs do not change. On by default since
  // measured on an H200 (session 42: B1 +2-3%, decode attention -16%); FOLIO_DECODE_ROWS=queue
  // turns it off.
  bool decode_rows_longest_first = true;

  Status validate() const;
};

}  // namespace folio
