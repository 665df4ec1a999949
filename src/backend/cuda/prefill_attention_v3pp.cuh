// Internal to prefill_attention_v3pwpp.cu and prefill_attention_v3tmapp.cu: FlashAttention-3's
// ping-pong of the two consumer warpgroups over v3pw's K/V stage ring (the ring, its barriers and
// Block in prefill_attention_v3pw.cuh). v3pwpp runs it on the cp.async-filled ring, one item per
// block; v3tmapp on the TMA-filled ring of a persistent block, one item after another.
//
// Per warpgroup and item, turn t (t = 0 .. n_tiles, the same count for both warpgroups, whatever
// rows they have, so that the turn signals balance):
//   acquire full_k(t) (if S(t) is computed) and full_v(t - 1) (if P(t-1)·V(t-1) is);
//   bar.sync on its own turn barrier (id 1 + wg, 256 threads);
//   issue P(t-1)·V(t-1) (the P kept in registers since the last turn), then S(t) = Q·K(t)^T;
//   bar.arrive on the other warpgroup's turn barrier (warpgroup 1 skips it on its last turn: it
//     signalled warpgroup 0's first turn before the loop);
//   wait for both; release V(t-1) and K(t); softmax of S(t), O rescaled by it (O now holds the
//     tiles < t), P(t) packed for the next turn;
//   a tile above the warpgroup's rows that the producer refills later is released in its turn.
// Turn barriers pair one sync of 128 threads with one arrive of 128: warpgroup 0's turn t
// completes with warpgroup 1's arrive of turn t - 1 (or the one before the loop), warpgroup 1's
// with warpgroup 0's arrive of turn t. Per item each barrier sees n_tiles + 1 syncs and as many
// arrives, so a persistent block starts every item with both balanced; and warpgroup 1's
// pre-arrive for the next item comes after its last turn of this one, which needed warpgroup 0's
// arrive of that turn, i.e. after warpgroup 0's last sync: it cannot complete a sync of this item.
// Deadlock-free: a warpgroup at turn t has the other one past turn t - 2, so every stage it
// waits on (K(t) needs tile t - 3 released, V(t-1) tile t - 4) has been released by both; tiles
// of an earlier item of the block were all released before its store.
//
// Ring positions: tile t of the item is fill g0 + t of the ring (g0 = 0 for one item per block;
// for a persistent block, the fills of its earlier items). Its stage is (g0 + t) % kStages and
// the parity of its fill ((g0 + t) / kStages) & 1.
//
// The half-tile path of v3n128 (a warpgroup whose rows end before key 64 of its last tile
// computes only its first 64 keys) applies to S of the last tile and to its P·V a turn later;
// each combination of GEMMs in a turn is its own straight-line instance (see v3n128, C7520).
#pragma once

#include "backend/cuda/named_barrier_ptx.cuh"
#include "backend/cuda/prefill_attention_v3pw.cuh"

namespace folio::cuda::prefill_detail::v3pp {

using v3pw_ring::Barriers;
using v3pw_ring::BN;
using v3pw_ring::D;
using v3pw_ring::kStages;
template <typename T>
using Blk = v3pw_ring::Blk<T>;

constexpr int kTurnBarrier = 1;              // warpgroup wg's turn: named barrier 1 + wg
constexpr int kTurnThreads = v3k::kThreads;  // 128 that sync + 128 that arrive

// One turn (see above) of the item whose tile 0 is ring position g0. kPv: P(t-1)·V(t-1) is
// computed; kS: S(t) is; kHalf: the last tile's half path, for S(t) when kS, else for the P·V.
// kFence: the fills are cp.async (generic-proxy) writes, fenced for wgmma after the wait (TMA
// writes are async-proxy already). arrive_other: signal the other warpgroup.
template <bool kPv, bool kS, bool kHalf, bool kFence, typename T>
__device__ __forceinline__ void turn(const Blk<T>& b, Barriers& bar, float (&o)[D / 2],
                                     float (&m)[2], float (&l)[2], uint32_t (&pf)[BN / 16][4],
                                     int t, int g0, bool arrive_other) {
  const int gs = g0 + t, gpv = g0 + (t > 0 ? t - 1 : 0);  // the P·V's tile (kPv: t >= 1)
  const int st_s = gs % kStages, st_pv = gpv % kStages;
  const uint32_t parity_s = (gs / kStages) & 1, parity_pv = (gpv / kStages) & 1;
  if constexpr (kS) v3pw_ring::acquire<kFence>(&bar.full_k[st_s], parity_s);
  if constexpr (kPv) v3pw_ring::acquire<kFence>(&bar.full_v[st_pv], parity_pv);
  named_barrier_sync(kTurnBarrier + b.wg, kTurnThreads);
  float sc[BN / 2];
  if constexpr (kPv || kS) {
    if constexpr (kS) {
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) sc[i] = 0.f;
      wgmma_fence_operand(sc);
    }
    if constexpr (kPv) wgmma_fence_operand(o);
    wgmma_fence();  // after the register writes of sc, o (rescale) and pf
    if constexpr (kPv) b.issue_pv(o, pf, st_pv, kHalf && !kS ? 4 : BN / 16);
    if constexpr (kS) b.issue_qk(sc, st_s, kHalf);
  }
  if (arrive_other) named_barrier_arrive(kTurnBarrier + 1 - b.wg, kTurnThreads);
  if constexpr (kPv || kS) wgmma_wait<0>();
  if constexpr (kPv) {
    wgmma_fence_operand(o);
    v3pw_ring::release(&bar.empty_v[st_pv]);
  }
  if constexpr (kS) {
    wgmma_fence_operand(sc);
    v3pw_ring::release(&bar.empty_k[st_s]);
    constexpr int kKeys = kHalf ? 64 : BN;  // keys of the tile some row of the warpgroup sees
    float alpha[2];
    b.template softmax<kKeys>(sc, t, m, l, alpha);
    b.rescale(o, alpha);  // O holds the tiles < t (their P·V retired above)
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) v3k::pack_p<T>(pf[kk], sc, kk);
  }
}

// One item of this warpgroup (its n_tiles + 1 turns), then O stored. g0: the ring position of
// tile 0; more_items: the producer goes on filling after this item's tiles (a persistent block),
// so every tile of the item this warpgroup skips must be released, not only those the producer
// refills within the item (t + kStages < n_tiles). Either way only tiles t < n_tiles: the last
// turn, t = n_tiles, has no tile. Position g0 + n_tiles is the next item's tile 0, which that
// item's own turn releases (a second release runs the stage's empty barrier a phase ahead of the
// producer), or, after the block's last item, a fill that never comes (the wait on its full
// barrier never returns). v3tmapp's first version had that and hung on the GPU.
template <bool kFence, typename T>
__device__ void consume(const Blk<T>& b, Barriers& bar, int g0 = 0, bool more_items = false) {
  const int n_wg = b.wg_tiles();  // warpgroup-uniform, as everything below
  // Only the warpgroup's last tile can be half: keys t * BN + 64 .. past all of its rows.
  const bool half_last = n_wg > 0 && (n_wg - 1) * BN + 64 > b.wg_max_pos;
  float o[D / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  uint32_t pf[BN / 16][4];  // P of the previous tile, the A operand of its P·V
  if (b.wg == 1) named_barrier_arrive(kTurnBarrier, kTurnThreads);  // warpgroup 0 goes first
  for (int t = 0; t <= b.n_tiles; ++t) {
    const bool arrive_other = b.wg == 0 || t < b.n_tiles;
    const bool do_s = t < n_wg, do_pv = t >= 1 && t <= n_wg;
    const bool half = half_last && (do_s ? t == n_wg - 1 : t == n_wg);
    if (do_s && do_pv) {
      if (half) {
        turn<true, true, true, kFence>(b, bar, o, m, l, pf, t, g0, arrive_other);
      } else {
        turn<true, true, false, kFence>(b, bar, o, m, l, pf, t, g0, arrive_other);
      }
    } else if (do_s) {  // t == 0
      if (half) {
        turn<false, true, true, kFence>(b, bar, o, m, l, pf, t, g0, arrive_other);
      } else {
        turn<false, true, false, kFence>(b, bar, o, m, l, pf, t, g0, arrive_other);
      }
    } else if (do_pv) {  // t == n_wg: the last P·V
      if (half) {
        turn<true, false, true, kFence>(b, bar, o, m, l, pf, t, g0, arrive_other);
      } else {
        turn<true, false, false, kFence>(b, bar, o, m, l, pf, t, g0, arrive_other);
      }
    } else {
      turn<false, false, false, kFence>(b, bar, o, m, l, pf, t, g0, arrive_other);
    }
    // = t < n_tiles && (more_items || t + kStages < n_tiles), written so that v3pwpp's code
    // (more_items false) is the same as before this loop was shared.
    if (!do_s && (more_items ? t < b.n_tiles : t + kStages < b.n_tiles)) {
      const int g = g0 + t;
      v3pw_ring::release_skipped(bar, g % kStages, (g / kStages) & 1);
    }
  }
  b.store(o, l);
}

}  // namespace folio::cuda::prefill_detail::v3pp
