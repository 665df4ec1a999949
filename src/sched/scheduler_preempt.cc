// Scheduler: preemption (recompute / swap) and failing requests.
#include "base/check.h"
#include "sched/scheduler.h"

namespace folio {

SequenceGroup* Scheduler::pick_victim(const SequenceGroup* except) const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it)
    if (*it != except && !scheduled_now(*it)) return *it;
  return nullptr;
}

void Scheduler::preempt_recompute(SequenceGroup* g) {
  // Drop the KV; every token (prompt and generated) is computed again later, and since the
  // tokens themselves are kept the output continues exactly where it stopped.
  for (Sequence& s : g->seqs) {
    kv_.free(s.id);
    s.num_computed = 0;
    if (!s.finished()) s.status = SeqStatus::kWaiting;
  }
  g->status = SeqStatus::kWaiting;
  ++stats_.num_recompute_preemptions;
  enqueue(waiting_, g);
}

void Scheduler::preempt(SequenceGroup* g, SchedulerOutput& out) {
  dequeue(running_, g);
  ++stats_.num_preemptions;
  preempted_this_step_ = true;
  out.preempted.push_back(g->id);
  std::vector<SeqId> ids = g->live_ids();
  if (config_.preemption_mode == PreemptionMode::kSwap &&
      kv_.num_blocks_to_swap(ids) <= kv_.num_free_host_blocks()) {
    size_t before = out.swap_out.size();
    FOLIO_CHECK(kv_.swap_out(ids, &out.swap_out));
    stats_.num_swapped_out_blocks += static_cast<int64_t>(out.swap_out.size() - before);
    g->status = SeqStatus::kSwapped;
    for (Sequence& s : g->seqs)
      if (!s.finished()) s.status = SeqStatus::kSwapped;
    enqueue(swapped_, g);
    return;
  }
  preempt_recompute(g);  // recompute mode, or the swap space is full
}

void Scheduler::fail(SequenceGroup* g, std::string message) {
  for (Sequence& s : g->seqs) {
    kv_.free(s.id);
    seq_group_.erase(s.id);
    if (!s.finished()) s.status = SeqStatus::kFinishedError;
  }
  dequeue(waiting_, g);
  dequeue(running_, g);
  dequeue(swapped_, g);
  pending_failed_.push_back({g->id, std::move(message)});
  ++stats_.num_failed;
  groups_.erase(g->id);
}

}  // namespace folio
