// A generic pointer into shared memory as the 32-bit shared-window address that inline PTX's
// shared-memory operands (ldmatrix, mbarrier, cp.async.bulk, ...) take.
#pragma once

#include <cstdint>

namespace folio::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace folio::cuda
