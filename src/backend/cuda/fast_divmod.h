// Division of non-negative 32-bit integers by a launch constant as a multiply-high, an add and a
// shift (Granlund and Montgomery, "Division by invariant integers using multiplication", 1994,
// the round-up method): the divisor's multiplier is computed once on the host and travels in the
// kernel's arguments. Why: the prefill kernels turn each work item's index into (row tile,
// sequence, KV head) and rows into token positions with divisions by the grid's shape and the
// query group; a 32-bit division by a runtime value is ~20 instructions on the GPU, and at
// 8 x 1024 those per-item divisions in every consumer warp were ~30% of the work an item costs
// beyond its key tiles (Nsight Compute, NOTES.md session 18).
//
// Plain C++ so the CPU tests can check it; the device build compiles div() with __umulhi.
// Valid for 0 <= n < 2^31 and 1 <= d < 2^31 (quotient exact).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FOLIO_FAST_DIVMOD_HD __host__ __device__ __forceinline__
#else
#define FOLIO_FAST_DIVMOD_HD inline
#endif

namespace folio::cuda {

struct FastDivmod {
  int32_t d = 1;
  uint32_t mul = 1;  // floor(2^32 (2^shift - d) / d) + 1
  uint32_t shift = 0;  // ceil(log2 d)

  FastDivmod() = default;
  explicit FastDivmod(int32_t divisor) : d(divisor) {
    while ((uint64_t{1} << shift) < static_cast<uint64_t>(divisor)) ++shift;
    mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - divisor)) /
                                    static_cast<uint64_t>(divisor) +
                                1);
  }

  FOLIO_FAST_DIVMOD_HD int32_t div(int32_t n) const {
    const uint32_t un = static_cast<uint32_t>(n);
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(un, mul);
#else
    const uint32_t hi = static_cast<uint32_t>((uint64_t{un} * mul) >> 32);
#endif
    return static_cast<int32_t>((hi + un) >> shift);  // hi <= un < 2^31: no overflow
  }
  FOLIO_FAST_DIVMOD_HD int32_t mod(int32_t n) const { return n - div(n) * d; }
};

}  // namespace folio::cuda
