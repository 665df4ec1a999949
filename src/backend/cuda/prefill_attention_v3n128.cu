// Prefill attention v3n128: v3 (prefill_attention_v3.cu) with key tiles of BN = 128 at head_dim
// 128, S = Q·K^T by wgmma m64n128k16.
//
// Why: per key, v3's 64-key tiles pay a block barrier, a softmax pass (max, two quad shuffles,
// the rescale of O's 64 accumulators) and a wgmma wait per 64 keys; here per 128. And S's
// wgmmas read both operands from shared memory: m64n64k16 reads 4 KB (A 2 KB + B 2 KB) per
// 32 tensor-core cycles, the shared-memory limit of 128 bytes a cycle; m64n128k16 reads 6 KB per
// 64 cycles (96 bytes a cycle), leaving room for the cp.async writes and P·V's V reads.
//
// Same geometry as v3: a block is 2 warpgroups x 64 (token, q head) rows (BM 128) of one
// sequence and KV head; Q, K, V in 128-byte-swizzled shared memory (layout and descriptors in
// prefill_attention_v3.cu; a K or V tile of 128 keys is 2 panels of 128 rows x 128 bytes, so the
// V descriptor's LBO, the next 64 columns of D, is 128 * 128 bytes). Per thread: S 64 floats, O
// 64 floats, P 32 registers (8 A fragments). Shared memory at D 128: Q 32 KB + 3 stages x (K 32
// KB + V 32 KB) + 1 KB of alignment = 225 KB of the 227 KB opt-in; 1 block (8 warps) per SM.
//
// Per tile t (the v3 loop): wait for tile t's copies, fence the async proxy, one block barrier
// (tile t complete for everyone; stage (t + 2) % 3 last read in iteration t - 1, retired there),
// gather tile t + 2, then S wgmma -> wait -> softmax -> P·V wgmma -> wait.
//
// Causal waste: a block of 128 rows covers 128 / G tokens (32 at GQA 4), so a 128-key tile on
// the diagonal is mostly masked. A warpgroup whose rows all sit below key t * 128 + 64 (its last
// position < t * 128 + 64) computes only the tile's first 64 keys: S by m64n64k16 into the first
// half of the accumulator (same layout), the softmax and the P repack over those 64 keys only,
// P·V in 4 k-steps instead of 8. Without it 64 x 128 prompts would compute ~2x the useful keys
// (at GQA 4 a block's rows are 32 tokens; a warpgroup's, 16).
//
// head_dim 128 only: launch_v3n128 runs head_dim 64 as v3 and the others as v2x2 (through
// launch_v3). Not yet run on a GPU; FOLIO_PREFILL_KERNEL=v3n128 or PrefillPlan::kernel selects
// it.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3.cuh"
#include "backend/cuda/prefill_attention_v3_launch.cuh"

namespace folio::cuda::prefill_detail {
namespace v3n {
namespace {

using v3k::Args;
using v3k::kThreads;

constexpr int D = 128;
constexpr int BN = 128;                 // keys per tile
constexpr int kPrefetch = 2;            // key tiles in flight ahead of the one computed
constexpr int kStages = kPrefetch + 1;  // + the tile being computed

template <typename T>
using Blk = v3k::Block<T, D, kStages, false, BN>;

// One key tile of this warpgroup: S wgmma -> wait -> softmax -> P·V wgmma -> wait; all of its
// wgmmas retire inside. kHalf: only keys [0, 64) of the tile are at or before some row of the
// warpgroup. The two instances are separate straight-line paths: with the choice made per
// wgmma inside one path, ptxas serializes every wgmma of the kernel (C7520, "WG.AR in divergent
// path").
template <bool kHalf, typename T>
__device__ __forceinline__ void tile_step(const Blk<T>& b, float (&o)[D / 2], float (&m)[2],
                                          float (&l)[2], int t, int st) {
  float sc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) sc[i] = 0.f;
  wgmma_fence_operand(sc);
  wgmma_fence();
  b.issue_qk(sc, st, kHalf);
  wgmma_wait<0>();
  wgmma_fence_operand(sc);
  constexpr int kKeys = kHalf ? 64 : BN;  // keys of the tile some row of the warpgroup sees
  float alpha[2];
  b.template softmax<kKeys>(sc, t, m, l, alpha);
  b.rescale(o, alpha);
  uint32_t pf[BN / 16][4];  // of a half tile only pf[0, 4) is set and read
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) v3k::pack_p<T>(pf[kk], sc, kk);
  wgmma_fence_operand(o);
  wgmma_fence();
  b.issue_pv(o, pf, st, kKeys / 16);
  wgmma_wait<0>();
  wgmma_fence_operand(o);
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) prefill_v3n128_kernel(Args<T> a) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma needs sm_90a; the build targets it (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Blk<T> b(a, smem_raw);
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
    const int st = t % kStages;
    cp_async_wait<kPrefetch - 1>();  // this thread's part of tile t has landed
    fence_proxy_async_smem();        // ... and is visible to wgmma (the async proxy)
    // One barrier per tile: tile t is complete for everyone, and every warpgroup is past
    // iteration t - 1, whose wgmmas (retired there) were the last to read stage (t + 2) % 3.
    __syncthreads();
    if (t + kPrefetch < b.n_tiles) b.load_kv(t + kPrefetch, (t + kPrefetch) % kStages);
    cp_async_commit();  // possibly empty: keeps the group count uniform
    if (t < n_wg) {
      // Warpgroup-uniform: keys t * BN + 64 .. are past every row of this warpgroup.
      if (t * BN + 64 > b.wg_max_pos) {
        tile_step<true>(b, o, m, l, t, st);
      } else {
        tile_step<false>(b, o, m, l, t, st);
      }
    }
  }
  b.store(o, l);
#endif
}

template <typename T>
Status launch(const Args<T>& a, int num_seqs, void* stream) {
  auto kernel = prefill_v3n128_kernel<T>;
  constexpr size_t bytes = v3k::Cfg<D, kStages, false, BN>::kBytes;
  static_assert(bytes <= 227 * 1024, "shared memory per block");
  return v3k::launch_grid<T>(kernel, a, num_seqs, kThreads, bytes, stream, "prefill_v3n128_kernel");
}

}  // namespace
}  // namespace v3n

Status launch_v3n128(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  if (p.head_dim != 128) return launch_v3(p, plan, V3Variant::kPlain, stream);
  return v3k::with_row_tiles(p, plan, [&]<typename T>(const v3k::Args<T>& a) {
    return v3n::launch<T>(a, p.num_seqs, stream);
  });
}

}  // namespace folio::cuda::prefill_detail
