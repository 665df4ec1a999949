// Tensor Memory Accelerator (TMA) primitives (sm_90, inline PTX): bulk tensor copies from global
// to shared memory described by a CUtensorMap (encoded on the host, tensor_map.h) and completed
// through an mbarrier's transaction count, and back (tma_store_3d, completed through the issuing
// thread's bulk async-groups).
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

#include "backend/cuda/smem_addr.cuh"

namespace folio::cuda {

// After mbarrier.init by one thread, before the block barrier that publishes the barriers: makes
// the initialisation visible to the async proxy (the TMA unit's complete_tx).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Orders this thread's earlier generic-proxy writes to global memory before later async-proxy
// reads of them (a bulk copy issued after a barrier that follows this fence).
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
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

// `bytes` (a multiple of 16) of contiguous global memory at src (16-byte aligned) into shared
// memory at dst (16-byte aligned), completing on bar: a bulk copy without a tensor map.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// The box of `map` at element coordinates (c0, c1, c2) from shared memory at src (laid out as a
// load of the same box would leave it) to global memory, as one bulk async-group copy of this
// thread; elements outside the tensor are not written. The writer(s) of src must have run
// fence_proxy_async_smem (the copy reads through the async proxy) and be ordered before this
// thread (a barrier). Then bulk_commit_group, and bulk_wait_group_read before src is reused.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, int c0, int c1, int c2,
                                             const void* src) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(src))
      : "memory");
}

// Closes this thread's bulk copies issued since the last commit into one bulk async-group.
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Waits until at most N of this thread's bulk async-groups still read their shared memory
// (the source may be overwritten then; the global writes may still be in flight).
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// Waits until at most N of this thread's bulk async-groups are incomplete (writes done).
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// Pulls the descriptor into the TMA unit's cache ahead of the first copy.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

}  // namespace folio::cuda
