// Internal to prefill_attention_v3tmaq.cu: a full work item's O written by TMA from shared
// memory, instead of by the consumers' own global stores (v3k::Block::store).
//
// Why: with the 16-byte stores O still cost 8 x 1024 about 8% (a timing probe that never stored
// O ran 415 TFLOP/s against 385; NOTES.md, session 17): each warp's normalised rows went out as
// 8 x 16-byte global stores after 32 quad shuffles, and both warpgroups pay that at the same
// time, at every item's end, with the tensor cores idle. Here each warp writes its packed O
// pairs into shared memory by stmatrix (8 per lane) in the 128-byte-swizzled layout a TMA load
// of the same box leaves (no shuffles; conflict-free: the 8 rows of a matrix land in 8 different
// 16-byte chunks), and one thread per warpgroup hands the 16 KB to the TMA unit as 2 box copies.
//
// Where: shared memory is full (Q 32 KB + a 3-stage ring of 64 KB), so O goes into the V stage of
// the item's last key tile, which the warpgroups hold instead of releasing after their last P V
// (consume_tiles_then's hold_last_v): warpgroup w's 64 rows take bytes [16 KB w, 16 KB (w + 1))
// of it, column half h at + 8 KB h, rows of 128 bytes. Both warpgroups read all of that V tile,
// so they meet on a named barrier (kOBarrier, 256 threads) before either writes O there.
//
// The stage's release: the other three warps of a warpgroup arrive on its empty_v as soon as
// their O is written (the issuing warp's arrival is the one that matters); the issuing thread
// (lane 0 of the warpgroup's warp 0) waits for the copies to have read shared memory
// (cp.async.bulk.wait_group.read) only at the start of its next item (release_held_v), so the
// copy runs under the next item's Q load and first S, then its warp arrives. The producer
// refills that stage three ring positions later.
//
// Measured (H100, session 18, 3 rounds alternated with the 16-byte stores; NOTES.md): 1 x 8192
// 564-567 against 553-557 TFLOP/s, 2 x 4096 +2.5%, 64 x 128 +2.5%, 8 x 1024 level (369-386
// against 373-386). Two other forms measured no better: the stage released under the next
// item's first S instead of at its start, and O staged in the last K stage (waiting for that
// stage's release instead of the 256-thread barrier, the producer gated by a per-stage mbarrier;
// branch wip/k2-ostore-kstage): so the barrier's lockstep is not what 8 x 1024 loses.
//
// Which items: those whose 128 rows are all real (r0 + 127 <= last_row, block-uniform). A box
// has no row mask, so an item whose tile runs past its sequence's last row would overwrite the
// next sequence's O: those keep Block::store.
#pragma once

#include "backend/cuda/named_barrier_ptx.cuh"
#include "backend/cuda/prefill_attention_v3pw.cuh"
#include "backend/cuda/tma_ptx.cuh"

namespace folio::cuda::prefill_detail::v3tmaq_o {

using v3pw_ring::Barriers;
using v3pw_ring::Blk;
using v3pw_ring::D;

constexpr int kOBarrier = 1;                    // 256 threads: both warpgroups done with V(last)
constexpr int kOWgBarrier = 2;                  // + wg, 128 threads: O written and fenced
constexpr uint32_t kOHalfBytes = 64 * 128;      // one column half of one warpgroup's 64 rows
constexpr uint32_t kOWgBytes = 2 * kOHalfBytes;  // one warpgroup's O
static_assert(2 * kOWgBytes <= v3pw_ring::BN * D * 2, "both warpgroups' O fit one V stage");

template <typename T>
__device__ __forceinline__ bool item_is_full(const Blk<T>& b) {
  return b.r0 + v3k::BM - 1 <= b.last_row;
}

__device__ __forceinline__ bool is_issuer() { return threadIdx.x % 128 == 0; }

// This warp's 16 rows of O, normalised, into the warpgroup's staging area o_s (1024-aligned).
// o[4 j + 2 h + e] is row 8 h + g of the warp's 16, column 8 j + 2 tq + e (wgmma's accumulator),
// i.e. this lane's element pair of the 8 x 8 matrix (rows 8 h.., columns 8 j..) in the layout
// stmatrix takes. Column group j's 16-byte chunk sits at chunk (j % 8) ^ (row % 8) of its row
// (the 128-byte swizzle). One stmatrix.x4 stores the four column groups j = 8 half + 4 q + i
// (i < 4) of one row half h: lane 8 i + r gives row 8 h + r's chunk (4 q + i) ^ r = 4 q ^ (i ^ r),
// so two addresses (q = 0, 1) serve all 8 instructions, h (1 KB) and half (8 KB) as immediates.
// (32 4-byte stores per lane before: session 19, NOTES.md.)
template <typename T>
__device__ __forceinline__ void stage_o(const Blk<T>& b, unsigned char* o_s,
                                        const float (&o)[D / 2], const float (&l)[2]) {
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inv[h] = sum > 0.f ? fast_rcp(sum) : 0.f;
  }
  const int lane = threadIdx.x % 32, i = lane / 8, r = lane % 8;
  unsigned char* const row_base = o_s + ((b.wr0 - b.wg_r0) + r) * 128;
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    unsigned char* const chunk = row_base + (((4 * q) ^ (i ^ r)) << 4);
#pragma unroll
    for (int half = 0; half < D / 64; ++half)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t m[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int j = 8 * half + 4 * q + k;
          m[k] = pack2<T>(o[4 * j + 2 * h] * inv[h], o[4 * j + 2 * h + 1] * inv[h]);
        }
        stmatrix_x4(chunk + half * kOHalfBytes + h * 8 * 128, m);
      }
  }
}

// The epilogue of a full item whose last key tile is in ring stage st: O staged in V(st) and
// copied out by the issuer; returns st, the stage this warpgroup still holds (release_held_v).
template <typename T>
__device__ __forceinline__ int store_o(const Blk<T>& b, Barriers& bar, const CUtensorMap* o_map,
                                       int st, const float (&o)[D / 2], const float (&l)[2]) {
  named_barrier_sync(kOBarrier, 2 * 128);
  unsigned char* const o_s = b.v_tile(st) + b.wg * kOWgBytes;
  stage_o(b, o_s, o, l);
  fence_proxy_async_smem();  // the TMA unit reads O through the async proxy
  named_barrier_sync(kOWgBarrier + b.wg, 128);
  if (is_issuer()) {
    const int token0 = b.qs + b.a.group_div.div(b.r0 + b.wg_r0);  // G divides 64
    for (int h = 0; h < 2; ++h)
      tma_store_3d(o_map, h * 64, b.kvh * b.G, token0, o_s + h * kOHalfBytes);
    bulk_commit_group();
  }
  if (threadIdx.x % 128 >= 32) v3pw_ring::release(&bar.empty_v[st]);
  return st;
}

// The start of the warpgroup's next item, or its end (st < 0: nothing held): the issuer's copies
// have read the staged O, then the issuing warp releases the stage.
__device__ __forceinline__ void release_held_v(Barriers& bar, int st) {
  if (st < 0) return;
  if (is_issuer()) bulk_wait_group_read<0>();
  if (threadIdx.x % 128 < 32) v3pw_ring::release(&bar.empty_v[st]);
}

// Before the consumer exits: its copies' global writes are done.
__device__ __forceinline__ void finish_stores() {
  if (is_issuer()) bulk_wait_group<0>();
}

}  // namespace folio::cuda::prefill_detail::v3tmaq_o
