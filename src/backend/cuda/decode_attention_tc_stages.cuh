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
#include "backend/cuda/ldmatrix_ptx.cuh"
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

// The bulk form read by fragments (16-bit caches): the K rows, then the V rows, each 16 rows
// kBulkRowStride apart with tokens 8-15 another 32 bytes further, so that each 8-row phase of
// an ldmatrix (tokens pi(0..7) or pi(0..7) + 2) meets 8 different bank groups.
constexpr int kFragHalfBytes = kChunk * kBulkRowStride<uint16_t> + 32;
constexpr int kFragStageBytes = 2 * kFragHalfBytes;
__device__ __forceinline__ int frag_row_offset(int kv, int tok) {
  return kv * kFragHalfBytes + tok * kBulkRowStride<uint16_t> + (tok >= 8 ? 32 : 0);
}

// Bulk rows: lane L copies row L of the chunk into `stage` (slots in lanes 0-15 of slot_lane, -1
// past the end: not copied); lane 0's arrival on `bar` announces the bytes of the rows that exist
// (none: the phase completes at once). kFrags: the rows placed as frag_row_offset says.
template <typename C, bool kFrags = false>
__device__ __forceinline__ void issue_chunk_rows(uint8_t* stage, uint64_t* bar, const C* k_cache,
                                                 const C* v_cache, int64_t slot_stride,
                                                 int64_t head_off, int slot_lane, int lane) {
  constexpr int kRowBytes = kD * sizeof(C);
  const int sl = __shfl_sync(0xffffffffu, slot_lane, lane % kChunk);
  const uint32_t rows = __ballot_sync(0xffffffffu, sl >= 0);
  if (lane == 0) mbarrier_arrive_expect_tx(bar, __popc(rows) * kRowBytes);
  if (sl >= 0)
    bulk_load(
        stage + (kFrags ? frag_row_offset(lane / kChunk, lane % kChunk) : lane * kBulkRowStride<C>),
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

// A chunk as mma fragments (RowsLayout, decode_attention_tc_layout.cuh): k[j], K's A fragment of
// k-step j (rows: tokens pi(g), pi(g) + 2); v[i], V^T's A fragment of m-tile i (k: tokens 4t,
// 4t + 1 | 4t + 2, 4t + 3, low half first).
struct ChunkFrags {
  uint32_t k[8][4];
  uint32_t v[8][4];
};

// The fragments from a stage placed by frag_row_offset: one ldmatrix per k-step of K and one
// transposing ldmatrix per m-tile of V. Lane L addresses row L % 8 of matrix L / 8: for K the
// token pi(r) (+ 2 in matrices 1, 3) at dims 16j (+ 8 in matrices 2, 3); for V the token pi(r)
// (+ 2 in matrices 2, 3) at dims 16i (+ 8 in matrices 1, 3).
__device__ __forceinline__ void read_chunk_frags(ChunkFrags& f, const uint8_t* stage, int lane) {
  const int m = lane / 8, r = lane % 8, pr = 4 * (r / 2) + r % 2;
  const uint8_t* k_row = stage + frag_row_offset(0, pr + 2 * (m % 2)) + 16 * (m / 2);
  const uint8_t* v_row = stage + frag_row_offset(1, pr + 2 * (m / 2)) + 16 * (m % 2);
#pragma unroll
  for (int j = 0; j < 8; ++j) ldmatrix_x4(f.k[j], k_row + 32 * j);
#pragma unroll
  for (int i = 0; i < 8; ++i) ldmatrix_x4_trans(f.v[i], v_row + 32 * i);
}

// The V parts of tokens tok0 .. tok0 + 3 (the lane's 4t .. 4t + 3 of its chunk) at or past n,
// zeroed: in pieces the rows x = 0..3; in fragments V^T's k halves (tokens 4t, 4t + 1 in
// v[i][0..1], 4t + 2, 4t + 3 in v[i][2..3], the lower token in the low half).
template <typename T, typename C>
__device__ __forceinline__ void zero_v_past_end(ChunkRegs<T, C>& r, int tok0, int n) {
#pragma unroll
  for (int x = 0; x < 4; ++x)
    if (tok0 + x >= n)
#pragma unroll
      for (int j = 0; j < Cache<T, C>::kVLoads; ++j) r.v[x][j] = make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ void zero_v_past_end(ChunkFrags& f, int tok0, int n) {
  const uint32_t keep01 = (tok0 < n ? 0xffffu : 0u) | (tok0 + 1 < n ? 0xffff0000u : 0u);
  const uint32_t keep23 = (tok0 + 2 < n ? 0xffffu : 0u) | (tok0 + 3 < n ? 0xffff0000u : 0u);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    f.v[i][0] &= keep01;
    f.v[i][1] &= keep01;
    f.v[i][2] &= keep23;
    f.v[i][3] &= keep23;
  }
}

}  // namespace tc
}  // namespace
}  // namespace folio::cuda::detail
