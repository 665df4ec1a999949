// Flags between the ranks of a peer all-reduce (peer_all_reduce.h), at system scope: a rank
// publishes with store_release_sys into another rank's memory (over NVLink) and waits on its own
// memory with wait_flag. Flags only grow (they carry call numbers), so a waiter tests "at least".
// Device code for peer_all_reduce.cu and peer_all_reduce_two_shot.cu.
#pragma once

#include <cstdint>

namespace folio::cuda {

// A rank that never arrives makes the waiters trap after this long instead of hanging.
inline constexpr unsigned long long kPeerSpinTimeoutNs = 60ull * 1000 * 1000 * 1000;

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// Spins until *flag is at least `value` (wrap-safe), acquiring what the raiser wrote before it.
__device__ __forceinline__ void wait_flag(const uint32_t* flag, uint32_t value) {
  const unsigned long long start = global_ns();
  for (int spins = 0; static_cast<int32_t>(load_acquire_sys(flag) - value) < 0; ++spins)
    if ((spins & 1023) == 1023 && global_ns() - start > kPeerSpinTimeoutNs) __trap();
}

}  // namespace folio::cuda
