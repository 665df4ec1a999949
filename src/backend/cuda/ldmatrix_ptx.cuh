// ldmatrix (sm_75+, inline PTX): four 8 x 8 matrices of 16-bit elements from shared memory into
// mma fragments. Lanes 8i .. 8i + 7 give the addresses of matrix i's rows (16 contiguous bytes
// each); lane L receives row L / 4, columns 2 (L % 4) and + 1 of each matrix in r[i], or, with
// .trans, the same of its transpose (rows 2 (L % 4) and + 1 at column L / 4).
#pragma once

#include <cstdint>

#include "backend/cuda/smem_addr.cuh"

namespace folio::cuda {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

}  // namespace folio::cuda
