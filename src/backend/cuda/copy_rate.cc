#include "backend/cuda/copy_rate.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_events.h"
#include "backend/cuda/device_memory.h"

namespace folio::cuda {
namespace {

Result<double> measure_on_current(size_t max_bytes, int runs) {
  size_t free_bytes = 0, total = 0;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total));
  const size_t mib = size_t{1} << 20;
  const size_t bytes = std::min(max_bytes, free_bytes / 4) / mib * mib;
  if (bytes < kCopyRateMinBytes)
    return resource_exhausted("measure_device_copy_gbps: " + std::to_string(free_bytes / mib) +
                              " MiB free, too little for two buffers of at least " +
                              std::to_string(kCopyRateMinBytes / mib) + " MiB");
  FOLIO_ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::allocate(bytes));
  FOLIO_ASSIGN_OR_RETURN(DeviceBuffer dst, DeviceBuffer::allocate(bytes));
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMemset(src.data(), 1, bytes));
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice));
  CudaEvents ev;
  FOLIO_RETURN_IF_ERROR(ev.create(2));
  cudaEvent_t start = ev.ev[0], stop = ev.ev[1];
  std::vector<float> ms;
  for (int r = 0; r < runs; ++r) {
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, nullptr));
    FOLIO_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, nullptr));
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, nullptr));
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
    float t = 0;
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  std::nth_element(ms.begin(), ms.begin() + runs / 2, ms.end());
  const double median_s = ms[static_cast<size_t>(runs / 2)] / 1e3;
  if (median_s <= 0) return internal_error("measure_device_copy_gbps: zero elapsed time");
  return 2.0 * static_cast<double>(bytes) / median_s / 1e9;
}

}  // namespace

Result<double> measure_device_copy_gbps(int device, size_t max_bytes, int runs) {
  if (runs < 1 || max_bytes < kCopyRateMinBytes)
    return invalid_argument("measure_device_copy_gbps: at least one run and 64 MiB");
  // An unknown device is the caller's mistake, not a runtime failure: refused before
  // cudaSetDevice. (Runtime errors below come back through cuda_status, which clears the
  // thread's last error: cuda_check.h.)
  int count = 0;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    return invalid_argument("measure_device_copy_gbps: no CUDA device " + std::to_string(device) +
                            " (this machine has " + std::to_string(count) + ")");
  int previous = 0;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  FOLIO_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  Result<double> r = measure_on_current(max_bytes, runs);
  // Best effort (the measurement's result matters more); cuda_status clears a failure's error.
  (void)cuda_status(cudaSetDevice(previous), "cudaSetDevice");
  return r;
}

}  // namespace folio::cuda
