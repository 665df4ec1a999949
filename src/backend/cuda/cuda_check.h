// CUDA error checking that turns errors into Status (only for this folder's .cu/.cc files: it
// includes the CUDA runtime). Errors on paths a user can reach (bad shapes, out of memory) come
// back as Status; nothing here aborts.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "base/status.h"

namespace folio::cuda {

// A failed runtime call also records its error as the thread's last error, which a later
// launch_status (anyone's) would report as its own launch's: an error turned into a Status here is
// cleared there (non-sticky errors; a sticky one stays, as the context is lost anyway).
inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status();
  (void)cudaGetLastError();
  const StatusCode code =
      err == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code, std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                          cudaGetErrorString(err) + ")");
}

// The status of the last kernel launch (bad configuration, missing device...).
inline Status launch_status(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace folio::cuda

#define FOLIO_CUDA_RETURN_IF_ERROR(expr)                                        \
  do {                                                                          \
    const cudaError_t folio_cuda_err_ = (expr);                                 \
    if (folio_cuda_err_ != cudaSuccess) return ::folio::cuda::cuda_status(folio_cuda_err_, #expr); \
  } while (0)
