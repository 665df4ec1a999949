// Decode kernel tc's default L2 prefetch distance (V2Args::l2_ahead: K/V rows pulled into L2 that
// many warp steps ahead of their loads), a host-side policy kept apart from the launcher so that
// it can be tested without a GPU.
//
// Measured (src/backend/cuda/NOTES.md):
// - H100 SXM (3.35 TB/s peak), session 16/20: 2 steps raise K1 from 86-87% to 88-89% of the
//   queued copy at b32 x 2048, 93% to 95% at b128 x 2048 and 97% to 100% at b128 x 8192 (3 or 4
//   steps lose up to 28%); but B1 lost 2.5% with every launch prefetching. Its decode grids are
//   mostly far beyond one resident wave (up to 1000 sequences x 8 KV heads), where the copy rate
//   needs no help; so only grids of at most kTcL2AheadMaxBlocks (4 waves of 2 blocks per SM)
//   prefetch.
// - H200 (4.8 TB/s peak), session 23: the same prefetch loses 8-11%: b32 x 2048 84.5 us queued
//   against 77.8 without, b128 x 2048 319 against 288, b128 x 8192 1207 against 1078 (75% ->
//   81%, 79% -> 88%, 84% -> 94% of the queued copy). So GPUs whose DRAM peaks at or above
//   kFastDramGbps (fast_dram.h) never prefetch by default. Only these two GPUs were
//   measured: the threshold sits between them.
// FOLIO_TC_L2_AHEAD=k (2..6) prefetches k steps ahead on every launch, 0 never (the launcher).
#pragma once

#include <cstdint>

#include "backend/cuda/fast_dram.h"

namespace folio::cuda {

inline constexpr int64_t kTcL2AheadMaxBlocks = 1024;
inline constexpr int kTcL2AheadSteps = 2;

// The default for a launch of `grid_blocks` blocks on a GPU whose DRAM peaks at `peak_gbps`
// (DeviceInfo::peak_memory_gbps; 0 when unknown, which keeps the prefetch off).
constexpr int tc_l2_ahead_default(int64_t grid_blocks, double peak_gbps) {
  const bool small_grid = grid_blocks <= kTcL2AheadMaxBlocks;
  const bool helps_here = peak_gbps > 0 && !fast_dram(peak_gbps);
  return small_grid && helps_here ? kTcL2AheadSteps : 0;
}

}  // namespace folio::cuda
