// Per-block timestamps for measuring builds (cmake -DFOLIO_KERNEL_TRACE=ON; off by default, when
// FOLIO_TRACE(...) compiles to nothing). A kernel stamps %globaltimer (ns, 32 ns steps on the
// H100) at points of its choosing into kWords words per block of a device buffer that its
// launcher's set_*_trace installs (nullptr: no stamps). Used by tests/cuda/tc_trace_bench_test.cc
// to see where a single-wave decode launch spends its time (ramp, steady state, tail, epilogue:
// NOTES.md, "K1, session 21"). One g_trace per translation unit (anonymous namespace).
#pragma once

#ifdef FOLIO_KERNEL_TRACE
#define FOLIO_TRACE(...) __VA_ARGS__

namespace folio::cuda::detail {
namespace {
namespace ktrace {

constexpr int kWords = 16;
__device__ unsigned long long* g_trace;

__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// The time once `dep` is available: the read cannot be scheduled above dep's producer (an mma,
// a load), which a plain volatile read can.
__device__ __forceinline__ unsigned long long after(float dep) {
  unsigned long long t;
  asm volatile("{ .reg .f32 d; mov.f32 d, %1; mov.u64 %0, %%globaltimer; }" : "=l"(t) : "f"(dep));
  return t;
}
__device__ __forceinline__ unsigned long long after(int dep) {
  unsigned long long t;
  asm volatile("{ .reg .s32 d; mov.s32 d, %1; mov.u64 %0, %%globaltimer; }" : "=l"(t) : "r"(dep));
  return t;
}
// Word `word` of this block's record, by lane 0 of the calling warp.
__device__ __forceinline__ void stamp(int word, unsigned long long v) {
  if (g_trace == nullptr || threadIdx.x % 32 != 0) return;
  const int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  g_trace[b * kWords + word] = v;
}
__device__ __forceinline__ unsigned smid() {
  unsigned v;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(v));
  return v;
}

}  // namespace ktrace
}  // namespace
}  // namespace folio::cuda::detail
#else
#define FOLIO_TRACE(...)
#endif
