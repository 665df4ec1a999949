// Turns a SchedulerOutput into the ForwardBatch the executor runs, and remembers which logits
// row belongs to which scheduled sequence.
#pragma once

#include <vector>

#include "backend/forward_batch.h"
#include "sched/scheduler_output.h"

namespace folio {

struct BatchRows {
  // Per scheduled entry (same order as SchedulerOutput::seqs): the first logits row of the
  // entry, or -1. When all_rows[i], the entry has one logits row per token (prompt logprobs);
  // otherwise one row (its last token) iff it samples.
  std::vector<int> first_row;
  std::vector<bool> all_rows;
  // The row of entry i's last token, or -1 if the entry does not sample.
  int sample_row(size_t i) const {
    if (first_row[i] < 0) return -1;
    return all_rows[i] ? first_row[i] + last_offset[i] : first_row[i];
  }
  std::vector<int> last_offset;  // num_tokens - 1 per entry
};

// `want_all_rows[i]`: entry i needs logits at every token (prompt logprobs).
void build_forward_batch(const SchedulerOutput& out, const std::vector<bool>& want_all_rows,
                         ForwardBatch& batch, BatchRows& rows);

}  // namespace folio
