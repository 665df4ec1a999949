// Scheduler: decides, each step, which sequences compute which tokens, within a token budget,
// a sequence cap and the KV cache (vLLM V1's design: every sequence's num_computed catches up
// with its num_tokens; prefill, chunked prefill, prefix hits and decode are one kind of step).
//
// Engine thread only. Per step: schedule() -> engine runs SchedulerOutput -> update_from_output().
// schedule() phases, in order:
//   1. running groups that decode (never starved by a prefill), then running groups in prefill
//      (chunked to the remaining budget); when blocks run out, the lowest-ranked group not yet
//      scheduled this step is preempted, all or nothing (recompute, or swap to the host pool
//      with a fall back to recompute when the swap space is full); with no one left to preempt
//      the group preempts itself;
//   2. swapped groups are swapped back in (only in a step that preempted nobody);
//   3. waiting groups are admitted with a prefix-cache lookup (only when nothing is swapped
//      out and nothing was preempted), stopping at the first that does not fit (FCFS,
//      priority order: lower priority value first, or longest output budget first; ties by
//      arrival); with schedule_conservativeness > 0, "fits" also means that the cache holds
//      the peak of the running groups' and the new one's expected growth (AdmissionHeadroom).
// Rank everywhere = policy key (arrival, (priority, arrival) or (-output budget, arrival)); the
// preemption victim is the highest key. A request that can never fit is finished with an error,
// never stalls the queue.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/request.h"
#include "kv/kv_cache_manager.h"
#include "sched/admission_headroom.h"
#include "sched/scheduler_config.h"
#include "sched/scheduler_output.h"

namespace folio {

struct SchedulerStats {
  int64_t num_steps = 0;              // schedule() calls that scheduled something
  int64_t num_preemptions = 0;        // groups preempted (both modes)
  int64_t num_recompute_preemptions = 0;
  int64_t num_swapped_out_blocks = 0;
  int64_t num_failed = 0;
  int peak_blocks_used = 0;
  int64_t num_scheduled_tokens = 0;   // tokens run over all steps: prompt chunks, recompute, decode
  int64_t num_prefix_hit_tokens = 0;  // tokens of admitted prompts whose K/V the prefix cache held
  double kv_slot_utilization_sum = 0;  // sum over steps of filled slots / used slots
  double kv_slot_utilization() const {
    return num_steps ? kv_slot_utilization_sum / double(num_steps) : 0.0;
  }
};

class Scheduler {
 public:
  // `config` must be valid (SchedulerConfig::validate); `kv` outlives the scheduler.
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);

  // Queues a request. Bad input (duplicate id, empty prompt, n < 1) is an error; a request that
  // can never fit is accepted and reported in the next output's `failed`.
  Status add_request(Request request);
  // Finishes the group as aborted and frees its blocks at once. NotFound if it is not live.
  Status abort_request(GroupId id);

  SchedulerOutput schedule();
  UpdateResult update_from_output(const StepResult& result);
  // Asynchronous scheduling (vLLM V1's async scheduling): the engine schedules step k+1 while
  // the device still runs step k. advance() ends step k before its tokens are known: the
  // scheduled tokens count as computed, each sampled sequence gets its placeholder (a negative
  // id the executor resolves on the device from step k's samples) and length limits apply, so
  // schedule() can give the sequence its next decode token. resolve() then writes the real
  // tokens over the placeholders and applies the engine's stop decisions; a sequence that stops
  // there has one token more in flight, whose result the engine drops. Per step: schedule(),
  // advance(), and resolve() before the advance() of the next step.
  UpdateResult advance(std::span<const SampledToken> placeholders);
  UpdateResult resolve(const StepResult& result);
  // Beam search: a new sequence sharing all of `parent`'s tokens and blocks (call between
  // update_from_output and schedule). NotFound if the parent is not a live running sequence.
  // `last_token` replaces the child's last token, which must not be computed yet (the token the
  // parent was just given): a beam forks its parent's KV but continues with its own token.
  Result<SeqId> fork_sequence(SeqId parent, std::optional<TokenId> last_token = std::nullopt);

  bool has_unfinished() const { return !groups_.empty() || !pending_failed_.empty(); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_swapped() const { return static_cast<int>(swapped_.size()); }
  const SequenceGroup* group(GroupId id) const;
  const SchedulerStats& stats() const { return stats_; }
  // "running: 3 reqs, waiting: 1, swapped: 0, KV: 42.0% (27/64 blocks), preemptions: 2"
  std::string summary() const;

 private:
  struct Planned {
    Sequence* seq;
    int num_new;
  };
  using Queue = std::vector<SequenceGroup*>;

  bool before(const SequenceGroup* a, const SequenceGroup* b) const;
  // Tokens the group may still be asked for at most: max_tokens within max_model_len (lof's key;
  // fixed for the group's life, so queue order never changes while it waits).
  int output_budget(const SequenceGroup& g) const;
  void enqueue(Queue& q, SequenceGroup* g);
  static void dequeue(Queue& q, const SequenceGroup* g);
  int seq_capacity() const;  // longest sequence the cache or the model can hold

  // Tokens each live sequence of `g` computes this step, within the budget (empty: none).
  std::vector<Planned> plan(SequenceGroup* g, int budget, int seqs_left) const;
  int blocks_needed(const std::vector<Planned>& plan) const;
  void commit(SequenceGroup* g, const std::vector<Planned>& plan, SchedulerOutput& out);

  void schedule_running(SchedulerOutput& out, bool prefill_pass);
  void schedule_swapped(SchedulerOutput& out);
  void schedule_waiting(SchedulerOutput& out);
  // Appends the running groups' growth entries to `growth`, sorted by tokens left (largest
  // first); returns the blocks their live sequences hold.
  int64_t running_growth(std::vector<AdmissionHeadroom::Growth>* growth) const;
  int64_t blocks_held(const SequenceGroup& g) const;  // by g's live sequences
  // With a sliding window: frees the blocks below the window of each live sequence's next query.
  void free_out_of_window(const SequenceGroup& g);
  // Lowest-ranked running group not scheduled this step and not `except`, or nullptr.
  SequenceGroup* pick_victim(const SequenceGroup* except) const;
  void preempt(SequenceGroup* g, SchedulerOutput& out);
  void preempt_recompute(SequenceGroup* g);
  void fail(SequenceGroup* g, std::string message);
  void finish_seq(SequenceGroup* g, Sequence* s, SeqStatus status);
  void retire_if_done(SequenceGroup* g, UpdateResult& result);
  void retire_touched(const std::vector<GroupId>& touched, UpdateResult& result);
  Sequence* find_live(SeqId id, SequenceGroup** g);
  // The parts of update_from_output (scheduler_update.cc), shared with advance and resolve.
  void apply_computed(std::vector<GroupId>& touched);
  void append_sampled(std::span<const SampledToken> sampled, UpdateResult& result,
                      std::vector<GroupId>& sampled_groups);
  void apply_stops(std::span<const FinishedSeq> finished, std::vector<GroupId>& touched);
  void record_step_stats(const SchedulerOutput& out);

  SchedulerConfig config_;
  KvCacheManager& kv_;
  AdmissionHeadroom headroom_;
  std::unordered_map<GroupId, std::unique_ptr<SequenceGroup>> groups_;  // live groups
  std::unordered_map<SeqId, GroupId> seq_group_;
  Queue waiting_, running_, swapped_;
  std::vector<FailedGroup> pending_failed_;
  uint64_t next_arrival_ = 0;
  SeqId next_seq_id_ = 1;

  // This step's bookkeeping (schedule() -> update_from_output()).
  uint64_t step_ = 0;  // schedule() calls so far; SequenceGroup::scheduled_step == step_: scheduled now
  // What update_from_output needs of the last schedule()'s entries (not their views or vectors).
  struct Scheduled {
    SeqId seq_id = 0;
    int num_tokens = 0;
    std::vector<SeqId> fork_ids;  // sample_seq_ids when the prompt of an n > 1 group ends
  };
  std::vector<Scheduled> last_;
  bool scheduled_now(const SequenceGroup* g) const { return g->scheduled_step == step_; }
  int budget_ = 0;
  int seqs_left_ = 0;
  bool preempted_this_step_ = false;
  SchedulerStats stats_;
};

}  // namespace folio
