// Decode kernel tc's default L2 prefetch (V2Args::l2_ahead: K/V rows pulled into L2 that many
// warp steps ahead of their loads; V2Args::l2_lines: by which instruction), a host-side policy
// kept apart from the launcher so that it can be tested without a GPU.
//
// Measured (src/backend/cuda/NOTES.md):
// - H100 SXM (3.35 TB/s peak), session 16/20, bulk prefetches (cp.async.bulk.prefetch.L2, one
//   per row): 2 steps raise K1 from 86-87% to 88-89% of the queued copy at b32 x 2048, 93% to 95%
//   at b128 x 2048 and 97% to 100% at b128 x 8192 (3 or 4 steps lose up to 28%); but B1 lost
//   2.5% with every launch prefetching. Its decode grids are mostly far beyond one resident wave
//   (up to 1000 sequences x 8 KV heads), where the copy rate needs no help; so only grids of at
//   most kTcL2AheadMaxBlocks (4 waves of 2 blocks per SM) prefetch there.
// - H200 (4.8 TB/s peak), session 23: the same bulk prefetches lose 8-11% (b32 x 2048 84.5 us
//   queued against 77.8 without, b128 x 2048 319 against 288, b128 x 8192 1207 against 1078).
//   Session 25: it is the bulk-copy engine's prefetch that loses there, not prefetching. One
//   prefetch.global.L2 per 128-byte line, 2 steps ahead: b32 x 2048 78.2-78.7 us against 79.1,
//   b128 x 2048 291.6-292.1 against 292.3-292.6, b128 x 8192 level; B2's wave (256 x 1024/1024)
//   8,974 / 9,020 output tok/s against 8,902 / 8,872, B1 56.74 against 55.42 req/s (3 or 4 steps
//   lose: b128 x 2048 296 / 328 us). So GPUs whose DRAM peaks at or above kFastDramGbps
//   (fast_dram.h) prefetch by line, 2 steps ahead, on every grid.
// Only these two GPUs were measured: the threshold sits between them. The H100 keeps the bulk
// form it was measured with (the line form was not measured there).
// FOLIO_TC_L2_AHEAD=k (2..6) prefetches k steps ahead on every launch, 0 never;
// FOLIO_TC_L2_LINES=1 / 0 forces the line / bulk form (the launcher).
#pragma once

#include <cstdint>

#include "backend/cuda/fast_dram.h"

namespace folio::cuda {

inline constexpr int64_t kTcL2AheadMaxBlocks = 1024;
inline constexpr int kTcL2AheadSteps = 2;

struct TcL2Prefetch {
  int steps = 0;       // V2Args::l2_ahead (0: none)
  bool lines = false;  // V2Args::l2_lines
};

// The default for a launch of `grid_blocks` blocks on a GPU whose DRAM peaks at `peak_gbps`
// (DeviceInfo::peak_memory_gbps; 0 when unknown, which keeps the prefetch off).
constexpr TcL2Prefetch tc_l2_prefetch_default(int64_t grid_blocks, double peak_gbps) {
  if (peak_gbps <= 0) return {};
  if (fast_dram(peak_gbps)) return {kTcL2AheadSteps, true};
  if (grid_blocks <= kTcL2AheadMaxBlocks) return {kTcL2AheadSteps, false};
  return {};
}

}  // namespace folio::cuda
