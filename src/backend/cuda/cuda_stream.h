// A CUDA stream owned for the lifetime of its holder: non-blocking (no implicit ordering with the
// legacy default stream; order it by events) and of the given priority (lower is higher; 0 is
// the default). Created on the device current at create(). Host code; plain C++ header.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "base/status.h"

namespace folio::cuda {

class CudaStream {
 public:
  CudaStream() = default;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream() {
    if (s_) cudaStreamDestroy(s_);
  }
  // The highest priority the device offers when `high`, else the default.
  Status create(bool high) {
    if (s_) return Status();
    int least = 0, greatest = 0;
    FOLIO_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    FOLIO_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, high ? greatest : 0));
    return Status();
  }
  void* get() const { return s_; }
  bool empty() const { return s_ == nullptr; }

 private:
  cudaStream_t s_ = nullptr;
};

}  // namespace folio::cuda
