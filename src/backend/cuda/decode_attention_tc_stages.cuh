// Decode kernel tc's ring forms (decode_attention_tc.cuh): how a 16-token chunk's K/V reaches a
// warp's shared-memory stage and comes back as the register form's pieces (ChunkRegs,
// decode_attention_tc_layout.cuh). The read probe (decode_read_probe.h) uses the same functions,
// so that it times exactly these copies.
//   cp.async: each lane copies its own 16-byte pieces into [load][lane] of the stage.
//   Bulk rows: lane L copies the whole K row (L < 16) or V row (L >= 16) of token L % 16 with
//     one cp.async.bulk (sm_90) into row L of the stage, rows kBulkRowStride apart (a row and 16
//     bytes, so that the lanes' reads back meet at most 2-way bank conflicts), completing on the
//     stage's mbarrier. On the H200 (NOTES.md, session 31) the probe read tc's K1 pattern this
//     way at 94-103% of the copy, by cp.async at 66-74%.
#pragma once

#include <cstdint>

#include "backend/cuda/decode_attention_tc_layout.cuh"
#include "backend/cuda/device_pipeline.cuh"
#include "backend/cuda/mbarrier_ptx.cuh"
#include "backend/cuda/tma_ptx.cuh"

namespace folio::cuda::detail {
namespace {
namespace tc {

// The same loads as issue_chunk by cp.async: load q of the lane (K rows first, as issue_chunk
// orders them) lands at dst[q * 32], dst being its warp's stage plus the lane; past the end 16
// zero bytes, nothing read. The caller commits the group.
template <typename T, typename C>
__device__ __forceinline__ void issue_chunk_async(uint4* dst, const C* k_cache, const C* v_cache,
                                                  int64_t slot_stride, int64_t head_off,
                                                  int slot_lane, int pg, int g, int t) {
  using L = Cache<T, C>;
  int q = 0;
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const int sl = __shfl_sync(0xffffffffu, slot_lane, pg + 2 * x);
    const C* row = k_cache + (sl >= 0 ? sl * slot_stride + head_off : 0);
#pragma unroll
    for (int j = 0; j < L::kKLoads; ++j, ++q)
      cp_async16(dst + q * 32, row + L::k_load_elem(j, t), sl >= 0);
  }
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const int sl = __shfl_sync(0xffffffffu, slot_lane, 4 * t + x);
    const C* row = v_cache + (sl >= 0 ? sl * slot_stride + head_off : 0);
#pragma unroll
    for (int j = 0; j < L::kVLoads; ++j, ++q)
      cp_async16(dst + q * 32, row + L::v_load_elem(j, g), sl >= 0);
  }
}

// The lane's pieces back from its cp.async slots (src: the stage plus the lane).
template <typename T, typename C>
__device__ __forceinline__ void read_chunk_async(ChunkRegs<T, C>& r, const uint4* src) {
  using L = Cache<T, C>;
  int q = 0;
#pragma unroll
  for (int x = 0; x < 2; ++x)
#pragma unroll
    for (int j = 0; j < L::kKLoads; ++j, ++q) r.k[x][j] = src[q * 32];
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int j = 0; j < L::kVLoads; ++j, ++q) r.v[x][j] = src[q * 32];
}

template <typename C>
constexpr int kBulkRowStride = kD* static_cast<int>(sizeof(C)) + 16;
template <typename C>
constexpr int kBulkStageBytes = 2 * kChunk* kBulkRowStride<C>;

// Bulk rows: lane L copies row L of the chunk into `stage` (slots in lanes 0-15 of slot_lane, -1
// past the end: not copied); lane 0's arrival on `bar` announces the bytes of the rows that exist
// (none: the phase completes at once).
template <typename C>
__device__ __forceinline__ void issue_chunk_rows(uint8_t* stage, uint64_t* bar, const C* k_cache,
                                                 const C* v_cache, int64_t slot_stride,
                                                 int64_t head_off, int slot_lane, int lane) {
  constexpr int kRowBytes = kD * sizeof(C);
  const int sl = __shfl_sync(0xffffffffu, slot_lane, lane % kChunk);
  const uint32_t rows = __ballot_sync(0xffffffffu, sl >= 0);
  if (lane == 0) mbarrier_arrive_expect_tx(bar, __popc(rows) * kRowBytes);
  if (sl >= 0)
    bulk_load(stage + lane * kBulkRowStride<C>,
              (lane < kChunk ? k_cache : v_cache) + sl * slot_stride + head_off, kRowBytes, bar);
}

// The register form's pieces from a bulk stage: lane (g, t) reads K rows pg, pg + 2 and V rows
// 4t .. 4t + 3 (pg: tc's pi(g)). Rows that were not copied hold whatever was there before.
template <typename T, typename C>
__device__ __forceinline__ void read_chunk_rows(ChunkRegs<T, C>& r, const uint8_t* stage, int pg,
                                                int g, int t) {
  using L = Cache<T, C>;
  auto piece = [&](int row, int elem) {
    return *reinterpret_cast<const uint4*>(stage + row * kBulkRowStride<C> + elem * sizeof(C));
  };
#pragma unroll
  for (int x = 0; x < 2; ++x)
#pragma unroll
    for (int j = 0; j < L::kKLoads; ++j) r.k[x][j] = piece(pg + 2 * x, L::k_load_elem(j, t));
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int j = 0; j < L::kVLoads; ++j)
      r.v[x][j] = piece(kChunk + 4 * t + x, L::v_load_elem(j, g));
}

}  // namespace tc
}  // namespace
}  // namespace folio::cuda::detail
