// Register reallocation between warpgroups (sm_90a, inline PTX). A block is launched with one
// per-thread register count for all warps; setmaxnreg lets a warpgroup that needs few (a TMA
// producer) hand its registers back to the pool, and the warpgroups that need many (wgmma
// consumers holding S, P and O accumulators) take them. Every warp of a warpgroup executes the
// same instruction; `inc` waits until the pool holds enough. ptxas allocates the code after the
// instruction within the new count. Counts: multiples of 8 in [24, 256].
#pragma once

namespace folio::cuda {

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg count");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg count");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

}  // namespace folio::cuda
