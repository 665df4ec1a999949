// Internal to prefill_attention_v3tmap.cu and prefill_attention_v3tmapp.cu: the kernel body they
// share. Their consumers keep S, P and O live together, beyond the 224 registers a 288-thread
// block allows, so the block is 384 threads: two consumer warpgroups and a producer warpgroup
// that drops to kWgProducerRegs by setmaxnreg (its first warp alone issues the TMA fills, the
// other three exit) while the consumers rise to kWgConsumerRegs. Launched at 168 registers
// each: 128 x 24 + 256 x 240 = 64512 of the 65536.
#pragma once

#include "backend/cuda/prefill_attention_v3tma.cuh"
#include "backend/cuda/setmaxnreg_ptx.cuh"

namespace folio::cuda::prefill_detail::v3tma_ring {

constexpr int kWgThreads = v3k::kThreads + 128;  // 2 consumer warpgroups + the producer's
constexpr int kWgProducerWarp = v3k::kThreads / 32;
constexpr int kWgConsumerRegs = 240, kWgProducerRegs = 24;
static_assert(128 * kWgProducerRegs + v3k::kThreads * kWgConsumerRegs <= 65536, "register file");

// Per work item at ring position g, each consumer warpgroup loads its Q (named barriers
// kQBarrier + wg) and then calls consume_item(b, bar, g). smem_raw: the kernel's dynamic shared
// memory (declared in the kernel, where the host emulator's script rewrites it).
template <int kQBarrier, typename T, typename ConsumeItem>
__device__ __forceinline__ void run_with_producer_warpgroup(const v3k::Args<T>& a,
                                                            const Maps& maps, int num_seqs,
                                                            unsigned char* smem_raw,
                                                            ConsumeItem&& consume_item) {
  Blk<T> b(a, smem_raw);  // the producer's warps get a warpgroup index of 2, unused
  Barriers& bar = v3pw_ring::barriers(b);
  init_tma_barriers(bar);
  __syncthreads();  // the only block barrier: the mbarriers exist before anyone uses them
  const int warp = threadIdx.x / 32;
  if (warp >= kWgProducerWarp) {
    setmaxnreg_dec<kWgProducerRegs>();
    if (warp != kWgProducerWarp) return;
    if (threadIdx.x % 32 == 0) {
      tma_prefetch_map(&maps.k_page);
      tma_prefetch_map(&maps.v_page);
    }
    for_each_item(b, num_seqs, [&](int g) { produce_tma(b, bar, maps, g); });
    return;
  }
  setmaxnreg_inc<kWgConsumerRegs>();
  for_each_item(b, num_seqs, [&](int g) {
    load_q_warpgroup<kQBarrier>(b, g);
    consume_item(b, bar, g);
  });
}

}  // namespace folio::cuda::prefill_detail::v3tma_ring
