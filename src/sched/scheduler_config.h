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
  // vLLM V1's --long-prefill-token-threshold: when > 0, one sequence computes at most this many
  // tokens in a step (a long prompt's chunks), so a large step budget still fills with short
  // prompts and decodes while no single long prompt turns a step into a stall for the decodes
  // beside it (4000-token prompts at an 8192 budget on an H200: p99 ITL 93 ms, 51 with a
  // threshold of 2048, 46 with 1024, 52 at a 2048 budget; NOTES.md, sessions 42-43). 0 (the
  // default, as vLLM's): no cap beyond the budget. Needs chunked prefill.
  int long_prefill_token_threshold = 0;
  // A step's decode rows ordered by context length, longest first (ties in queue order) instead
  // of queue order. The decode kernels dispatch one block per (sequence, KV head) in row order,
  // so over uneven contexts a long sequence whose blocks start last decides when the launch
  // ends; longest first is LPT scheduling of those blocks (a simulation of B1's lengths on 264
  // resident blocks: 64-66% of the ideal makespan in queue order, 98-99% longest first; NOTES.md,
  // session 41). Results are keyed by sequence id, so outputs do not change. On by default since
  // measured on an H200 (session 42: B1 +2-3%, decode attention -16%); FOLIO_DECODE_ROWS=queue
  // turns it off.
  bool decode_rows_longest_first = true;
  // SGLang's --schedule-conservativeness: a waiting group is admitted only when the cache holds
  // the peak of the running groups' (and its) expected growth (AdmissionHeadroom: outputs that
  // must run to max_tokens in full, others by a decaying ratio; LightLLM's peak over the order
  // in which they end), so a batch does not fill the cache with prompts and then preempt.
  // Larger values reserve more for outputs that may stop early, after a preemption (below).
  // 0: vLLM's admission (any prompt chunk that fits now), and preemption when the cache runs
  // out. Certain outputs count in full at any value above 0. Default 0.3, not SGLang's 1: on an
  // H200 with outputs that stop early (bench/workloads/*eos*), SGLang's ratio at 0.3 was ahead
  // of 1 on all five loads measured (NOTES.md, session 44).
  double schedule_conservativeness = 0.3;
  // How outputs that may stop early are counted: by a ratio that starts at 0 and rises only
  // after a preemption (true), or SGLang's, which starts high and decays (AdmissionHeadroom).
  // Reactive at 0.3 was within 1.1% of the best of vLLM's admission and SGLang's ratio at 0.3
  // and 1 on the four loads it ran on an H200, and ahead of SGLang's at 0.3 by 4.7% where the
  // load fits the cache (session 44). A measuring switch (FOLIO_ADMISSION_RATIO=reactive|sglang,
  // read by the tool's engine flags).
  bool reactive_headroom = true;
  // > 0: every layer of the model attends to the last `sliding_window` positions only
  // (Mistral-7B-v0.1's 4096): before a sequence's step the KV manager frees the blocks below its
  // window (KvCacheManager::free_out_of_window), and the admission headroom counts a sequence
  // at most the blocks of one window. Set by the engine from the model.
  int sliding_window = 0;

  Status validate() const;
};

}  // namespace folio
