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
// The turns (P(t-1)·V(t-1) and S(t) issued between a sync on the warpgroup's own named barrier
// and an arrive on the other's; the wait, releases, softmax and P(t) after), their barriers and
// why they balance and cannot deadlock, and the half-tile instances: prefill_attention_v3pp.cuh,
// shared with v3tmapp (the same consumers on v3tma's TMA-filled ring). Here the fills are
// cp.async writes (a proxy fence after each wait) and the block has one item (ring positions
// from 0; a skipped tile is released only if the producer refills it, t + kStages < n_tiles).
//
// Shared memory and the producer as v3pw (225 KB + 96 bytes); 288 threads. head_dim 128 only
// (others as v3n128). Not yet run on a GPU; FOLIO_PREFILL_KERNEL=v3pwpp selects it.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3pp.cuh"
#include "backend/cuda/prefill_attention_v3pw.cuh"
#include "backend/cuda/prefill_attention_v3_launch.cuh"

namespace folio::cuda::prefill_detail {
namespace v3pwpp {
namespace {

using v3k::Args;
using v3pw_ring::Barriers;
using v3pw_ring::kThreads;
template <typename T>
using Blk = v3pw_ring::Blk<T>;

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
    v3pp::consume</*kFence=*/true>(b, bar);  // one item: ring positions from 0
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
