#include "backend/cuda/smem_opt_in.h"

#include <mutex>
#include <set>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace folio::cuda {

Status opt_in_dynamic_smem(const void* kernel, size_t bytes) {
  static std::mutex mu;
  static std::set<std::pair<const void*, int>> done;
  int device = 0;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  if (done.count({kernel, device})) return Status();
  FOLIO_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(bytes)));
  done.insert({kernel, device});
  return Status();
}

}  // namespace folio::cuda
