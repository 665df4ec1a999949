// CUDA events destroyed on every path: those of one timing session (GEMM autotuning, the
// copy-rate measurement), or the executor's marks of launched steps' samples. Host code; plain C++ header over the runtime API.
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
  // Appends n events (flags: cudaEventDisableTiming for events only waited on).
  Status create(int n, unsigned flags = cudaEventDefault) {
    for (int i = 0; i < n; ++i) {
      cudaEvent_t e = nullptr;
      FOLIO_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, flags));
      ev.push_back(e);
    }
    return Status();
  }
};

}  // namespace folio::cuda
