// Device and pinned-host memory as RAII owners, plus the few runtime calls the executor needs,
// all reporting errors as Status. Host-only header: no CUDA types cross it (a stream is an opaque
// `void*`, nullptr meaning the legacy default stream).
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace folio::cuda {

// Owns `bytes` of device memory (cudaMalloc); moves, never copies. An empty buffer is valid.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void swap(DeviceBuffer& o) noexcept;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Owns page-locked host memory (cudaHostAlloc, portable + mapped), the swap pool's storage:
// cudaMemcpyAsync to and from it is truly asynchronous.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  static Result<PinnedHostBuffer> allocate(size_t bytes);
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept { swap(other); }
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  ~PinnedHostBuffer();

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  // The address kernels use for this (mapped) memory: the same as data() under unified
  // addressing, asked of the runtime all the same.
  Result<void*> device_pointer() const;

 private:
  void swap(PinnedHostBuffer& o) noexcept;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceInfo {
  std::string name;
  int num_sms = 0;
  size_t total_memory = 0;
  size_t max_smem_per_block_optin = 0;
  int compute_major = 0, compute_minor = 0;
  // The DRAM's peak rate by the driver's memory clock and bus width (2 transfers per clock), in
  // GB/s: 3352 on an H100 SXM, 4800 on an H200. 0 where the driver does not say. A datasheet
  // figure, not a measurement: kernels that pick a form by it say which GPUs it was measured on.
  double peak_memory_gbps = 0;
};

// Number of CUDA devices; an error Status (never a crash) when there is no driver or no device.
Result<int> device_count();
Result<DeviceInfo> device_info(int device = 0);
// DeviceInfo::peak_memory_gbps of the current device, looked up once per device (for launch paths
// that choose a kernel form by it); 0 when unknown.
double current_device_peak_memory_gbps();
// DeviceInfo::num_sms of the current device, looked up once per device; 0 when unknown.
int current_device_num_sms();

// Copies with cudaMemcpyAsync (direction inferred through unified addressing) on `stream`.
Status copy_async(void* dst, const void* src, size_t bytes, void* stream = nullptr);
// Blocking copy (then the data is usable on the host).
Status copy(void* dst, const void* src, size_t bytes);
Status memset_async(void* dst, int byte, size_t bytes, void* stream = nullptr);
// Blocking strided copy of `height` rows of `width` bytes (cudaMemcpy2D, any direction): a
// column slice of a row-major matrix, or rows scattered into a wider one.
Status copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
               size_t height);
// Makes `device` current for the calling thread (each tensor-parallel rank's thread).
Status set_device(int device);
Status synchronize(void* stream = nullptr);
// Waits until the current device has run everything queued on the legacy stream so far, at most
// `timeout_s` (then an error: work stuck, such as a collective whose peer never came).
Status wait_idle(double timeout_s);

}  // namespace folio::cuda
