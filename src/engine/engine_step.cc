// EngineCore::step() and the per-step output processing.
#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "engine/batch_builder.h"
#include "engine/device_sampling_plan.h"
#include "engine/engine_core.h"
#include "engine/request_state.h"
#include "engine/step_timer.h"

namespace folio {

namespace {
std::vector<BlockCopy> to_block_copies(const std::vector<KvCopy>& v) {
  std::vector<BlockCopy> out;
  out.reserve(v.size());
  for (const auto& c : v) out.push_back({c.src, c.dst});
  return out;
}

PositionLogprobs to_position(const TokenLogprobs& lp) {
  PositionLogprobs p{lp.token_id, lp.logprob, lp.rank, {}};
  for (const auto& t : lp.top) p.top.push_back({t.token_id, t.logprob});
  return p;
}
}  // namespace

Status EngineCore::step() {
  if (async_enabled_ && num_sync_only_ == 0) {
    FOLIO_RETURN_IF_ERROR(step_async());
    // The last requests ended: collect the step still in flight (its tokens are all dropped).
    return requests_.empty() ? finish_launched() : Status();
  }
  FOLIO_RETURN_IF_ERROR(finish_launched());  // a request that needs synchronous steps arrived
  return step_sync();
}

void EngineCore::issue_block_copies(const SchedulerOutput& so) {
  executor_->swap_out(to_block_copies(so.swap_out));
  executor_->swap_in(to_block_copies(so.swap_in));
  executor_->copy_blocks(to_block_copies(so.copies));
}

void EngineCore::report_failed(const SchedulerOutput& so) {
  for (const FailedGroup& f : so.failed) {
    auto it = requests_.find(f.group_id);
    if (it == requests_.end()) continue;
    RequestOutput out;
    out.finished = true;
    out.num_prompt_tokens = static_cast<int>(it->second->prompt.size());
    out.error = invalid_argument(f.message);
    it->second->sink(std::move(out));
    finish_request(f.group_id);
  }
}

void EngineCore::warn_preemptions(const SchedulerOutput& so) const {
  if (so.preempted.empty()) return;
  const int64_t total = scheduler_->stats().num_preemptions;
  const int64_t first = total - static_cast<int64_t>(so.preempted.size()) + 1;
  if (first > 1 && total / 50 == (first - 1) / 50) return;  // no 50th in [first, total]
  const bool swap = config_.sched.preemption_mode == PreemptionMode::kSwap;
  log_warn(
      std::to_string(so.preempted.size()) + " request(s) preempted (" +
      (swap ? "swap, or recompute when the swap space is full" : "recompute") +
      ") because the KV cache is full; total_num_cumulative_preemption=" + std::to_string(total) +
      ". This costs throughput: raise --gpu-memory-utilization or --tensor-parallel-size, "
      "lower --max-num-seqs, or raise --schedule-conservativeness");
}

void EngineCore::note_first_schedule(const SchedulerOutput& so) {
  const auto now = std::chrono::steady_clock::now();
  for (const ScheduledSeq& e : so.seqs) {
    RequestState& r = *requests_.at(e.group_id);
    if (r.num_cached_prompt_tokens < 0) {  // first schedule: what the prefix cache served
      r.num_cached_prompt_tokens = e.start_pos;
      r.queue_time_s = std::chrono::duration<double>(now - r.arrival).count();
    }
  }
}

void EngineCore::end_finished(const UpdateResult& upd) {
  for (SeqId s : upd.finished_by_length)
    if (RequestState* r = find_by_seq(s)) r->outputs[r->seq_index.at(s)]->finish("length");
  for (GroupId g : upd.finished_groups) {
    auto it = requests_.find(g);
    if (it == requests_.end()) continue;
    for (auto& o : it->second->outputs) o->finish("length");  // no-op for finished ones
    emit(*it->second, true);
    finish_request(g);
  }
}

Status EngineCore::step_sync() {
  const auto scheduled_from = std::chrono::steady_clock::now();
  SchedulerOutput so = scheduler_->schedule();
  report_failed(so);
  warn_preemptions(so);
  if (so.empty()) return Status();
  // Times this step from before schedule() (the host loop includes scheduling); steps with no
  // work return above, so an idle engine's empty steps are not counted.
  StepTimer step_timer{counters_, scheduled_from};
  const auto scheduled_at = std::chrono::steady_clock::now();
  counters_.schedule_seconds += std::chrono::duration<double>(scheduled_at - scheduled_from).count();
  issue_block_copies(so);

  note_first_schedule(so);
  std::vector<bool> all_rows(so.seqs.size(), false);
  for (size_t i = 0; i < so.seqs.size(); ++i) {
    const ScheduledSeq& e = so.seqs[i];
    const RequestState& r = *requests_.at(e.group_id);
    all_rows[i] = e.start_pos == r.plp_next && r.plp_next < static_cast<int>(r.prompt.size());
  }
  BatchRows rows;
  build_forward_batch(so, all_rows, batch_, rows);

  // Plan every draw before the step runs: on a device-sampling backend only the rows the host
  // still needs (prompt logprobs, beams, requests beyond the device's logprobs cap) come back.
  const bool on_device = config_.device_sampling && executor_->samples_on_device();
  const int num_rows = static_cast<int>(batch_.logits_rows.size());
  std::vector<uint8_t> wants_host(static_cast<size_t>(num_rows), on_device ? 0 : 1);
  StepResult result;
  std::vector<GroupId> touched;
  std::vector<ParallelSampler::Job> jobs;
  std::vector<PendingSample> pending;
  touched.reserve(so.seqs.size());
  jobs.reserve(so.seqs.size());
  pending.reserve(so.seqs.size());
  for (size_t i = 0; i < so.seqs.size(); ++i) {
    const ScheduledSeq& e = so.seqs[i];
    RequestState& r = *requests_.at(e.group_id);
    if (rows.all_rows[i])
      std::fill_n(wants_host.begin() + rows.first_row[i], e.num_tokens(), uint8_t{1});
    const int row = rows.sample_row(i);
    if (row < 0) continue;
    touched.push_back(e.group_id);
    if (r.beam) {
      wants_host[row] = 1;
      continue;
    }
    plan_samples(e, row, jobs, pending);
  }
  device_batch_.clear();
  std::vector<size_t> host_jobs, device_jobs;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (on_device && device_can_sample(*jobs[j].row.params)) {
      device_jobs.push_back(j);
      append_device_sample_row(jobs[j].row, jobs[j].logits_row, model_.generation.eos_token_ids,
                               penalty_ws_, device_batch_);
    } else {
      host_jobs.push_back(j);
      wants_host[jobs[j].logits_row] = 1;
    }
  }
  // host_index[row]: where logits row `row` sits in logits_ (-1: not returned).
  std::vector<int> host_index(static_cast<size_t>(num_rows), -1);
  for (int row = 0, k = 0; row < num_rows; ++row)
    if (wants_host[row]) {
      host_index[row] = k++;
      if (on_device) device_batch_.host_rows.push_back(row);
    }
  const auto exec_start = std::chrono::steady_clock::now();
  counters_.prepare_seconds += std::chrono::duration<double>(exec_start - scheduled_at).count();
  FOLIO_RETURN_IF_ERROR(on_device ? executor_->execute_sampled(batch_, device_batch_, logits_,
                                                               device_samples_)
                                  : executor_->execute(batch_, logits_));
  counters_.execute_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - exec_start).count();
  counters_.computed_tokens += batch_.num_tokens();

  const size_t vocab = static_cast<size_t>(model_.vocab_size);
  auto host_row = [&](int row) { return logits_.data() + host_index[row] * vocab; };
  std::vector<GroupId> beam_groups;  // beam requests with rows this step
  for (size_t i = 0; i < so.seqs.size(); ++i) {
    const ScheduledSeq& e = so.seqs[i];
    RequestState& r = *requests_.at(e.group_id);
    if (rows.all_rows[i])
      record_prompt_logprobs(r, e, std::span<const float>(host_row(rows.first_row[i]),
                                                          static_cast<size_t>(e.num_tokens()) * vocab));
    const int row = rows.sample_row(i);
    if (row >= 0 && r.beam) {
      if (r.beam_seqs.empty()) r.beam_seqs.push_back(e.seq_id);  // the prompt's sequence
      beam_groups.push_back(e.group_id);
      r.beam_rows[e.seq_id] = host_index[row];
    }
  }
  std::vector<TokenLogprobs> drawn(jobs.size());
  std::vector<ParallelSampler::Job> on_host;
  for (size_t j : host_jobs) {
    on_host.push_back(jobs[j]);
    on_host.back().logits = std::span<const float>(host_row(jobs[j].logits_row), vocab);
  }
  std::vector<TokenLogprobs> host_drawn = sampler_.sample(on_host);
  for (size_t k = 0; k < host_jobs.size(); ++k) drawn[host_jobs[k]] = std::move(host_drawn[k]);
  for (size_t k = 0; k < device_jobs.size(); ++k)
    drawn[device_jobs[k]] = to_token_logprobs(
        device_samples_[k], jobs[device_jobs[k]].row.params->logprobs.value_or(0));
  apply_samples(pending, drawn, result);
  std::vector<BeamFork> forks;
  std::vector<GroupId> beams_done;
  std::sort(beam_groups.begin(), beam_groups.end());
  beam_groups.erase(std::unique(beam_groups.begin(), beam_groups.end()), beam_groups.end());
  FOLIO_RETURN_IF_ERROR(step_beams(logits_, beam_groups, result, forks, beams_done));
  UpdateResult upd = scheduler_->update_from_output(result);
  apply_beam_forks(forks);
  for (GroupId g : beams_done) {  // the search ended before the scheduler saw a length limit
    auto it = requests_.find(g);
    if (it == requests_.end()) continue;
    (void)scheduler_->abort_request(g);
    emit(*it->second, true);
    finish_request(g);
  }
  end_finished(upd);
  emit_step_outputs(touched);
  log_summary_every_n_steps();
  return Status();
}

void EngineCore::emit_step_outputs(std::vector<GroupId>& touched) {
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (GroupId g : touched) {
    auto it = requests_.find(g);
    if (it != requests_.end() && !it->second->final_only) emit(*it->second, false);
  }
}

void EngineCore::log_summary_every_n_steps() const {
  if (config_.log_every_steps > 0 && scheduler_->stats().num_steps % config_.log_every_steps == 0)
    log_info(scheduler_->summary());
}

void EngineCore::plan_samples(const ScheduledSeq& e, int logits_row,
                              std::vector<ParallelSampler::Job>& jobs,
                              std::vector<PendingSample>& pending) {
  RequestState& r = *requests_.at(e.group_id);
  for (SeqId seq : e.sample_seq_ids) {
    auto [it, fresh] = r.seq_index.try_emplace(seq, static_cast<int>(r.outputs.size()));
    if (fresh) {
      r.outputs.push_back(std::make_unique<SequenceOutput>(it->second, tokenizer_.get(), r.params,
                                                           model_.generation.eos_token_ids));
      seq_owner_[seq] = r.gid;
    }
    SequenceOutput& out = *r.outputs[it->second];
    const uint32_t j = static_cast<uint32_t>(it->second);
    ParallelSampler::Job job;
    job.logits_row = logits_row;
    job.row.params = &r.params;
    job.row.prompt_token_ids = r.prompt;
    // Siblings are created at the end of the prompt, when no sequence has output yet.
    job.row.output_token_ids = out.token_ids();
    job.row.rng = r.rng;
    job.row.rng.seq_index = j;
    jobs.push_back(job);
    pending.push_back({&r, seq, &out});
  }
}

void EngineCore::apply_samples(const std::vector<PendingSample>& pending,
                               const std::vector<TokenLogprobs>& drawn, StepResult& result) {
  for (size_t i = 0; i < pending.size(); ++i) {
    const PendingSample& p = pending[i];
    result.sampled.push_back({p.seq, drawn[i].token_id});
    counters_.generated_tokens++;
    p.request->num_generated++;
    if (p.output->add_token(drawn[i].token_id, drawn[i]))
      result.finished.push_back({p.seq, SeqStatus::kFinishedStopped});
  }
}

void EngineCore::record_prompt_logprobs(RequestState& r, const ScheduledSeq& e,
                                        std::span<const float> logits) {
  const int prompt_len = static_cast<int>(r.prompt.size());
  const int end = std::min(e.start_pos + e.num_tokens(), prompt_len);
  const size_t vocab = static_cast<size_t>(model_.vocab_size);
  auto entries =
      prompt_logprobs(logits.subspan(0, static_cast<size_t>(end - e.start_pos) * vocab),
                      model_.vocab_size, r.prompt, *r.params.prompt_logprobs, e.start_pos);
  for (auto& en : entries)
    r.prompt_logprobs.push_back(en ? std::optional<PositionLogprobs>(to_position(*en))
                                   : std::nullopt);
  r.plp_next = end;
  // The prompt's logits are all in: the rest of the request may run ahead (request_state.h).
  if (end == prompt_len && !r.async_safe && async_safe(r.params)) {
    r.async_safe = true;
    --num_sync_only_;
  }
}

void EngineCore::emit(RequestState& r, bool final_output) {
  RequestOutput out;
  out.num_prompt_tokens = static_cast<int>(r.prompt.size());
  out.num_cached_prompt_tokens = std::max(0, r.num_cached_prompt_tokens);
  out.num_generated_tokens = r.num_generated;
  out.queue_time_s = r.queue_time_s;
  out.finished = final_output;
  if (!r.sent_prompt_logprobs && r.params.prompt_logprobs &&
      static_cast<int>(r.prompt_logprobs.size()) >= out.num_prompt_tokens) {
    out.prompt_logprobs = r.prompt_logprobs;
    r.sent_prompt_logprobs = true;
  }
  if (r.beam) {
    if (final_output)
      beam_final_output(r, out);
    else
      return;
  }
  for (auto& o : r.outputs) {
    if (r.final_only) {
      if (final_output) out.deltas.push_back(o->full());
      continue;
    }
    CompletionDelta d = o->take_delta();
    if (!d.token_ids.empty() || !d.text.empty() || d.finish_reason)
      out.deltas.push_back(std::move(d));
  }
  if (!final_output && out.deltas.empty() && out.prompt_logprobs.empty()) return;
  r.sink(std::move(out));
}

}  // namespace folio
