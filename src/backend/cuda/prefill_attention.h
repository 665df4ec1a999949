// Causal paged attention for prefill: any number of query tokens per sequence, variable across
// the batch, attending to the sequence's cached prefix (prefix caching, chunked prefill) and to
// each other, all read through the block table. Works for q_len 1 too, so a mixed step
// (prefills + decodes) can run in this one launch.
//
// FlashAttention-style: a thread block takes one KV head and a tile of 64 (token, q head) rows
// of one sequence, the GQA group's heads folded into the rows so each K/V tile is loaded once for
// all of them; it walks the keys in tiles of 64 through shared memory, computes Q·K^T and P·V
// on tensor cores (wmma, bf16/fp16 in, fp32 accumulate) and keeps an online softmax in fp32.
#pragma once

#include <cstdint>
#include <span>

#include "backend/cuda/attention_params.h"
#include "base/status.h"

namespace folio::cuda {

struct PrefillPlan {
  int num_seqs = 0;
  int max_row_tiles = 0;  // grid extent: the largest ceil(q_len * group / 64) of the batch
};

// query_start: the step's host copy (ForwardBatch::query_start, [num_seqs + 1]).
Result<PrefillPlan> plan_prefill_attention(std::span<const int32_t> query_start, int num_heads,
                                           int num_kv_heads);

Status prefill_attention(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream);

}  // namespace folio::cuda
