// Tensor Memory Accelerator (TMA) primitives (sm_90, inline PTX): bulk tensor copies from global
// to shared memory described by a CUtensorMap (encoded on the host, tensor_map.h) and completed
// through an mbarrier's transaction count.
//
// An mbarrier phase completes when both its pending arrivals and its pending transaction bytes
// reach zero. The producer announces a stage's bytes with one arrive.expect_tx (which also counts
// as its arrival); each TMA copy names the barrier and, as it lands, subtracts the bytes it wrote
// (elements outside the tensor are zero-filled and count too). Consumers wait on the phase
// parity as for any mbarrier (mbarrier_ptx.cuh). TMA writes shared memory through the async
// proxy, so wgmma reads it after the wait without a proxy fence.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "backend/cuda/mma_ptx.cuh"

namespace folio::cuda {

// After mbarrier.init by one thread, before the block barrier that publishes the barriers: makes
// the initialisation visible to the async proxy (the TMA unit's complete_tx).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also raises the phase's expected transaction bytes by `bytes`.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile(
      "{\n"
      ".reg .b64 state;\n"
      "mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(bytes)
      : "memory");
}

// The box of `map` at element coordinates (c0, c1, c2) (innermost first; signed: a box reaching
// outside the tensor is zero-filled there) into shared memory at dst, completing on bar.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
      : "memory");
}

// Pulls the descriptor into the TMA unit's cache ahead of the first copy.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

}  // namespace folio::cuda
