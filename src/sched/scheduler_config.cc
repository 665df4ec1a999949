#include "sched/scheduler_config.h"

namespace folio {

Status SchedulerConfig::validate() const {
  if (max_num_batched_tokens < 1)
    return invalid_argument("max_num_batched_tokens must be >= 1, got " +
                            std::to_string(max_num_batched_tokens));
  if (max_num_seqs < 1)
    return invalid_argument("max_num_seqs must be >= 1, got " + std::to_string(max_num_seqs));
  if (max_model_len < 2)
    return invalid_argument("max_model_len must be >= 2, got " + std::to_string(max_model_len));
  if (!enable_chunked_prefill && max_num_batched_tokens < max_model_len)
    return invalid_argument(
        "without chunked prefill, max_num_batched_tokens (" +
        std::to_string(max_num_batched_tokens) + ") must be >= max_model_len (" +
        std::to_string(max_model_len) + "): a whole prompt must fit in one step");
  if (long_prefill_token_threshold < 0)
    return invalid_argument("long_prefill_token_threshold must be >= 0, got " +
                            std::to_string(long_prefill_token_threshold));
  if (long_prefill_token_threshold > 0 && !enable_chunked_prefill)
    return invalid_argument(
        "long_prefill_token_threshold caps a prompt's chunk per step: it needs chunked prefill");
  if (!(schedule_conservativeness >= 0.0) || schedule_conservativeness > 100.0)
    return invalid_argument("schedule_conservativeness must be in [0, 100], got " +
                            std::to_string(schedule_conservativeness));
  if (sliding_window < 0)
    return invalid_argument("sliding_window must be >= 0, got " + std::to_string(sliding_window));
  return Status::ok_status();
}

}  // namespace folio
