// Warp-level tensor-core and async-copy primitives (sm_80+, inline PTX) for the flash-attention
// kernels: ldmatrix, mma.sync.m16n8k16 with fp32 accumulators, cp.async with zero fill, and
// packing of fp32 pairs into the 16-bit register format the mma operands use.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA "Matrix Fragments for mma.m16n8k16"), with
// g = lane / 4 and t = lane % 4:
//   A (16 x 16, row major), 4 regs of 2 elements: a0 (row g, cols 2t..2t+1), a1 (row g + 8,
//     same cols), a2 (row g, cols 2t+8..2t+9), a3 (row g + 8, cols 2t+8..2t+9).
//   B (16 x 8, "col"), 2 regs: b0 (rows 2t..2t+1, col g), b1 (rows 2t+8..2t+9, col g).
//   C/D (16 x 8 fp32), 4 floats: c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g + 8, same cols).
// ldmatrix.x4 loads four 8x8 16-bit matrices; lanes 8i..8i+7 give the row addresses of matrix
// i, and each lane receives (row lane / 4, cols 2 (lane % 4) ..+1) of each matrix in reg i (the
// transpose of that with .trans).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/ldmatrix_ptx.cuh"
#include "backend/cuda/mma_16816.cuh"
#include "backend/cuda/smem_addr.cuh"

namespace folio::cuda {

// 16 bytes global -> shared, bypassing L1; when !valid the destination is zero-filled and `src`
// is not read (it must still be a valid address expression, so pass any mapped pointer).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// 2^x on the SFU (ex2.approx.ftz): 2^-inf = +0, which the masked scores rely on.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 1 / x on the SFU (rcp.approx.ftz: within 1 ulp): a softmax row sum's inverse, where an IEEE
// division costs ~10 instructions per row at every work item's end.
__device__ __forceinline__ float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace folio::cuda
