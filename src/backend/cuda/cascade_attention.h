// Cascade (shared-prefix) decode attention on the GPU: the kernels for a CascadePlan
// (backend/cascade_plan.h says what the plan is and why).
//
// Kernel 1 (partials): one thread block per (plan item or pack of items, kv head). Items of more
// than 32 query rows (a shared prefix's, 64 at GQA 4), the plan's first num_wide_items, run on
// the wgmma kernel (cascade_attention_wg.cuh: one warpgroup, wgmma, TMA page boxes) where it
// supports the geometry, and so do the others, several packed into one block
// (cascade_wgmma_packs); where it does not run, every item goes to the mma.sync kernel described
// here. Its query rows are the item's rows x the q heads of that kv head (at most 64: 16 per
// warp, 4 warps), its keys the item's token range, read once through the item's block table in
// tiles of 64 tokens (three stages, one bulk copy per K/V row by default: CascadeLoad); q·K^T and
// P·V run on tensor cores (mma.m16n8k16), softmax online in the exp2 domain. An item of at most
// 16 (32) query rows splits each tile's keys over 4 (2) warps, which combine at the end
// (CascadeTuning::split_keys). Each query row writes its
// partial (running max, sum, unnormalised accumulator, fp32) into its slot.
//
// Measured on the H200 (session 46, AttentionBench.K1SharedPrefix, 1024 rows of 2048 shared +
// 256 own tokens, groups of 16): bulk rows 655-693 us against cp.async's 732-780 in the same run;
// unsplit keys 695-738; an L2 prefetch 2 tiles ahead 677-713 (since removed); at most 8 or 4 rows
// per item 748-775 / 990-1009 (the prefix read twice or four times). On rows that share nothing the
// kernel reads at 84% of the per-row kernel's rate (2741 against 2289 us), which is why the engine
// takes it only where the plan saves enough. With the wgmma kernel taking the wide items and the
// packed own suffixes (session 47, two stages): 467-469 us on the groups of 16 (all on mma.sync
// 655-661), 129 at b256 (196), 40 at b32 (68). Kernel 2 (merge): one thread block per (batch row, q
// head) combines the row's slots and writes the normalised output row. So a shared prefix's K/V is
// read once per item of up to 16 rows (at GQA 4), instead of once per row as the per-row decode
// kernels read it.
//
// Supports a 16-bit cache (the q/out dtype) and head_dim 64 or 128, and an fp8 e4m3 cache at the
// wgmma kernel's geometry, every item on that kernel (cascade_supported; the fp8 form converts
// each tile to fp16: cascade_attention_wg_fp8.cuh); q is already roped (qkv_post ran), and
// nothing is written to the cache. Every plan row's context is covered by its items (the plan's
// invariant); only a graph's padding rows have no slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cascade_plan.h"
#include "backend/cuda/attention_params.h"
#include "base/status.h"

namespace folio::cuda {

// The kernels' counts for one plan, four int32 on the device (CascadeDevicePlan::counts): the
// wgmma kernel's items [0, num_wide) alone and its packs, the mma.sync kernel's items
// [mma_begin, mma_begin + mma_count).
struct CascadeCounts {
  int32_t num_wide = 0, num_packs = 0, mma_begin = 0, mma_count = 0;
};

// Device copies of a CascadePlan's arrays (the layout is the host struct's) and the grids that
// run them. The kernels read the step's CascadeCounts on the device, never on the host, so a
// CUDA graph can replay them with another step's plan in the same buffers
// (model/cuda_llama_cascade.cc): each kernel runs a fixed grid, the wgmma kernel wgmma_blocks
// (>= num_wide + num_packs) and the mma.sync kernel mma_blocks (>= mma_count); blocks past the
// step's work exit at once, and a grid of 0 launches nothing. An eager step passes its own
// counts as the grids (cascade_exact_grids), a graph the bucket's bounds.
struct CascadeDevicePlan {
  const CascadeItem* items = nullptr;
  // Where cascade_wide_supported, the wgmma kernel takes items [0, num_wide) one to a block and
  // the packs (cascade_wgmma_packs): pack b is items [pack_start[b], pack_start[b + 1]) (device
  // array of num_packs + 1; null when there are no packs); the other items, and all where the
  // wgmma kernel does not run, go to the mma.sync kernel.
  const int32_t* pack_start = nullptr;
  const int32_t* rows = nullptr;            // CascadePlan::rows
  const int32_t* row_slot_start = nullptr;  // [num_seqs + 1]
  const int32_t* row_slots = nullptr;
  // The workspace's layout: partials for up to num_slots slots (a capacity, at least the plan's).
  // Rows [plan rows, p.num_seqs) have no slots (a graph's padding: row_slot_start repeats its
  // last entry), and the merge writes them as zeros.
  int num_slots = 0;
  const CascadeCounts* counts = nullptr;  // required
  int wgmma_blocks = 0, mma_blocks = 0;
};

// A plan's counts where the wgmma kernel takes `packs` (cascade_wgmma_packs; empty: no packs,
// and where the wgmma kernel does not run, when the plan has no wide items either).
CascadeCounts cascade_counts(const CascadePlan& plan, const std::vector<int32_t>& packs);

// The grids that run exactly a plan of these counts: {wgmma_blocks, mma_blocks}.
struct CascadeGrids {
  int wgmma_blocks = 0, mma_blocks = 0;
};
CascadeGrids cascade_exact_grids(const CascadeCounts& counts);

// How the partial kernel brings K/V rows to shared memory. kBulkRows: one bulk copy per 256-byte
// row (cp.async.bulk, sm_90), a stage completing on an mbarrier; kCpAsync: 16 bytes per thread
// per cp.async. Kept both so one GPU run can compare them: the read probe (decode_read_probe.h)
// read decode's row pattern at 94-103% of the copy rate by bulk rows and 66-74% by cp.async on
// the H200 (NOTES.md, session 31).
enum class CascadeLoad { kBulkRows, kCpAsync };

// Knobs the kernel bench compares; the defaults are the engine's.
struct CascadeTuning {
  CascadeLoad load = CascadeLoad::kBulkRows;
  // Items of at most 16 (32) query rows split each tile's keys over 4 (2) warps; else one warp
  // per 16 rows, the others idle.
  bool split_keys = true;
  // The wgmma kernel's K/V stages: 2 (Q's fragments straight from global memory; 64 KB, three
  // blocks per SM) or 3 (Q borrows the third on its way to registers; 96 KB, two blocks per SM);
  // over an fp8 cache also 4 (stages of 16 KB beside a 32 KB fp16 tile: 64 / 80 / 96 KB). fp8,
  // H200, session 50: 3 / 4 stages (two blocks per SM) 7% faster at b32 but 8-11% slower at
  // b256-b1024 (groups of 16 b1024 606 against 548 us); end to end 64 x 16 14,422 against 14,706
  // output tok/s, n = 4 9,391 / 9,361 against 9,560: 2 stays the default for both caches.
  // H200, session 47: 2 stages at b1024 groups of 16 467-469 against 529-531 us, one prefix 394
  // against 511, b256 108-130 against 134-142, b32 40 against 42; end to end 64 x 16 14,737
  // against 14,069 output tok/s. ncu had shown the 3-stage form at 12.5% occupancy with DRAM
  // 58% and the SMs 24% busy.
  int wgmma_stages = 2;
};

// The packs (backend/cascade_packs.h) the wgmma kernel takes: pack_start, [num_packs + 1] item
// indices, for CascadeDevicePlan. They cover every item past the wide ones (one_row_only: only
// the one-row items, the plan's last num_single_row_items, the others left to the mma.sync
// kernel, as before session 49), in packs of at most 64 query rows and, with max_items 0, as
// many tiles as cascade_pack_target_tiles allows (as long as the longest wide item; without wide
// items the longest packed item or 16 tiles, within a wave of blocks), else at most max_items
// items (the benchmarks' sweep). Session 49 (H200, groups of 4 rows, b1024): 858.5 us against
// 971.6 with the 4-row items on mma.sync.
//
// Before session 49 only one-row items were packed, a fixed number to a block. The H200's sweep
// then (session 47): own suffixes of 256 tokens at b1024 320 us 16 to a block against 404 alone;
// b32 135 against 57 us at 16, 42 at 4 (as long as the prefix's items); groups of 16 at b32 /
// b256 / b1024 best at 4 / 4 / 8 (4: 528 against 513 us); own suffixes alone at b32 / b256 /
// b1024 at 2 / 8 / 16.
std::vector<int32_t> cascade_wgmma_packs(const CascadePlan& plan, int num_heads, int num_kv_heads,
                                         int num_sms, int max_items = 0, bool one_row_only = false);

// Whether the kernels take this call's geometry: at most 64 q heads per kv head, and a 16-bit
// cache with head_dim 64 or 128, or an e4m3 cache with cascade_wide_supported's geometry (then
// every item must go to the wgmma kernel: wide, or packed by cascade_wgmma_packs with
// one_row_only false; cascade_attention refuses a plan that leaves items to mma.sync).
bool cascade_supported(const PagedAttentionParams& p);

// Whether the wide-item kernel (wgmma, TMA: cascade_attention_wg.cuh) takes this geometry:
// cascade_supported, head_dim 128, and a block size that is a power of two in [8, 64].
bool cascade_wide_supported(const PagedAttentionParams& p);

// The plan's CascadeOptions::wide_min_rows for this geometry (uses the head counts, head_dim,
// block_size): rows of more than 32 query rows go to the wide kernel; 0 where it does not run.
int cascade_wide_min_rows(const PagedAttentionParams& p);

// The largest rows per item for this geometry (64 query rows / q heads per kv head): the plan's
// CascadeOptions::max_rows_per_item.
int cascade_max_rows_per_item(int num_heads, int num_kv_heads);

// The plan's CascadeOptions::min_items: enough items that the partial kernel's grid (items x kv
// heads) gives every SM two thread blocks (two fit one SM).
int cascade_min_items(int num_kv_heads, int num_sms);

// Workspace for the partials: num_slots x num_heads x (head_dim + 2) floats.
size_t cascade_workspace_bytes(int num_slots, int num_heads, int head_dim);

// Attention of p.num_seqs decode rows (one query each, row s at q row p.query_start[s]) into
// p.out. Uses p.q, p.k_cache, p.v_cache, p.out, p.query_start, p.block_table, the geometry and
// p.scale; the items' bt_start index p.block_table.
Status cascade_attention(const PagedAttentionParams& p, const CascadeDevicePlan& plan,
                         void* workspace, void* stream, CascadeTuning tuning = {});

}  // namespace folio::cuda
