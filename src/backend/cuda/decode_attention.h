// Paged attention for decode (one query token per sequence), flash-decoding style.
//
// Each thread block takes one KV head, up to 8 of the q heads that share it (GQA/MQA: the KV rows
// are read once for all of them), and one partition of the context: it writes either the final
// output (a single partition) or a partial (max, sum, unnormalised output) that a second kernel
// merges. The split is planned once per step on the host from the step's context lengths and
// reused by every layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/cuda/attention_params.h"
#include "base/status.h"

namespace folio::cuda {

struct DecodePlan {
  int num_seqs = 0;
  int num_heads = 0;
  int head_dim = 0;
  int partition_size = 0;   // context tokens per thread block (32..512)
  int max_partitions = 0;   // over the step's sequences
  size_t workspace_bytes = 0;  // device scratch decode_attention needs (0: no split)
};

// context_lens: the step's host copy (ForwardBatch::context_lens). num_sms sizes the split so the
// grid fills the GPU. partition_size 0 picks it; a given one must be a power of two in [32, 512]
// (tests use small ones to force splits).
Result<DecodePlan> plan_decode_attention(std::span<const int32_t> context_lens, int num_heads,
                                         int num_kv_heads, int head_dim, int num_sms,
                                         int partition_size = 0);

// The plan must come from this batch's context lengths (a stale one computes garbage for the
// sequences longer than it planned, but never reads outside the workspace). Every sequence of
// `p` has exactly one query token (query_start[s+1] - query_start[s] == 1); a mixed batch runs
// its prefill part through prefill_attention. `workspace` holds plan.workspace_bytes.
Status decode_attention(const PagedAttentionParams& p, const DecodePlan& plan, void* workspace,
                        void* stream);

}  // namespace folio::cuda
