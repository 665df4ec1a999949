// The cascade wgmma kernel's geometry, arguments and work items (cascade_attention_wg.cuh has
// the kernel and its protocol; cascade_attention_wg_fp8.cuh its fp8-cache form). Device code
// only, included through cascade_attention_wg.cuh.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "backend/cascade_plan.h"

namespace folio::cuda::cascade_wide {

constexpr int D = 128;
constexpr int kTileTokens = 64;
constexpr int kStages = 3;     // a 16-bit cache's most stages (kSt: 2, the default, or 3)
constexpr int kThreads = 128;  // one warpgroup
constexpr uint32_t kPanelBytes = kTileTokens * 128;  // 64 rows x 64 16-bit elements
constexpr uint32_t kTileBytes = 2 * kPanelBytes;     // 64 rows x head_dim 128
constexpr uint32_t kStageBytes = 2 * kTileBytes;     // K and V
// Stages, their barriers, and slack to align the dynamic base to 1024 bytes.
constexpr size_t smem_bytes(int stages) {
  return size_t(stages) * kStageBytes + 64 + 1024;
}

struct Args {
  const void* q;  // [tokens, num_heads, D], roped
  const int32_t* query_start;
  const int32_t* block_table;
  const CascadeItem* items;  // the plan's
  const int32_t* rows;
  float* part_o;   // [num_slots][num_heads][D]
  float* part_ml;  // [num_slots][num_heads][2]
  int num_heads, num_kv_heads, block_size, block_shift;
  float scale_log2;
  // num_wide = counts[0] and num_packs = counts[1], read on the device (CascadeCounts: a CUDA
  // graph replays the kernel with another step's counts). Blocks [0, num_packs) take pack b's
  // items, items[pack_start[b], pack_start[b + 1]) (cascade_packs.h: their query rows fit the
  // block's 64); the next ones items[0, num_wide) alone (packs first: they are the longer
  // blocks where several items go to one); blocks past num_packs + num_wide (a grid as wide as a
  // graph's bound) have no work.
  const int32_t* pack_start;  // [num_packs + 1]; may be null when num_packs is 0
  const int32_t* counts;
};

// Page boxes (block_size slots) and one-slot boxes of K and V (tensor_map.h).
struct Maps {
  CUtensorMap k_page, v_page, k_row, v_row;
};

// A block's work: `count` items from `first`, item j's query rows following item j - 1's (G per
// item row: item row i, q head kvh G + m % G is query row m = (the item's first) + G i + m % G).
// A wide item alone is the case count 1; a block past the step's work count 0.
struct Work {
  const CascadeItem* first;
  int count;
};

__device__ __forceinline__ Work block_work(const Args& a) {
  const int b = blockIdx.x;
  const int num_wide = a.counts[0], num_packs = a.counts[1];
  if (b >= num_packs + num_wide) return {a.items, 0};
  if (b >= num_packs) return {a.items + (b - num_packs), 1};
  const int i0 = a.pack_start[b];
  return {a.items + i0, a.pack_start[b + 1] - i0};
}

}  // namespace folio::cuda::cascade_wide
