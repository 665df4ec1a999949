// Prefill attention v3: FlashAttention on Hopper warpgroup MMA (wgmma, sm_90a).
//
// Grid (row tiles, sequences, KV heads) as in v2; a block of 2 warpgroups (256 threads) takes
// BM = 128 (token, q head) rows of one sequence and one KV head, the GQA group folded into the
// rows (row r = token r / G, head kvh * G + r % G). Warpgroup wg owns rows 64 wg .. 64 wg + 63:
// its S = Q·K^T tile (64 x BN) and O (64 x D) are wgmma accumulators in registers, the online
// softmax state (m, l) too. Per key tile of BN = 64 keys:
//   S  = Q · K^T     wgmma m64n64k16, A = Q and B = K both from shared memory (K-major), D / 16
//                    steps;
//   P  = online softmax of S in registers (base 2), O rescaled;
//   O += P · V       wgmma m64nDk16, A = P from registers (the accumulator layout of S repacked
//                    to 16-bit pairs is the A-fragment layout), B = V from shared memory
//                    (MN-major, transposed by the instruction), BN / 16 steps.
// Q, K and V tiles use the 128-byte-swizzle layout (wgmma_ptx.cuh): a tile of R rows x D
// columns is D / 64 panels of R x 64 elements; in a panel, row r is 128 bytes at r * 128 and its
// 16-byte chunk c is stored at chunk c ^ (r % 8). Descriptors:
//   Q (A, K-major): start q + panel(kk) * BM * 128 + wg * 64 * 128 + (kk % 4) * 32, SBO 1024;
//   K (B, K-major): start k + panel(kk) * BN * 128 + (kk % 4) * 32, SBO 1024;
//   V (B, MN-major): start v + kk * 16 * 128 (16 keys), SBO 1024 (next 8 keys), LBO BN * 128
//     (next 64 columns of D).
// K/V tiles are gathered through the block table by cp.async (16 bytes per thread per copy;
// paged tiles are not rectangular, so no TMA) into a 2-stage ring: tile t + 1 loads while tile t
// is computed; the writers fence the async proxy before the barrier that hands a tile to wgmma.
// Causality: the block stops at the key tile holding its last row's position; a warpgroup skips
// tiles wholly above its rows and masks only tiles that cross its diagonal.
//
// Two kernels (the shared steps are in prefill_attention_v3.cuh):
//   v3:  per tile, S wgmma -> wait -> softmax -> P·V wgmma -> wait (3 stages); the tensor cores
//        idle during a warpgroup's softmax unless the other warpgroup fills them.
//   v3p: the P·V of tile t - 1 runs while the softmax of tile t is computed: S(t) and
//        P(t-1)·V(t-1) are issued as two commit groups, wait_group 1 retires S(t) only; O is
//        rescaled after wait_group 0 (4 stages: V(t-1), K(t) and the loads of t + 1, t + 2).
//   v3pq: v3p with Q as register A fragments (S = Q·K^T reads only K from shared memory).
// Both prefetch kPrefetch = 2 tiles ahead: a tile's gather is a dependent block-table load and
// then the copy, more latency than one tile's math (~0.6 us per block at D 128) hides.
//
// head_dim 64 and 128 only (launch_v3 sends the others to v2x2). Not yet measured on a GPU: v2x2
// stays the default; FOLIO_PREFILL_KERNEL=v3|v3p or PrefillPlan::kernel selects these.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3.cuh"
#include "backend/cuda/prefill_attention_v3_launch.cuh"

namespace folio::cuda::prefill_detail {
namespace v3k {
namespace {

constexpr int kPrefetch = 2;               // key tiles in flight ahead of the one computed
constexpr int kStagesV3 = kPrefetch + 1;   // + the tile being computed
constexpr int kStagesV3p = kPrefetch + 2;  // + the tile of the deferred P·V

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1) prefill_v3_kernel(Args<T> a) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma needs sm_90a; the build targets it (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  constexpr int S = kStagesV3;
  Block<T, D, S, false> b(a, smem_raw);
  if (!b.live) return;
  b.load_q();
#pragma unroll
  for (int t = 0; t < kPrefetch; ++t) {  // groups 0 .. kPrefetch - 1: Q and tiles 0, 1
    if (t < b.n_tiles) b.load_kv(t, t);
    cp_async_commit();
  }
  const int n_wg = b.wg_tiles();  // warpgroup-uniform
  float o[D / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;

  for (int t = 0; t < b.n_tiles; ++t) {
    const int st = t % S;
    cp_async_wait<kPrefetch - 1>();  // this thread's part of tile t has landed
    fence_proxy_async_smem();        // ... and is visible to wgmma (the async proxy)
    // One barrier per tile: tile t is complete for everyone, and every warpgroup is past
    // iteration t - 1, whose wgmmas (retired there) were the last to read stage (t + 2) % 3.
    __syncthreads();
    if (t + kPrefetch < b.n_tiles) b.load_kv(t + kPrefetch, (t + kPrefetch) % S);
    cp_async_commit();  // possibly empty: keeps the group count uniform
    if (t < n_wg) {
      float sc[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) sc[i] = 0.f;
      wgmma_fence_operand(sc);
      wgmma_fence();
      b.issue_qk(sc, st);
      wgmma_wait<0>();
      wgmma_fence_operand(sc);
      float alpha[2];
      b.softmax(sc, t, m, l, alpha);
      b.rescale(o, alpha);
      uint32_t pf[BN / 16][4];
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) pack_p<T>(pf[kk], sc, kk);
      wgmma_fence_operand(o);
      wgmma_fence();
      b.issue_pv(o, pf, st);
      wgmma_wait<0>();
      wgmma_fence_operand(o);
    }
  }
  b.store(o, l);
#endif
}

// kQRegs (v3pq): Q as register A fragments, so S's wgmmas read only K from shared memory (at
// m64n64k16 both operands from shared memory are 4 KB per 32 tensor-core cycles).
template <typename T, int D, bool kQRegs>
__global__ void __launch_bounds__(kThreads, 1) prefill_v3p_kernel(Args<T> a) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  constexpr int S = kStagesV3p;
  Block<T, D, S, kQRegs> b(a, smem_raw);
  if (!b.live) return;
  if constexpr (!kQRegs) b.load_q();
#pragma unroll
  for (int t = 0; t < kPrefetch; ++t) {  // groups 0 .. kPrefetch - 1: Q and tiles 0, 1
    if (t < b.n_tiles) b.load_kv(t, t);
    cp_async_commit();
  }
  uint32_t qf[kQRegs ? D / 16 : 1][4];
  if constexpr (kQRegs) b.load_q_frags(qf);  // while tiles 0 and 1 are in flight
  const int n_wg = b.wg_tiles();             // warpgroup-uniform
  float o[D / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  uint32_t pf[BN / 16][4];  // P of the previous tile, the A operand of its P·V

  // Iteration t: S of tile t (t < n_wg) and P·V of tile t - 1 (1 <= t <= n_wg).
  for (int t = 0; t <= b.n_tiles; ++t) {
    cp_async_wait<kPrefetch - 1>();  // this thread's part of tile t has landed
    fence_proxy_async_smem();        // ... and is visible to wgmma (the async proxy)
    // Tile t is complete for everyone, and every warpgroup is past iteration t - 1: stage
    // (t + 2) % 4 held tile t - 2, whose K was read in iteration t - 2 and V in t - 1.
    __syncthreads();
    if (t + kPrefetch < b.n_tiles) b.load_kv(t + kPrefetch, (t + kPrefetch) % S);
    cp_async_commit();  // possibly empty: keeps the group count uniform
    const bool do_s = t < n_wg, do_pv = t >= 1 && t <= n_wg;  // warpgroup-uniform
    float sc[BN / 2];
    if (do_s || do_pv) {
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) sc[i] = 0.f;
      wgmma_fence_operand(sc);
      wgmma_fence_operand(o);
      wgmma_fence();  // after the register writes of sc, o (rescale) and pf
      if (do_s) {     // commit group: S(t)
        if constexpr (kQRegs) {
          b.issue_qk(sc, qf, t % S);
        } else {
          b.issue_qk(sc, t % S);
        }
      }
      if (do_pv) b.issue_pv(o, pf, (t + S - 1) % S);  // commit group: P(t-1)·V(t-1)
    }
    float alpha[2] = {1.f, 1.f};
    if (do_s) {
      // S(t) is the older group: wait_group 1 retires it and leaves P·V running.
      if (do_pv) {
        wgmma_wait<1>();
      } else {
        wgmma_wait<0>();
      }
      wgmma_fence_operand(sc);
      b.softmax(sc, t, m, l, alpha);
    }
    if (do_pv) {
      wgmma_wait<0>();  // O and pf are free again
      wgmma_fence_operand(o);
    }
    if (do_s) {
      b.rescale(o, alpha);  // O now holds tiles < t, relative to the new maximum
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) pack_p<T>(pf[kk], sc, kk);
    }
  }
  b.store(o, l);
#endif
}

template <typename T, int D, int kVariant>  // 0 v3, 1 v3p, 2 v3pq
Status launch(const Args<T>& a, int num_seqs, void* stream) {
  auto kernel = kVariant == 0   ? prefill_v3_kernel<T, D>
                : kVariant == 1 ? prefill_v3p_kernel<T, D, false>
                                : prefill_v3p_kernel<T, D, true>;
  constexpr int kStages = kVariant == 0 ? kStagesV3 : kStagesV3p;
  constexpr size_t bytes = Cfg<D, kStages, kVariant == 2>::kBytes;
  static_assert(bytes <= 227 * 1024, "shared memory per block");
  return launch_grid<T>(kernel, a, num_seqs, kThreads, bytes, stream, "prefill_v3_kernel");
}

template <typename T, int kVariant>
Status launch_d(const Args<T>& a, int num_seqs, void* stream) {
  if (a.head_dim == 64) return launch<T, 64, kVariant>(a, num_seqs, stream);
  return launch<T, 128, kVariant>(a, num_seqs, stream);
}

}  // namespace
}  // namespace v3k

Status launch_v3(const PagedAttentionParams& p, const PrefillPlan& plan, V3Variant variant,
                 void* stream) {
  if (p.head_dim != 64 && p.head_dim != 128) return launch_v2(p, plan, 32, stream);
  return v3k::with_row_tiles(p, plan, [&]<typename T>(const v3k::Args<T>& a) -> Status {
    switch (variant) {
      case V3Variant::kPlain:
        return v3k::launch_d<T, 0>(a, p.num_seqs, stream);
      case V3Variant::kPipelined:
        return v3k::launch_d<T, 1>(a, p.num_seqs, stream);
      case V3Variant::kPipelinedQRegs:
        return v3k::launch_d<T, 2>(a, p.num_seqs, stream);
    }
    return invalid_argument("prefill v3: unknown variant");
  });
}

}  // namespace folio::cuda::prefill_detail
