// Prefill attention v3tmap: v3tma (prefill_attention_v3tma.cu: TMA-filled 3-stage K/V ring,
// persistent blocks, 128-key tiles at head_dim 128) with each consumer warpgroup pipelining its
// own GEMMs against its softmax, as FlashAttention-3's intra-warpgroup overlap does.
//
// Why: in v3tma a warpgroup's tensor-core work and its softmax alternate (S, wait, softmax, P·V,
// wait), so each warpgroup keeps the tensor cores busy only while the other one happens to be in
// its softmax. Here step t issues S(t) = Q·K(t)^T and then P(t-1)·V(t-1) as two commit groups,
// waits for S(t) only (wait_group 1), runs the softmax of S(t) while P·V still runs, then waits
// for P·V, rescales O by the new maximum and packs P(t) for the next step:
//   t = 0:          S(0); softmax(0); P(0) packed
//   t = 1 .. n-1:   S(t) + P(t-1)·V(t-1) in flight; softmax(t) under P·V; O rescaled; P(t)
//   after:          P(n-1)·V(n-1)
// Only the warpgroup's last tile can be a half tile (keys 64.. past all its rows): its S is
// m64n64 and its P·V 4 k-steps. Each combination is its own straight-line instance (a wgmma
// under a runtime branch makes ptxas serialize them, C7520).
//
// Registers: S (64 floats), O (64) and P (32 packed) are live at once, more than 288 threads x
// 224 registers allow (v3pwpp's ptxas reported wgmma serialised for lack of registers). So the
// producer is a whole warpgroup (384 threads, 168 registers each at launch) that gives its
// registers back with setmaxnreg.dec 24, and the consumers take 240 (128 x 24 + 256 x 240 =
// 64512 of the 65536). Only the producer's first warp issues copies; the other three exit.
//
// Ring protocol, Q load, persistence and the zero fill past the end: as v3tma. A consumer step
// acquires K(t) and V(t - 1), releases K(t) after S(t) retires and V(t - 1) after P·V retires.
// Deadlock-free: the producer's fill of K(t) needs K(t - 3) released (step t - 3) and V(t - 1)
// needs V(t - 4) (step t - 3) by both warpgroups, and neither waits for the other otherwise.
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3_launch.cuh"
#include "backend/cuda/prefill_attention_v3tma.cuh"
#include "backend/cuda/prefill_attention_v3tma_launch.cuh"
#include "backend/cuda/prefill_attention_v3tma_wg.cuh"

namespace folio::cuda::prefill_detail {
namespace v3tmap {
namespace {

using v3k::Args;
using v3pw_ring::acquire;
using v3pw_ring::Barriers;
using v3pw_ring::BN;
using v3pw_ring::Blk;
using v3pw_ring::D;
using v3pw_ring::kStages;
using v3pw_ring::release;

constexpr int kThreads = v3tma_ring::kWgThreads;  // prefill_attention_v3tma_wg.cuh

struct Slot {  // a tile's ring stage and the parity of its fill
  int st;
  uint32_t parity;
  __device__ explicit Slot(int g) : st(g % kStages), parity((g / kStages) & 1) {}
};

// Step 0: S(0), its softmax, P(0). kHalf: tile 0 is also the warpgroup's last and a half tile.
template <bool kHalf, typename T>
__device__ __forceinline__ void first_step(const Blk<T>& b, Barriers& bar, float (&m)[2],
                                           float (&l)[2], uint32_t (&pf)[BN / 16][4], int g0) {
  const Slot k(g0);
  float sc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) sc[i] = 0.f;
  acquire<false>(&bar.full_k[k.st], k.parity);
  wgmma_fence_operand(sc);
  wgmma_fence();
  b.issue_qk(sc, k.st, kHalf);
  wgmma_wait<0>();
  wgmma_fence_operand(sc);
  release(&bar.empty_k[k.st]);
  constexpr int kKeys = kHalf ? 64 : BN;
  float alpha[2];  // O is still zero: nothing to rescale
  b.template softmax<kKeys>(sc, 0, m, l, alpha);
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) v3k::pack_p<T>(pf[kk], sc, kk);
}

// Step t >= 1: S(t) and P(t-1)·V(t-1) in flight, softmax(t) under the P·V. kHalf: tile t is the
// warpgroup's last and a half tile (tile t - 1 is then a whole one).
template <bool kHalf, typename T>
__device__ __forceinline__ void step(const Blk<T>& b, Barriers& bar, float (&o)[D / 2],
                                     float (&m)[2], float (&l)[2], uint32_t (&pf)[BN / 16][4],
                                     int t, int g0) {
  const Slot k(g0 + t), v(g0 + t - 1);
  float sc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) sc[i] = 0.f;
  acquire<false>(&bar.full_k[k.st], k.parity);
  acquire<false>(&bar.full_v[v.st], v.parity);
  wgmma_fence_operand(sc);
  wgmma_fence_operand(o);
  wgmma_fence();                  // after the register writes of sc, o (rescale) and pf
  b.issue_qk(sc, k.st, kHalf);    // commit group: S(t)
  b.issue_pv(o, pf, v.st);        // commit group: P(t-1)·V(t-1)
  wgmma_wait<1>();                // S(t) retired, P·V may still run
  wgmma_fence_operand(sc);
  release(&bar.empty_k[k.st]);
  constexpr int kKeys = kHalf ? 64 : BN;
  float alpha[2];
  b.template softmax<kKeys>(sc, t, m, l, alpha);
  wgmma_wait<0>();  // O and pf are free again
  wgmma_fence_operand(o);
  release(&bar.empty_v[v.st]);
  b.rescale(o, alpha);  // O held tiles < t relative to the previous maximum
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) v3k::pack_p<T>(pf[kk], sc, kk);
}

// After the last step: P(t)·V(t) of the warpgroup's last tile t (kSteps: 4 for a half tile).
template <int kSteps, typename T>
__device__ __forceinline__ void last_pv(const Blk<T>& b, Barriers& bar, float (&o)[D / 2],
                                        const uint32_t (&pf)[BN / 16][4], int g) {
  const Slot v(g);
  acquire<false>(&bar.full_v[v.st], v.parity);
  wgmma_fence_operand(o);
  wgmma_fence();
  b.issue_pv(o, pf, v.st, kSteps);
  wgmma_wait<0>();
  wgmma_fence_operand(o);
  release(&bar.empty_v[v.st]);
}

// One work item of this warpgroup (ring positions g0 .., as v3pw_ring::consume_tiles).
template <typename T>
__device__ void consume_item(const Blk<T>& b, Barriers& bar, int g0) {
  const int n_wg = b.wg_tiles();  // warpgroup-uniform, as everything below
  const bool half_last = n_wg > 0 && (n_wg - 1) * BN + 64 > b.wg_max_pos;
  float o[D / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  if (n_wg > 0) {
    uint32_t pf[BN / 16][4];  // P of the previous tile, the A operand of its P·V
    if (half_last && n_wg == 1) {
      first_step<true>(b, bar, m, l, pf, g0);
    } else {
      first_step<false>(b, bar, m, l, pf, g0);
    }
    for (int t = 1; t < n_wg; ++t) {
      if (half_last && t == n_wg - 1) {
        step<true>(b, bar, o, m, l, pf, t, g0);
      } else {
        step<false>(b, bar, o, m, l, pf, t, g0);
      }
    }
    if (half_last) {
      last_pv<4>(b, bar, o, pf, g0 + n_wg - 1);
    } else {
      last_pv<BN / 16>(b, bar, o, pf, g0 + n_wg - 1);
    }
  }
  for (int t = n_wg; t < b.n_tiles; ++t) {  // above this warpgroup's rows: release in turn
    const Slot s(g0 + t);
    v3pw_ring::release_skipped(bar, s.st, s.parity);
  }
  b.store(o, l);
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_v3tmap_kernel(Args<T> a, const __grid_constant__ v3tma_ring::Maps maps, int num_seqs) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma, TMA and setmaxnreg need sm_90a (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  v3tma_ring::run_with_producer_warpgroup<v3tma_ring::kQBarrier>(
      a, maps, num_seqs, smem_raw,
      [](const Blk<T>& b, Barriers& bar, int g) { consume_item(b, bar, g); });
#endif
}

}  // namespace
}  // namespace v3tmap

Status launch_v3tmap(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  if (!v3tma_ring::tma_ring_fits(p)) return launch_v3(p, plan, V3Variant::kPlain, stream);
  return v3k::with_row_tiles(p, plan, [&]<typename T>(const v3k::Args<T>& a) {
    return v3tma_ring::launch_tma_kernel<T>(v3tmap::prefill_v3tmap_kernel<T>, a, p, plan,
                                            v3tmap::kThreads, stream, "prefill_v3tmap_kernel");
  });
}

}  // namespace folio::cuda::prefill_detail
