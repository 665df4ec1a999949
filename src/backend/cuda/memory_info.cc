#include "backend/cuda/memory_info.h"

#include "backend/cuda/cuda_check.h"

namespace folio::cuda {

Result<MemoryInfo> memory_info() {
  MemoryInfo m;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
  return m;
}

}  // namespace folio::cuda
