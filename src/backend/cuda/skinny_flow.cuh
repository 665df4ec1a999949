// Device side of SkinnyFlow (skinny_gemm.h): the gated producer counts its stored outputs per
// segment of x, the consumer waits for a segment's count before its first read of that segment
// (only .cu files include this). Counters are cumulative over launches, never reset.
#pragma once

#include <cstdint>

namespace folio::cuda {

// After the calling warp stored its outputs (all lanes): each lane's stores become visible at
// GPU scope, then lane 0 adds one to the segment's counter. Every lane of the warp must call it.
__device__ __forceinline__ void flow_signal(unsigned long long* counter, int lane) {
  __threadfence();
  __syncwarp();
  if (lane == 0) atomicAdd(counter, 1ull);
}

// Advances `ready` (segments of x known complete, warp-uniform) past segment `need` (< nseg).
// Lane j reads the counter of segment ready + j (relaxed: no L1 invalidation per poll) against
// its target, round * count(segment); the warp takes the leading run of complete segments, so one
// check usually covers many. Then an acquire fence at GPU scope and a warp barrier: the
// producer's outputs counted there are visible to every lane's later coherent loads of x
// (ld.global.ca, never the read-only path, which may keep lines from before the producer's
// stores; the fence's memory clobber keeps them after it).
// count(j): the producer's warps that store outputs of segment j. Traps after ~10 s (a consumer
// launched without its producer) instead of hanging the GPU.
template <typename CountFn>
__device__ __forceinline__ void flow_wait(const unsigned long long* counters, int nseg, int need,
                                          unsigned long long round, CountFn count, int& ready) {
  const int lane = threadIdx.x % 32;
  unsigned long long start = 0;
  while (ready <= need) {
    const int j = ready + lane;
    bool done = true;
    if (j < nseg) {
      unsigned long long v;
      asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(counters + j));
      done = v >= round * count(j);
    }
    const unsigned pending = __ballot_sync(0xffffffffu, !done);
    const int run = pending == 0 ? 32 : __ffs(pending) - 1;  // leading complete segments
    if (run > 0) {
      ready = min(ready + run, nseg);
      // Lane j's read and this fence form an acquire; the warp barrier then orders it before
      // every lane's later loads.
      asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
      __syncwarp();
      continue;
    }
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(now));
    if (start == 0) start = now;
    if (now - start > 10'000'000'000ull) __trap();
    __nanosleep(100);
  }
}

}  // namespace folio::cuda
