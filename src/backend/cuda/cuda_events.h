// The CUDA events of one timing session (GEMM autotuning, the copy-rate measurement), destroyed
// on every path. Host code; plain C++ header over the runtime API.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/cuda_check.h"
#include "base/status.h"

namespace folio::cuda {

struct CudaEvents {
  std::vector<cudaEvent_t> ev;
  CudaEvents() = default;
  CudaEvents(const CudaEvents&) = delete;
  CudaEvents& operator=(const CudaEvents&) = delete;
  ~CudaEvents() {
    for (cudaEvent_t e : ev) cudaEventDestroy(e);
  }
  // Appends n events.
  Status create(int n) {
    for (int i = 0; i < n; ++i) {
      cudaEvent_t e = nullptr;
      FOLIO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
      ev.push_back(e);
    }
    return Status();
  }
};

}  // namespace folio::cuda
