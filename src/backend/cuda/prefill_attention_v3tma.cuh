// Internal to prefill_attention_v3tma.cu, v3tmap.cu and v3tmapp.cu: the TMA producer of
// v3pw's K/V stage ring (protocol in prefill_attention_v3tma.cu), the persistent blocks' work
// items, the consumers' own Q load, and the host's choices (where the ring fits, persistence, the
// tensor maps); the launch itself is prefill_attention_v3tma_launch.cuh.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/named_barrier_ptx.cuh"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/prefill_attention_v3pw.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/tma_ptx.cuh"

namespace folio::cuda::prefill_detail::v3tma_ring {

using v3k::Args;
using v3pw_ring::Barriers;
using v3pw_ring::BN;
using v3pw_ring::Blk;
using v3pw_ring::D;
using v3pw_ring::kStages;
using v3pw_ring::kThreads;

constexpr uint32_t kTileBytes = BN * D * 2;  // one K or V fill, zero-filled boxes included

// The copies' descriptors (kernel parameters: __grid_constant__): a page box (block_size slots)
// and a one-slot box, for K and V.
struct Maps {
  CUtensorMap k_page, v_page, k_row, v_row;
  // The launch's item counter (prefill_attention_items.cuh) for the kernels that deal their
  // items (v3tma, v3tmaq); -1: the static walk.
  int ticket_slot = -1;
};

// Thread 0; then fence for the async proxy and the caller's __syncthreads.
__device__ __forceinline__ void init_tma_barriers(Barriers& bar) {
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kStages; ++s) {
    mbarrier_init(&bar.full_k[s], 1);  // the producer's arrive.expect_tx
    mbarrier_init(&bar.full_v[s], 1);
    mbarrier_init(&bar.empty_k[s], v3pw_ring::kConsumerWarps);
    mbarrier_init(&bar.empty_v[s], v3pw_ring::kConsumerWarps);
  }
  fence_mbarrier_init();
}

// Keys [t * BN, t * BN + BN) of K or V into `tile` (one stage), completing on `full`. Copy j
// (lanes take j = lane, lane + 32, ...) is page j / 2, column half j % 2.
template <typename T>
__device__ __forceinline__ void fill(const Blk<T>& b, const CUtensorMap* page_map,
                                     const CUtensorMap* row_map, unsigned char* tile,
                                     uint64_t* full, int t, int lane) {
  const int bs = b.a.block_size, shift = b.a.block_shift;
  if (lane == 0) mbarrier_arrive_expect_tx(full, kTileBytes);
  __syncwarp();  // the bytes are expected before any copy can complete them
  for (int j = lane; j < 2 * (BN >> shift); j += 32) {
    const int p = j >> 1, half = j & 1, c0 = half * 64;
    const int key0 = t * BN + p * bs;
    unsigned char* const dst = tile + half * BN * 128 + p * bs * 128;
    if (key0 >= b.kv_end) {
      tma_load_3d(dst, page_map, c0, b.kvh, -bs, full);  // wholly past the end: zeros
      continue;
    }
    const int slot0 = b.table[key0 >> shift] * bs;
    if (key0 + bs <= b.kv_end) {
      tma_load_3d(dst, page_map, c0, b.kvh, slot0, full);
    } else {  // the page the end cuts: row by row, zeros past the end
      for (int r = 0; r < bs; ++r)
        tma_load_3d(dst + r * 128, row_map, c0, b.kvh, key0 + r < b.kv_end ? slot0 + r : -1,
                    full);
    }
  }
}

// The producer warp on one work item: K(t) and V(t) of each of its key tiles at ring positions
// g0 + t (the fills before it, of earlier items of a persistent block), each after the stage's
// previous fill was released.
template <typename T>
__device__ void produce_tma(const Blk<T>& b, Barriers& bar, const Maps& maps, int g0) {
  const int lane = threadIdx.x % 32;
  for (int t = 0; t < b.n_tiles; ++t) {
    const int g = g0 + t, st = g % kStages;
    const uint32_t prev_parity = ((g / kStages) + 1) & 1;  // of fill g - kStages's release
    if (g >= kStages) mbarrier_wait_parity(&bar.empty_k[st], prev_parity);
    fill(b, &maps.k_page, &maps.k_row, b.k_tile(st), &bar.full_k[st], t, lane);
    if (g >= kStages) mbarrier_wait_parity(&bar.empty_v[st], prev_parity);
    fill(b, &maps.v_page, &maps.v_row, b.v_tile(st), &bar.full_v[st], t, lane);
  }
}

// Work item i (i < row_tiles x num_seqs x num_kv_heads) as Block::set_item's arguments: the
// longest row tiles first, then sequence, then KV head.
// (Args::tile_items_div divides by the launch's num_seqs x num_kv_heads.)
template <typename T>
__device__ __forceinline__ void take_item(Blk<T>& b, int i) {
  const int tile = b.a.tile_items_div.div(i);
  const int rem = i - tile * b.a.tile_items_div.d;
  const int s = b.a.kv_heads_div.div(rem);
  b.set_item(tile, s, rem - s * b.a.num_kv_heads);
}

// Calls fn(g) for each of this block's work items that has rows (blockIdx.x, + gridDim.x, ...),
// with b set to the item and g the ring position of its tile 0: producer and consumers walk the
// same items, so they count the same ring positions.
template <typename T, typename F>
__device__ __forceinline__ void for_each_item(Blk<T>& b, int num_seqs, F&& fn) {
  const int n_items = b.a.row_tiles * num_seqs * b.a.num_kv_heads;
  int g = 0;
  for (int i = blockIdx.x; i < n_items; i += gridDim.x) {
    take_item(b, i);
    if (!b.live) continue;  // a row tile past this sequence's rows
    fn(g);
    g += b.n_tiles;
  }
}

// A consumer warpgroup's 64 Q rows of the item at ring position g by cp.async, made visible to
// its wgmmas (async proxy) before its first S; the warpgroup meets at named barrier
// kBarrier + wg. For a later item of a persistent block (g > 0) the warpgroup first syncs on the
// same barrier, so that no warp overwrites Q while another warp's part of the previous item's
// last S might still read it. kBarrier: ids 1 and 2 by default; v3tmapp, whose turns take 1 and
// 2, passes 3 (ids 3 and 4).
constexpr int kQBarrier = 1;
template <int kBarrier = kQBarrier, typename T>
__device__ __forceinline__ void load_q_warpgroup(const Blk<T>& b, int g) {
  if (g > 0) named_barrier_sync(kBarrier + b.wg, 128);
  b.load_q_rows(b.wg_r0, 64, threadIdx.x % 128, 128);
  cp_async_commit();
  cp_async_wait<0>();
  fence_proxy_async_smem();
  named_barrier_sync(kBarrier + b.wg, 128);
}

// ---- host ----------------------------------------------------------------------------------

// Whether the TMA ring takes this launch: head_dim 128, block_size a power of two in [8, BN] (a
// page box starts on a 1024-byte boundary of the tile and the pages divide the tile).
inline bool tma_ring_fits(const PagedAttentionParams& p) {
  const int bs = p.block_size;
  return p.head_dim == D && (bs & (bs - 1)) == 0 && bs >= 8 && bs <= BN;
}

// Persistent blocks (one per SM walking the items) or one block per item: persistent where more
// than half of the grid's (row tile, sequence) pairs have rows, or always / never with
// FOLIO_PREFILL_PERSISTENT=1 / 0.
inline bool persistent_launch(const PrefillPlan& plan, int64_t pairs) {
  static const int mode = [] {
    const char* e = std::getenv("FOLIO_PREFILL_PERSISTENT");
    const std::string v = e != nullptr ? e : "";
    return v == "0" ? 0 : v == "1" ? 1 : -1;
  }();
  return mode == 1 || (mode == -1 && 2 * plan.live_row_tiles_128 > pairs);
}

// Host: the four maps of one launch (layer caches of p).
inline Status encode_maps(Maps* maps, const PagedAttentionParams& p) {
  FOLIO_RETURN_IF_ERROR(
      cached_paged_cache_map(&maps->k_page, p.dtype, p.k_cache, p.num_kv_heads, D, p.block_size));
  FOLIO_RETURN_IF_ERROR(
      cached_paged_cache_map(&maps->v_page, p.dtype, p.v_cache, p.num_kv_heads, D, p.block_size));
  FOLIO_RETURN_IF_ERROR(
      cached_paged_cache_map(&maps->k_row, p.dtype, p.k_cache, p.num_kv_heads, D, 1));
  return cached_paged_cache_map(&maps->v_row, p.dtype, p.v_cache, p.num_kv_heads, D, 1);
}

}  // namespace folio::cuda::prefill_detail::v3tma_ring
