// Shared-memory mbarrier primitives (sm_90, inline PTX) for warp-specialised pipelines: a
// producer fills a stage and signals its "full" barrier, consumers wait on that barrier's phase
// and release the stage through its "empty" barrier.
//
// An mbarrier (PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier") is
// a 64-bit shared-memory object holding a phase, a pending-arrival count and the expected count
// set by init. Each arrive decrements the pending count; when it reaches zero the phase completes:
// the phase number advances and the pending count is reloaded with the expected count. A waiter
// names the phase by its parity: try_wait.parity(p) succeeds once the phase with parity p has
// completed, i.e. while the current phase's parity is !p. So a fresh barrier (phase 0) lets
// try_wait.parity(1) pass at once, and the k-th completion (k = 0, 1, ...) of a barrier is
// awaited with parity k & 1; a waiter must never fall two phases behind.
//
// Host emulation: tests/cuda/emu/shim/backend/cuda/mbarrier_ptx.cuh (same API).
#pragma once

#include <cstdint>

#include "backend/cuda/smem_addr.cuh"

namespace folio::cuda {

// One thread initialises; the others may use the barrier after a block barrier (__syncthreads).
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}

// One arrival (release semantics at CTA scope: this thread's prior memory accesses, including
// its completed wgmma reads, happen before a waiter's acquire of the completed phase).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile(
      "{\n"
      ".reg .b64 state;\n"
      "mbarrier.arrive.release.cta.shared::cta.b64 state, [%0];\n"
      "}\n" ::"r"(smem_addr(bar))
      : "memory");
}

// One arrival, made by the hardware once every cp.async this thread issued before it has
// completed. .noinc: the pending count is not raised first, so the arrival counts against the
// barrier's init count (a barrier fed by N producer threads is initialised with N).
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar))
               : "memory");
}

// True once the phase of parity `parity` has completed (acquire at CTA scope). try_wait may
// suspend the thread for a while before returning false.
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

}  // namespace folio::cuda
