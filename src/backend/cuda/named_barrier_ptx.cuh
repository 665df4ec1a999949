// Named block barriers (bar.sync / bar.arrive with an id and a thread count, sm_70+): a subset
// of the block's warps synchronising without the others, and one-way signals between them.
// Barrier 0 is __syncthreads'; a kernel picks its other ids (< 16). `count` is in threads, a
// multiple of 32, counted per warp; the barrier completes when `count` threads have arrived (by
// sync or arrive) and releases those that called sync. A producer/consumer pair uses it as a
// turn: the consumer's warps sync(id, n), the producer's warps arrive(id, n) without waiting.
//
// Host emulation: tests/cuda/emu/shim/backend/cuda/named_barrier_ptx.cuh (same API).
#pragma once

namespace folio::cuda {

__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

}  // namespace folio::cuda
