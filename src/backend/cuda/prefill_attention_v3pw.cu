// Prefill attention v3pw: v3n128 (prefill_attention_v3n128.cu: 128-key tiles, S by wgmma
// m64n128k16) with a producer warp and mbarriers instead of one block barrier per tile.
//
// Why: in v3 / v3n128 every warp both gathers K/V (cp.async) and computes, and one
// __syncthreads per tile keeps the two consumer warpgroups in lockstep: both wait for the slowest
// thread's copies, both run their softmax at the same time while the tensor cores idle. Halving
// the barriers per key (v3n128) bought only 3%, so here the warpgroups stop meeting at all: each
// follows the stage ring on its own, paced only by the data.
//
// The producer and the ring are in prefill_attention_v3pw.cuh (shared with v3pwpp).
//
// Roles (288 threads): warps 0-7 are the two consumer warpgroups of v3n128 (rows 64 wg ..
// 64 wg + 63 of the block's 128); warp 8 is the producer. The producer loads Q, then for each key
// tile t gathers K(t) and V(t) through the block table by cp.async into stage t % 3, each
// followed by cp.async.mbarrier.arrive.noinc on the stage's full_k / full_v barrier (count 32: one
// arrival per producer lane, made by the hardware when that lane's earlier copies have landed; Q
// rides with tile 0's K). K and V have separate barriers so that S can start before V has landed
// and K's stage can be refilled while the consumers still run the softmax and P·V.
//
// Protocol, stage st = t % 3 used for the u-th time (u = t / 3):
//   producer:  t >= 3: wait empty_k[st] parity (u - 1) & 1 (tile t - 3's K released);
//              gather K(t); arrive.noinc full_k[st]; the same for V with empty_v / full_v.
//   consumer:  wait full_k[st] parity u & 1; fence.proxy.async (the copies are generic-proxy
//              writes that this thread has acquired through the barrier; wgmma reads through the
//              async proxy, and the producer never waits on its copies so cannot fence them);
//              S wgmma, wait; lane 0 of each warp arrives on empty_k[st] (count 8 = 4 warps x 2
//              warpgroups); softmax; wait full_v[st], fence, P·V wgmma, wait; arrive empty_v[st].
// A warpgroup skips tiles above its rows (causal). It still releases a skipped tile that the
// producer will refill (t + 3 < n_tiles: only a warpgroup with no real rows has such tiles), and
// waits on its full barrier first: an arrival before the producer has refilled the stage would
// count toward the stage's previous phase, completing it without the other warpgroup's release.
// No waiter falls two phases behind: the producer cannot refill a stage before both warpgroups
// released it, and neither releases before it waited on the current fill.
//
// Shared memory: v3n128's 225 KB (Q 32 KB, 3 stages of K and V at 32 KB each, 1 KB alignment)
// + 96 bytes of barriers, of the 227 KB opt-in; 1 block of 9 warps per SM, 288 threads x <= 224
// registers fit the register file without setmaxnreg.
//
// head_dim 128 only: launch_v3pw sends other head dims where launch_v3n128 does (64 to v3, the
// rest to v2x2). Not yet run on a GPU; FOLIO_PREFILL_KERNEL=v3pw or PrefillPlan::kernel selects it.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3pw.cuh"
#include "backend/cuda/prefill_attention_v3_launch.cuh"

namespace folio::cuda::prefill_detail {
namespace v3pw {
namespace {

using v3k::Args;
using v3pw_ring::Blk;
using v3pw_ring::kThreads;

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) prefill_v3pw_kernel(Args<T> a) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma needs sm_90a; the build targets it (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Blk<T> b(a, smem_raw);  // warp 8 gets a warpgroup index of 2, unused
  if (!b.live) return;
  v3pw_ring::Barriers& bar = v3pw_ring::barriers(b);
  v3pw_ring::init_barriers(bar);
  __syncthreads();  // the only block barrier: the mbarriers exist before anyone uses them
  if (threadIdx.x / 32 == v3pw_ring::kProducerWarp) {
    v3pw_ring::produce(b, bar);
  } else {
    v3pw_ring::consume_tiles(b, bar);
  }
#endif
}

template <typename T>
Status launch(const Args<T>& a, int num_seqs, void* stream) {
  auto kernel = prefill_v3pw_kernel<T>;
  constexpr size_t bytes = v3pw_ring::kSmemBytes;
  static_assert(bytes <= 227 * 1024, "shared memory per block");
  return v3k::launch_grid<T>(kernel, a, num_seqs, kThreads, bytes, stream, "prefill_v3pw_kernel");
}

}  // namespace
}  // namespace v3pw

Status launch_v3pw(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  if (p.head_dim != 128) return launch_v3n128(p, plan, stream);
  return v3k::with_row_tiles(p, plan, [&]<typename T>(const v3k::Args<T>& a) {
    return v3pw::launch<T>(a, p.num_seqs, stream);
  });
}

}  // namespace folio::cuda::prefill_detail
