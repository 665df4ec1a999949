#include "backend/cuda/device_memory.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace folio::cuda {

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.ptr_, bytes));
  b.bytes_ = bytes;
  return b;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  DeviceBuffer tmp(std::move(other));
  swap(tmp);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);  // an error here (a dead context) has nowhere to go
}

void DeviceBuffer::swap(DeviceBuffer& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
}

Result<void*> PinnedHostBuffer::device_pointer() const {
  if (ptr_ == nullptr) return static_cast<void*>(nullptr);
  void* d = nullptr;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&d, ptr_, 0));
  return d;
}

Result<PinnedHostBuffer> PinnedHostBuffer::allocate(size_t bytes) {
  PinnedHostBuffer b;
  if (bytes == 0) return b;
  FOLIO_CUDA_RETURN_IF_ERROR(
      cudaHostAlloc(&b.ptr_, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
  b.bytes_ = bytes;
  return b;
}

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& other) noexcept {
  PinnedHostBuffer tmp(std::move(other));
  swap(tmp);
  return *this;
}

PinnedHostBuffer::~PinnedHostBuffer() {
  if (ptr_) cudaFreeHost(ptr_);
}

void PinnedHostBuffer::swap(PinnedHostBuffer& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
}

Result<int> device_count() {
  int n = 0;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&n));
  return n;
}

namespace {

// kHz x 2 transfers per clock x bus bytes; 0 when either attribute is missing.
double peak_memory_gbps_of(int device) {
  int khz = 0, bits = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess ||
      khz <= 0 || bits <= 0)
    return 0;
  return 2.0 * khz * 1e3 * (bits / 8.0) / 1e9;
}

}  // namespace

Result<DeviceInfo> device_info(int device) {
  cudaDeviceProp p{};
  FOLIO_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&p, device));
  DeviceInfo info;
  info.name = p.name;
  info.num_sms = p.multiProcessorCount;
  info.total_memory = p.totalGlobalMem;
  info.max_smem_per_block_optin = p.sharedMemPerBlockOptin;
  info.compute_major = p.major;
  info.compute_minor = p.minor;
  info.peak_memory_gbps = peak_memory_gbps_of(device);
  return info;
}

namespace {

constexpr int kMaxDevices = 64;  // devices the per-device caches below hold; others read 0

// A property of the current device, looked up once per device: `lookup(device)` > 0 is kept,
// anything else is remembered as unknown and read as 0. Ranks on other threads look up their own
// devices; a race only repeats the same lookup.
template <typename Lookup>
double cached_for_current_device(std::atomic<double> (&cache)[kMaxDevices], Lookup lookup) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return 0;
  double v = cache[device].load(std::memory_order_relaxed);  // 0 not looked up yet, -1 unknown
  if (v == 0) {
    const double got = lookup(device);
    v = got > 0 ? got : -1;
    cache[device].store(v, std::memory_order_relaxed);
  }
  return v > 0 ? v : 0;
}

}  // namespace

double current_device_peak_memory_gbps() {
  static std::atomic<double> cache[kMaxDevices];
  return cached_for_current_device(cache, peak_memory_gbps_of);
}

int current_device_num_sms() {
  static std::atomic<double> cache[kMaxDevices];
  return static_cast<int>(cached_for_current_device(cache, [](int device) {
    int n = 0;
    return cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) == cudaSuccess
               ? n
               : 0;
  }));
}

Status copy_async(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return Status();
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)),
                     "cudaMemcpyAsync");
}

Status copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status();
  return cuda_status(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

Status memset_async(void* dst, int byte, size_t bytes, void* stream) {
  if (bytes == 0) return Status();
  return cuda_status(cudaMemsetAsync(dst, byte, bytes, as_stream(stream)), "cudaMemsetAsync");
}

Status copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
               size_t height) {
  if (width == 0 || height == 0) return Status();
  return cuda_status(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, height, cudaMemcpyDefault),
                     "cudaMemcpy2D");
}

Status set_device(int device) {
  return cuda_status(cudaSetDevice(device),
                     ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
}

Status wait_idle(double timeout_s) {
  cudaEvent_t ev = nullptr;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  cudaError_t e = cudaEventRecord(ev, nullptr);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  while (e == cudaSuccess && (e = cudaEventQuery(ev)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      cudaEventDestroy(ev);
      return internal_error("the device did not finish its queued work within " +
                               std::to_string(timeout_s) + " s");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  cudaEventDestroy(ev);
  return cuda_status(e, "wait_idle");
}

Status synchronize(void* stream) {
  if (stream) return cuda_status(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
  return cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace folio::cuda
