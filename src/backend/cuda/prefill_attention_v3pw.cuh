// Internal to prefill_attention_v3pw.cu, prefill_attention_v3pwpp.cu and
// prefill_attention_v3tma.cu: the producer warp, the K/V stage ring with its mbarriers and the
// consumer warpgroups' loop, shared by the warp-specialised v3 kernels (the protocol is
// described in prefill_attention_v3pw.cu; v3tma fills the same ring by TMA).
#pragma once

#include "backend/cuda/mbarrier_ptx.cuh"
#include "backend/cuda/prefill_attention_v3.cuh"

namespace folio::cuda::prefill_detail::v3pw_ring {

using v3k::Args;

constexpr int D = 128;
constexpr int BN = 128;                             // keys per tile
constexpr int kStages = 3;                          // stage ring depth
constexpr int kConsumerWarps = v3k::kThreads / 32;  // 8: arrivals that release a stage
constexpr int kProducerWarp = kConsumerWarps;       // warp 8
constexpr int kThreads = v3k::kThreads + 32;        // 288
constexpr int kSlots = BN / 32;                     // keys of a tile per producer lane

template <typename T>
using Blk = v3k::Block<T, D, kStages, false, BN>;
using Cfg = v3k::Cfg<D, kStages, false, BN>;

// The ring's barriers, right after the V tiles (8-byte aligned: the tiles end on 1024).
struct Barriers {
  uint64_t full_k[kStages], full_v[kStages], empty_k[kStages], empty_v[kStages];
};
constexpr size_t kSmemBytes = Cfg::kBytes + sizeof(Barriers);

template <typename T>
__device__ __forceinline__ Barriers& barriers(const Blk<T>& b) {
  return *reinterpret_cast<Barriers*>(b.q_s + Cfg::kBytes - 1024);
}

// v3tmaq, whose producer fills Q too: per consumer warpgroup w, full_q[w] (the producer's
// arrive.expect_tx and its copies) and empty_q[w] (one arrival per warp of w), right after the
// ring's barriers (a launch adds sizeof(QBarriers) to kSmemBytes). item[w]: the work item whose Q
// completes full_q[w]'s phase (-1: no more items), written by the producer before its arrival.
struct QBarriers {
  uint64_t full_q[2], empty_q[2];
  int item[2];
};

template <typename T>
__device__ __forceinline__ QBarriers& q_barriers(const Blk<T>& b) {
  return *reinterpret_cast<QBarriers*>(&barriers(b) + 1);
}

// Thread 0 initialises the ring's barriers; the caller then runs __syncthreads.
__device__ __forceinline__ void init_barriers(Barriers& bar) {
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kStages; ++s) {
    mbarrier_init(&bar.full_k[s], 32);  // one cp.async-triggered arrival per producer lane
    mbarrier_init(&bar.full_v[s], 32);
    mbarrier_init(&bar.empty_k[s], kConsumerWarps);  // lane 0 of each consumer warp
    mbarrier_init(&bar.empty_v[s], kConsumerWarps);
  }
}

// ---- producer warp ---------------------------------------------------------------------------
// Lane l copies 16-byte chunk l % 16 of rows 2 i + l / 16: a half-warp reads one 256-byte row
// per instruction.

// Q's 128 rows (rows past the end zero-filled).
template <typename T>
__device__ __forceinline__ void produce_q(const Blk<T>& b, int lane) {
  const int half = lane / 16, c = (lane % 16) * 8;
#pragma unroll 4
  for (int i = 0; i < v3k::BM / 2; ++i) {
    const int r = 2 * i + half, gr = b.r0 + r;
    const bool ok = gr <= b.last_row;
    const int64_t qrow = ok ? b.a.q_row(b.qs, b.kvh, gr) : 0;
    cp_async_16(b.q_s + v3k::sw128_offset(r, c, v3k::BM), b.a.q + qrow * D + c, ok);
  }
}

// Cache slots of keys t * BN + lane + 32 k (k < kSlots); -1 for keys >= kv_end. Slots are token
// indices of the paged cache (physical block * block_size + offset): < 2^31, far beyond any
// cache that fits device memory.
template <typename T>
__device__ __forceinline__ void tile_slots(const Blk<T>& b, int t, int lane, int (&slot)[kSlots]) {
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    const int j = t * BN + lane + 32 * k;
    const int blk = b.a.block_shift >= 0 ? j >> b.a.block_shift : j / b.a.block_size;
    slot[k] = j < b.kv_end ? b.table[blk] * b.a.block_size + (j - blk * b.a.block_size) : -1;
  }
}

// One K or V tile of keys (slots from tile_slots) into `dst`, 128-byte swizzled; keys past
// kv_end zero-filled (masked scores; a zero V row keeps 0 * V finite). Each row's slot comes
// from the lane that looked it up.
template <typename T>
__device__ __forceinline__ void produce_tile(const Blk<T>& b, const T* cache, unsigned char* dst,
                                             const int (&slot)[kSlots], int lane) {
  const int half = lane / 16, c = (lane % 16) * 8;
  const int64_t slot_stride = static_cast<int64_t>(b.a.num_kv_heads) * D;
  const int64_t head_off = static_cast<int64_t>(b.kvh) * D + c;
#pragma unroll
  for (int k = 0; k < kSlots; ++k)
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int s = __shfl_sync(0xffffffffu, slot[k], 2 * i + half);
      const bool ok = s >= 0;
      const int64_t off = ok ? s * slot_stride + head_off : 0;
      cp_async_16(dst + v3k::sw128_offset(32 * k + 2 * i + half, c, BN), cache + off, ok);
    }
}

// The producer warp's whole life: Q, then K(t) and V(t) for every key tile of the block.
template <typename T>
__device__ void produce(const Blk<T>& b, Barriers& bar) {
  const int lane = threadIdx.x % 32;
  produce_q(b, lane);  // completes with tile 0's K: an arrival covers all earlier copies
  for (int t = 0; t < b.n_tiles; ++t) {
    const int st = t % kStages;
    const uint32_t prev_parity = ((t / kStages) + 1) & 1;  // of fill u - 1 = tile t - kStages
    int slot[kSlots];
    tile_slots(b, t, lane, slot);
    if (t >= kStages) mbarrier_wait_parity(&bar.empty_k[st], prev_parity);
    produce_tile(b, b.a.k_cache, b.k_tile(st), slot, lane);
    cp_async_mbarrier_arrive_noinc(&bar.full_k[st]);
    if (t >= kStages) mbarrier_wait_parity(&bar.empty_v[st], prev_parity);
    produce_tile(b, b.a.v_cache, b.v_tile(st), slot, lane);
    cp_async_mbarrier_arrive_noinc(&bar.full_v[st]);
  }
  // Let this thread's copies finish before it exits (the consumers wait for them anyway).
  cp_async_commit();
  cp_async_wait<0>();
}

// ---- consumer side ---------------------------------------------------------------------------

// Releases a stage: every warp of the warpgroup is past the wgmma wait that retired its reads.
__device__ __forceinline__ void release(uint64_t* bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbarrier_arrive(bar);
}

// Waits for a fill of the stage, then makes it visible to wgmma: the copies are generic-proxy
// writes that this thread acquired through the barrier, wgmma reads through the async proxy,
// and the producer never waits on its copies, so it cannot fence them itself.
template <bool kFence = true>
__device__ __forceinline__ void acquire(uint64_t* bar, uint32_t parity) {
  mbarrier_wait_parity(bar, parity);
  if constexpr (kFence) fence_proxy_async_smem();
}

// A tile this warpgroup does not compute (above its rows) but that the producer refills later
// (t + kStages < n_tiles): release it in its turn. Waiting on the full barriers first keeps the
// arrivals in the right phase: before the producer has refilled the stage, an arrival would count
// toward the stage's previous phase and complete it without the other warpgroup's release.
__device__ __forceinline__ void release_skipped(Barriers& bar, int st, uint32_t parity,
                                                bool release_v = true) {
  mbarrier_wait_parity(&bar.full_k[st], parity);
  release(&bar.empty_k[st]);
  mbarrier_wait_parity(&bar.full_v[st], parity);
  if (release_v) release(&bar.empty_v[st]);
}

// ---- the consumer warpgroups' loop (v3pw and v3tma) ------------------------------------------

// One key tile of this warpgroup (v3n128's tile step with the stage handshakes). kHalf: only
// keys [0, 64) of the tile are at or before some row of the warpgroup; the two instances are
// separate straight-line paths (a per-wgmma choice makes ptxas serialize every wgmma, C7520).
// kQTileToRegs: S reads Q from the warpgroup's registers (qf) instead of the Q tile.
// release_v false: V(t)'s stage is kept (v3tmaq stages O there; its epilogue releases it).
template <bool kHalf, bool kFence, bool kQTileToRegs, typename T>
__device__ __forceinline__ void tile_step(const Blk<T>& b, Barriers& bar, float (&o)[D / 2],
                                          float (&m)[2], float (&l)[2],
                                          const uint32_t (&qf)[D / 16][4], int t, int st,
                                          uint32_t parity, bool release_v) {
  float sc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) sc[i] = 0.f;
  acquire<kFence>(&bar.full_k[st], parity);  // K(t), and Q with tile 0
  wgmma_fence_operand(sc);
  wgmma_fence();
  if constexpr (kQTileToRegs) {
    b.issue_qk(sc, qf, st, kHalf);
  } else {
    b.issue_qk(sc, st, kHalf);
  }
  wgmma_wait<0>();
  wgmma_fence_operand(sc);
  release(&bar.empty_k[st]);
  constexpr int kKeys = kHalf ? 64 : BN;  // keys of the tile some row of the warpgroup sees
  float alpha[2];
  b.template softmax<kKeys>(sc, t, m, l, alpha);
  b.rescale(o, alpha);
  uint32_t pf[BN / 16][4];  // of a half tile only pf[0, 4) is set and read
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) v3k::pack_p<T>(pf[kk], sc, kk);
  acquire<kFence>(&bar.full_v[st], parity);
  wgmma_fence_operand(o);
  wgmma_fence();
  b.issue_pv(o, pf, st, kKeys / 16);
  wgmma_wait<0>();
  wgmma_fence_operand(o);
  if (release_v) release(&bar.empty_v[st]);
}

// The block's key tiles, then O handed to store(o, l) (l: this thread's partial row sums). kFence:
// the fills are cp.async (generic-proxy) writes that wgmma may read only after a proxy fence; TMA
// fills are async-proxy writes already and need none. A persistent block (v3tma) runs one item
// after another on the same ring: g0 is the ring position (fills so far) of this item's tile 0,
// and more_items says the producer goes on filling after this item's tiles, so every skipped
// tile must be released. kQTileToRegs (v3tmaq): Q came from the producer's TMA copy; the
// warpgroup copies its rows into registers (S's A operand) and releases the Q tile at once, so
// the producer can fetch the next item's Q while this item runs. (Released after the item's last
// S or P V instead, as session 13 did, the next item waited for its Q: 8 x 1024 325 against 344
// TFLOP/s, NOTES.md.) hold_last_v: the last tile's V stage is not released (it is in every case
// waited for, so its fill has landed): store() takes it over.
template <bool kFence, bool kQTileToRegs, typename T, typename Store>
__device__ void consume_tiles_then(const Blk<T>& b, Barriers& bar, int g0, bool more_items,
                                   bool hold_last_v, Store&& store) {
  const int n_wg = b.wg_tiles();  // warpgroup-uniform
  uint32_t qf[D / 16][4];         // set and read only with kQTileToRegs
  if constexpr (kQTileToRegs) {
    b.load_q_frags_smem(qf);
    release(&q_barriers(b).empty_q[b.wg]);
  }
  float o[D / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  for (int t = 0; t < b.n_tiles; ++t) {
    const int st = (g0 + t) % kStages;
    const uint32_t parity = ((g0 + t) / kStages) & 1;
    const bool release_v = !hold_last_v || t + 1 < b.n_tiles;
    if (t < n_wg) {
      // Warpgroup-uniform: keys t * BN + 64 .. are past every row of this warpgroup.
      if (t * BN + 64 > b.wg_max_pos) {
        tile_step<true, kFence, kQTileToRegs>(b, bar, o, m, l, qf, t, st, parity, release_v);
      } else {
        tile_step<false, kFence, kQTileToRegs>(b, bar, o, m, l, qf, t, st, parity, release_v);
      }
    } else if (more_items || t + kStages < b.n_tiles || !release_v) {
      release_skipped(bar, st, parity, release_v);  // not needed here, but refilled or held
    }
  }
  store(o, l);
}

template <bool kFence = true, bool kQTileToRegs = false, typename T>
__device__ void consume_tiles(const Blk<T>& b, Barriers& bar, int g0 = 0,
                              bool more_items = false) {
  consume_tiles_then<kFence, kQTileToRegs>(
      b, bar, g0, more_items, /*hold_last_v=*/false,
      [&](const float (&o)[D / 2], const float (&l)[2]) { b.store(o, l); });
}

}  // namespace folio::cuda::prefill_detail::v3pw_ring
