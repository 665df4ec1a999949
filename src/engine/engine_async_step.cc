// EngineCore's asynchronous step (vLLM V1's async scheduling): while the device runs step k, the
// host schedules step k+1, builds its inputs and launches it, and only then takes step k's
// tokens. Step k+1's decode inputs are the tokens step k is still sampling: the scheduler holds
// a placeholder for each (Scheduler::advance) and the executor resolves it on the device from
// step k's samples (Executor::launch_sampled). The host loop then overlaps the device instead
// of leaving it idle between steps.
//
// Order within step_async():
//   schedule k+1 -> copies -> build inputs -> launch k+1 -> collect k -> process k's tokens
//   (stops, detokenizing, Scheduler::resolve, emit) -> Scheduler::advance(k+1's placeholders).
// A sequence that stops at step k was already launched in step k+1; that token is dropped.
#include <chrono>

#include "engine/batch_builder.h"
#include "engine/device_sampling_plan.h"
#include "engine/engine_core.h"
#include "engine/request_state.h"
#include "engine/step_timer.h"

namespace folio {

bool async_safe(const SamplingParams& p) {
  return !p.use_beam_search && device_can_sample(p);
}

Status EngineCore::step_async() {
  const auto scheduled_from = std::chrono::steady_clock::now();
  SchedulerOutput so = scheduler_->schedule();
  report_failed(so);
  warn_preemptions(so);
  if (so.empty()) return finish_launched();  // nothing new to run: finish the step in flight
  StepTimer step_timer{counters_, scheduled_from};
  const auto scheduled_at = std::chrono::steady_clock::now();
  counters_.schedule_seconds += std::chrono::duration<double>(scheduled_at - scheduled_from).count();
  issue_block_copies(so);
  note_first_schedule(so);

  BatchRows rows;
  build_forward_batch(so, std::vector<bool>(so.seqs.size(), false), batch_, rows);
  std::vector<ParallelSampler::Job> jobs;
  std::vector<PendingSample> pending;
  jobs.reserve(so.seqs.size());
  pending.reserve(so.seqs.size());
  std::vector<int32_t> in_flight;  // per job: the placeholder of its sequence's last token, or 0
  in_flight.reserve(so.seqs.size());
  for (size_t i = 0; i < so.seqs.size(); ++i) {
    const ScheduledSeq& e = so.seqs[i];
    const int row = rows.sample_row(i);
    if (row < 0) continue;
    plan_samples(e, row, jobs, pending);
    in_flight.resize(jobs.size(), e.token_ids.back() < 0 ? e.token_ids.back() : 0);
  }
  device_batch_.clear();
  LaunchedStep next;
  next.samples.reserve(pending.size());
  std::vector<SampledToken> placeholders;
  placeholders.reserve(pending.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    const RequestState& r = *pending[j].request;
    append_device_sample_row(jobs[j].row, jobs[j].logits_row, model_.generation.eos_token_ids,
                             penalty_ws_, device_batch_, in_flight[j]);
    next.samples.push_back({r.gid, pending[j].seq, r.seq_index.at(pending[j].seq)});
    placeholders.push_back({pending[j].seq, placeholder_token(static_cast<int>(j))});
  }
  const auto exec_start = std::chrono::steady_clock::now();
  counters_.prepare_seconds += std::chrono::duration<double>(exec_start - scheduled_at).count();
  FOLIO_RETURN_IF_ERROR(executor_->launch_sampled(batch_, device_batch_));
  counters_.execute_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - exec_start).count();
  counters_.computed_tokens += batch_.num_tokens();
  counters_.async_steps++;

  FOLIO_RETURN_IF_ERROR(finish_launched(/*in_step=*/true));  // step k, while k+1 runs
  next.advanced = scheduler_->advance(placeholders);
  launched_ = std::move(next);
  log_summary_every_n_steps();
  return Status();
}

Status EngineCore::finish_launched(bool in_step) {
  if (!launched_) return Status();
  const LaunchedStep step = std::move(*launched_);
  launched_.reset();
  const auto wait_start = std::chrono::steady_clock::now();
  FOLIO_RETURN_IF_ERROR(executor_->collect_samples(device_samples_));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  counters_.execute_seconds += waited;
  if (!in_step) counters_.step_seconds += waited;  // a drain: the step's own timer has ended
  if (device_samples_.size() != step.samples.size())
    return internal_error("collect_samples returned " + std::to_string(device_samples_.size()) +
                          " samples for a step that launched " +
                          std::to_string(step.samples.size()));
  StepResult result;
  std::vector<GroupId> touched;
  touched.reserve(step.samples.size());
  for (size_t j = 0; j < step.samples.size(); ++j) {
    const LaunchedSample& l = step.samples[j];
    auto it = requests_.find(l.group);
    if (it == requests_.end()) continue;  // stopped at the step before, or aborted: dropped
    RequestState& r = *it->second;
    SequenceOutput& out = *r.outputs[static_cast<size_t>(l.output)];
    if (out.finished()) continue;  // a sibling (n > 1) that stopped at the step before
    const TokenLogprobs drawn = to_token_logprobs(device_samples_[j], r.params.logprobs.value_or(0));
    result.sampled.push_back({l.seq, drawn.token_id});
    counters_.generated_tokens++;
    r.num_generated++;
    if (out.add_token(drawn.token_id, drawn))
      result.finished.push_back({l.seq, SeqStatus::kFinishedStopped});
    touched.push_back(l.group);
  }
  const UpdateResult resolved = scheduler_->resolve(result);
  end_finished(step.advanced);  // length limits, now that their last tokens are in
  end_finished(resolved);
  emit_step_outputs(touched);
  return Status();
}

}  // namespace folio
