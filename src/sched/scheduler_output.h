// SchedulerOutput: plain data describing one step, produced by Scheduler::schedule() and turned
// into a ForwardBatch by the engine (slot of position p = block_table[p / block_size] *
// block_size + p % block_size). StepResult is what the engine reports back.
//
// Order of work for the engine: apply swap_out copies (device -> host), then swap_in
// (host -> device), then copies (copy-on-write, device -> device), then run the model.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/sequence.h"
#include "kv/kv_cache_manager.h"

namespace folio {

// token_ids and block_table are views into the scheduler's sequence and the KV manager's table
// (copying them cost the host loop most in token mode, where a table has an entry per token):
// they stay valid until the scheduler changes next (update_from_output, abort_request,
// fork_sequence, the next schedule), which is after the engine has built and run the step.
struct ScheduledSeq {
  SeqId seq_id = 0;
  GroupId group_id = 0;
  std::span<const TokenId> token_ids;  // the tokens [start_pos, start_pos + token_ids.size())
  int start_pos = 0;                   // = num_computed before the step
  std::span<const int32_t> block_table;  // physical ids covering [0, start_pos + token_ids.size())
  // Sequences that get one sampled token each from the logits of this entry's last token:
  // empty while a prompt is still being computed; [seq_id] normally; [seq_id, c1, ..., c_{n-1}]
  // when a group with n > 1 finishes its prompt (c_i are new sibling ids, forked at update).
  std::vector<SeqId> sample_seq_ids;

  bool samples() const { return !sample_seq_ids.empty(); }
  int num_tokens() const { return static_cast<int>(token_ids.size()); }
};

struct FailedGroup {
  GroupId group_id = 0;
  std::string message;
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;
  std::vector<KvCopy> swap_out;  // (device, host)
  std::vector<KvCopy> swap_in;   // (host, device)
  std::vector<KvCopy> copies;    // copy-on-write (device, device)
  std::vector<GroupId> preempted;
  std::vector<FailedGroup> failed;  // finished with an error; never scheduled again
  int num_batched_tokens = 0;
  int block_size = 0;

  bool empty() const { return seqs.empty(); }
};

struct SampledToken {
  SeqId seq_id = 0;
  TokenId token = 0;
};

struct FinishedSeq {
  SeqId seq_id = 0;
  SeqStatus status = SeqStatus::kFinishedStopped;
};

// The engine's report for the step just run: one token per sampled sequence id, then the
// sequences its stop checks finished (EOS, stop strings, ...).
struct StepResult {
  std::vector<SampledToken> sampled;
  std::vector<FinishedSeq> finished;
};

// What update_from_output() decided on its own, for the engine's output processor.
struct UpdateResult {
  std::vector<SeqId> finished_by_length;  // hit max_tokens, max_model_len or the cache size
  std::vector<GroupId> finished_groups;   // every sequence finished; the group is gone
};

}  // namespace folio
