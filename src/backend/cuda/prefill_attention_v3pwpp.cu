// Prefill attention v3pwpp: v3pw (prefill_attention_v3pw.cu: producer warp, 3-stage K/V ring
// under mbarriers, 128-key tiles at head_dim 128) with FlashAttention-3's ping-pong of the two
// consumer warpgroups.
//
// Why: in v3pw nothing stops the two warpgroups from drifting into step, both running their
// softmax at once while the tensor cores idle. Here they take turns issuing their GEMMs, so one
// warpgroup's softmax runs while the other's GEMMs occupy the tensor cores:
//   tensor cores: [PV0(t-1) S0(t)] [PV1(t-1) S1(t)] [PV0(t) S0(t+1)] [PV1(t) S1(t+1)] ...
//   warpgroup 0:   issue, wait      softmax(t)       issue, wait      softmax(t+1)
//   warpgroup 1:   softmax(t-1)     issue, wait      softmax(t)       issue, wait
//
// Per warpgroup, turn t (t = 0 .. n_tiles, the same count for both warpgroups, whatever rows
// they have, so that the turn signals balance):
//   acquire full_k(t) (if S(t) is computed) and full_v(t - 1) (if P(t-1)·V(t-1) is);
//   bar.sync on its own turn barrier (id 1 + wg, 256 threads);
//   issue P(t-1)·V(t-1) (the P kept in registers since the last turn), then S(t) = Q·K(t)^T;
//   bar.arrive on the other warpgroup's turn barrier (warpgroup 1 skips it on its last turn: it
//     signalled warpgroup 0's first turn before the loop);
//   wait for both; release V(t-1) and K(t); softmax of S(t), O rescaled by it (O now holds the
//     tiles < t), P(t) packed for the next turn.
// Turn barriers pair one sync of 128 threads with one arrive of 128: warpgroup 0's turn t
// completes with warpgroup 1's arrive of turn t - 1 (or the one before the loop), warpgroup 1's
// with warpgroup 0's arrive of turn t. The P·V of a tile thus trails its S by a turn, as in v3p,
// without its extra stage: V(t-1) stays in its stage until then (the ring still holds 3 tiles).
// Deadlock-free: a warpgroup at turn t has the other one past turn t - 2, so every stage it
// waits on (K(t) needs tile t - 3 released, V(t-1) tile t - 4) has been released by both.
//
// The half-tile path of v3n128 (a warpgroup whose rows end before key 64 of its last tile
// computes only its first 64 keys) applies to S of the last tile and to its P·V a turn later;
// each combination of GEMMs in a turn is its own straight-line instance (see v3n128, C7520).
//
// Shared memory and the producer as v3pw (225 KB + 96 bytes); 288 threads. head_dim 128 only
// (others as v3n128). Not yet run on a GPU; FOLIO_PREFILL_KERNEL=v3pwpp selects it.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/named_barrier_ptx.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3pw.cuh"
#include "backend/cuda/prefill_attention_v3_launch.cuh"

namespace folio::cuda::prefill_detail {
namespace v3pwpp {
namespace {

using v3k::Args;
using v3pw_ring::Barriers;
using v3pw_ring::BN;
using v3pw_ring::D;
using v3pw_ring::kStages;
using v3pw_ring::kThreads;
template <typename T>
using Blk = v3pw_ring::Blk<T>;

constexpr int kTurnBarrier = 1;              // warpgroup wg's turn: named barrier 1 + wg
constexpr int kTurnThreads = v3k::kThreads;  // 128 that sync + 128 that arrive

// One turn (see above). kPv: P(t-1)·V(t-1) is computed; kS: S(t) is; kHalf: the last tile's
// half path, for S(t) when kS, else for the P·V. arrive_other: signal the other warpgroup.
template <bool kPv, bool kS, bool kHalf, typename T>
__device__ __forceinline__ void turn(const Blk<T>& b, Barriers& bar, float (&o)[D / 2],
                                     float (&m)[2], float (&l)[2], uint32_t (&pf)[BN / 16][4],
                                     int t, bool arrive_other) {
  const int tp = t > 0 ? t - 1 : 0;  // the P·V's tile (kPv: t >= 1)
  const int st_s = t % kStages, st_pv = tp % kStages;
  const uint32_t parity_s = (t / kStages) & 1, parity_pv = (tp / kStages) & 1;
  if constexpr (kS) v3pw_ring::acquire(&bar.full_k[st_s], parity_s);
  if constexpr (kPv) v3pw_ring::acquire(&bar.full_v[st_pv], parity_pv);
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

template <typename T>
__device__ void consume(const Blk<T>& b, Barriers& bar) {
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
        turn<true, true, true>(b, bar, o, m, l, pf, t, arrive_other);
      } else {
        turn<true, true, false>(b, bar, o, m, l, pf, t, arrive_other);
      }
    } else if (do_s) {  // t == 0
      if (half) {
        turn<false, true, true>(b, bar, o, m, l, pf, t, arrive_other);
      } else {
        turn<false, true, false>(b, bar, o, m, l, pf, t, arrive_other);
      }
    } else if (do_pv) {  // t == n_wg: the last P·V
      if (half) {
        turn<true, false, true>(b, bar, o, m, l, pf, t, arrive_other);
      } else {
        turn<true, false, false>(b, bar, o, m, l, pf, t, arrive_other);
      }
    } else {
      turn<false, false, false>(b, bar, o, m, l, pf, t, arrive_other);
    }
    if (!do_s && t + kStages < b.n_tiles)
      v3pw_ring::release_skipped(bar, t % kStages, (t / kStages) & 1);
  }
  b.store(o, l);
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) prefill_v3pwpp_kernel(Args<T> a) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma needs sm_90a; the build targets it (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Blk<T> b(a, smem_raw);  // warp 8 gets a warpgroup index of 2, unused
  if (!b.live) return;
  Barriers& bar = v3pw_ring::barriers(b);
  v3pw_ring::init_barriers(bar);
  __syncthreads();  // the only block-wide barrier: the mbarriers exist before anyone uses them
  if (threadIdx.x / 32 == v3pw_ring::kProducerWarp) {
    v3pw_ring::produce(b, bar);
  } else {
    consume(b, bar);
  }
#endif
}

template <typename T>
Status launch(const Args<T>& a, int num_seqs, void* stream) {
  auto kernel = prefill_v3pwpp_kernel<T>;
  constexpr size_t bytes = v3pw_ring::kSmemBytes;
  static_assert(bytes <= 227 * 1024, "shared memory per block");
  return v3k::launch_grid<T>(kernel, a, num_seqs, kThreads, bytes, stream, "prefill_v3pwpp_kernel");
}

}  // namespace
}  // namespace v3pwpp

Status launch_v3pwpp(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  if (p.head_dim != 128) return launch_v3n128(p, plan, stream);
  return v3k::with_row_tiles(p, plan, [&]<typename T>(const v3k::Args<T>& a) {
    return v3pwpp::launch<T>(a, p.num_seqs, stream);
  });
}

}  // namespace folio::cuda::prefill_detail
