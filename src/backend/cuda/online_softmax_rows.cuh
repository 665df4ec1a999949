// The running-max step of an online softmax over a warp's mma accumulator rows (mma.m16n8k16's
// C layout, and wgmma's per warp): each thread holds two rows (g and g + 8, g = lane / 4) and the
// four threads of a quad hold a row's columns. Shared by the cascade kernels
// (cascade_attention_warp.cuh, cascade_attention_wg.cuh). Device code.
#pragma once

#include <cmath>

#include "backend/cuda/mma_ptx.cuh"

namespace folio::cuda {

// mx: this thread's max of each row's new scores (exp2 domain; -inf where all are masked).
// Takes the quad's max, folds it into the running max m_run, returns in corr the factors the
// row's sum and accumulator must be scaled by, and leaves in mx what the new scores are to be
// exponentiated against (0 while a row has seen only masked scores, so their weights are 0).
__device__ __forceinline__ void fold_row_max(float (&mx)[2], float (&m_run)[2], float (&corr)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float m_new = fmaxf(m_run[h], mx[h]);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // all masked so far: weights 0
    corr[h] = fast_exp2(m_run[h] - m_use);
    m_run[h] = m_new;
    mx[h] = m_use;
  }
}

}  // namespace folio::cuda
