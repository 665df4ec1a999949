// Emulated stand-in for src/backend/cuda/gpu_flag_ptx.cuh (same API). The emulator runs blocks
// one after another in index order, so a flag a block waits for (set by a lower block) is already
// set; one that is not would never be: that is reported as a deadlock.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace folio::cuda {

inline void flag_set_release(int* flag, int value) {
  std::atomic_ref<int>(*flag).store(value, std::memory_order_release);
}

inline void flag_wait_acquire(const int* flag, int value) {
  if (std::atomic_ref<int>(*const_cast<int*>(flag)).load(std::memory_order_acquire) != value) {
    std::fprintf(stderr, "emulated flag: waiting for a flag no earlier block set (deadlock)\n");
    std::exit(3);
  }
}

inline void flag_reset(int* flag) { std::atomic_ref<int>(*flag).store(0); }

inline float4 load_cg(const float4* p) { return *p; }

}  // namespace folio::cuda
