// Flags between blocks of one grid (sm_70+, inline PTX): a block publishes data it wrote to
// global memory with flag_set_release, another block waits for the flag with flag_wait_acquire
// and then reads the data through L2 (load_cg: never a stale L1 line). Used by gemm_wgmma's
// stream-K partial sums. The waiter must only wait for blocks that cannot be waiting for it
// (lower block indices, dispatched first, in gemm_wgmma), or the grid deadlocks.
//
// Host emulation: tests/cuda/emu/shim/backend/cuda/gpu_flag_ptx.cuh (same API).
#pragma once

#include <cstdint>

namespace folio::cuda {

// The calling thread's earlier global writes (and, after a block barrier, those of the threads
// that reached the barrier) become visible at GPU scope before the flag reads `value`.
__device__ __forceinline__ void flag_set_release(int* flag, int value) {
  __threadfence();
  asm volatile("st.release.gpu.global.s32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
}

// Spins until the flag reads `value` (acquire at GPU scope: the writer's data is visible after).
__device__ __forceinline__ void flag_wait_acquire(const int* flag, int value) {
  int v;
  do {
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
  } while (v != value);
}

// A plain store for resetting a flag that nobody reads again in this launch.
__device__ __forceinline__ void flag_reset(int* flag) { *reinterpret_cast<volatile int*>(flag) = 0; }

__device__ __forceinline__ float4 load_cg(const float4* p) { return __ldcg(p); }

}  // namespace folio::cuda
