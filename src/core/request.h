// Request and SequenceGroup: one client request and the sequences it samples.
//
// A Request is what the engine hands the scheduler. The scheduler turns it into a SequenceGroup
// that it owns: `n` parallel samples (or, later, beams) share the prompt's KV blocks. The group
// starts with one sequence (seqs[0]) that computes the prompt; when the prompt is done the step's
// logits are sampled once per sequence and the other n - 1 sequences are forked from it (sharing
// every KV block, the partly filled last one copied on first write). A group is scheduled,
// preempted and swapped all or nothing. Ordering: lower `priority` first, ties by arrival (FCFS).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/sampling_params.h"
#include "core/sequence.h"

namespace folio {

struct Request {
  GroupId id = 0;
  std::vector<TokenId> prompt;
  SamplingParams params;
  int priority = 0;          // lower runs first (priority policy only)
  std::string cache_salt;    // isolates prefix-cache entries between tenants
};

struct SequenceGroup {
  GroupId id = 0;
  SamplingParams params;
  int priority = 0;
  uint64_t arrival = 0;      // scheduler-assigned arrival order
  std::string cache_salt;
  int prompt_len = 0;
  std::vector<Sequence> seqs;  // seqs[0] is the leader; finished ones stay (with their tokens)
  bool forked = false;         // the n - 1 siblings exist (always true for n == 1)
  SeqStatus status = SeqStatus::kWaiting;
  std::string error;           // why it finished with kFinishedError
  // The scheduler's step counter when it last scheduled this group (0: never): "scheduled this
  // step" without a per-step set of ids (one allocation per group per step).
  uint64_t scheduled_step = 0;

  Sequence* find(SeqId id);
  const Sequence* find(SeqId id) const;
  int num_live() const;        // sequences not finished
  bool finished() const { return is_finished(status); }
  // The live sequences' ids, in order.
  std::vector<SeqId> live_ids() const;
  // True while some live sequence has more than one token to compute (a prompt or a recompute).
  bool in_prefill() const;
};

}  // namespace folio
