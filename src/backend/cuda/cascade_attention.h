// Cascade (shared-prefix) decode attention on the GPU: the kernels for a CascadePlan
// (backend/cascade_plan.h says what the plan is and why).
//
// Kernel 1 (partials): one thread block per (plan item, kv head). Its query rows are the item's
// rows x the q heads of that kv head (at most 64: 16 per warp, 4 warps), its keys the item's token
// range, read once through the item's block table in tiles of 64 tokens (cp.async, two stages);
// q·K^T and P·V run on tensor cores (mma.m16n8k16), softmax online in the exp2 domain. Each query
// row writes its partial (running max, sum, unnormalised accumulator, fp32) into its slot.
// Kernel 2 (merge): one thread block per (batch row, q head) combines the row's slots and writes
// the normalised output row. So a shared prefix's K/V is read once per item of up to 16 rows
// (at GQA 4), instead of once per row as the per-row decode kernels read it.
//
// Supports a 16-bit cache (the q/out dtype) and head_dim 64 or 128 (cascade_supported); q is
// already roped (qkv_post ran), and nothing is written to the cache. Every row's context is
// covered by its items (the plan's invariant), so the merge never sees a row without slots.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cascade_plan.h"
#include "backend/cuda/attention_params.h"
#include "base/status.h"

namespace folio::cuda {

// Device copies of a CascadePlan's arrays (the layout is the host struct's).
struct CascadeDevicePlan {
  const CascadeItem* items = nullptr;
  int num_items = 0;
  const int32_t* rows = nullptr;            // CascadePlan::rows
  const int32_t* row_slot_start = nullptr;  // [num_seqs + 1]
  const int32_t* row_slots = nullptr;
  int num_slots = 0;
};

// Whether the kernels take this call's geometry: a 16-bit cache, head_dim 64 or 128, at most 64
// q heads per kv head.
bool cascade_supported(const PagedAttentionParams& p);

// The largest rows per item for this geometry (64 query rows / q heads per kv head): the plan's
// CascadeOptions::max_rows_per_item.
int cascade_max_rows_per_item(int num_heads, int num_kv_heads);

// Workspace for the partials: num_slots x num_heads x (head_dim + 2) floats.
size_t cascade_workspace_bytes(int num_slots, int num_heads, int head_dim);

// Attention of p.num_seqs decode rows (one query each, row s at q row p.query_start[s]) into
// p.out. Uses p.q, p.k_cache, p.v_cache, p.out, p.query_start, p.block_table, the geometry and
// p.scale; the items' bt_start index p.block_table.
Status cascade_attention(const PagedAttentionParams& p, const CascadeDevicePlan& plan,
                         void* workspace, void* stream);

}  // namespace folio::cuda
