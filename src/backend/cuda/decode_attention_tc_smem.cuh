// Decode kernel tc's shared memory and residency (decode_attention_tc.cuh): the partials' bytes,
// each form's ring, and the blocks per SM the launch bounds ask for.
#pragma once

#include "backend/cuda/decode_attention_partitions.cuh"
#include "backend/cuda/decode_attention_tc_layout.cuh"
#include "backend/cuda/decode_attention_tc_stages.cuh"
#include "backend/cuda/decode_tc_ring.h"

namespace folio::cuda::detail {
namespace {
namespace tc {

// Shared memory: the cross-warp partials (O fragments, [kWarps][8 m-tiles][32 lanes] float4 =
// kWarps * kHeads * kD floats), then max and sum [kWarps][kHeads].
constexpr int kSmemBytes = (kWarps * kHeads * kD + 2 * kWarps * kHeads) * 4;

// The ring form (kRing > 0 stages): a chunk's loads go global -> shared by cp.async into the
// lane's own slots [stage][load][lane] of its warp's ring (no barrier: each lane reads back only
// what it copied) and come to registers just before use, so kRing - 1 chunks are in flight
// without holding registers. The ring and the partials share the dynamic shared memory.
// The bulk forms (kFill 1, 2): a stage of whole rows by bulk copies, read back as the register
// form's pieces (1) or, over a 16-bit cache, as mma fragments by ldmatrix (2;
// decode_attention_tc_stages.cuh), then the barriers [kWarps][kRing].
template <typename C, int kFill>
constexpr int bulk_stage_bytes() {
  return kFill == kTcFillBulkFrags ? kFragStageBytes : kBulkStageBytes<C>;
}
template <typename T, typename C, int kRing, int kFill>
constexpr int ring_smem_bytes() {
  const int ring = kFill != kTcFillCpAsync ? kWarps * kRing * (bulk_stage_bytes<C, kFill>() + 8)
                                           : kWarps * kRing * kLoadsPerLane<T, C> * 32 * 16;
  return ring > kSmemBytes ? ring : kSmemBytes;
}
// Resident blocks per SM the launch bounds ask for: the register form 2 (16-bit: two register
// buffers) or 3 (fp8), the ring forms as many as their shared memory allows, at most 3 (the bulk
// form 4: 128 registers hold its loop without a chunk's registers in flight).
template <typename T, typename C, int kRing, int kFill>
constexpr int blocks_per_sm() {
  if (kRing == 0) return sizeof(C) == 1 ? 3 : 2;
  const int fit = (227 * 1024) / (ring_smem_bytes<T, C, kRing, kFill>() + 1024);
  const int most = kFill != kTcFillCpAsync ? 4 : 3;
  return fit < most ? fit : most;
}

}  // namespace tc
}  // namespace
}  // namespace folio::cuda::detail
