// Helpers for the CUDA op tests: GPU presence (skip, never crash, without one), host-side
// bf16/fp16 rounding so the CPU reference sees exactly the GPU's inputs, device tensors that
// convert on upload/download, poisoning, and the relative-error metric.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/device_memory.h"
#include "backend/cuda/dtype.h"

namespace folio::cuda::testing {

// Empty when a GPU is usable, else why not.
inline const std::string& gpu_unavailable_reason() {
  static const std::string reason = [] {
    auto n = device_count();
    if (!n.ok()) return "no usable CUDA device (" + n.status().message() + ")";
    if (*n == 0) return std::string("no CUDA device (cudaGetDeviceCount returned 0)");
    return std::string();
  }();
  return reason;
}

#define FOLIO_REQUIRE_GPU()                                                       \
  do {                                                                            \
    const std::string& folio_why_ = ::folio::cuda::testing::gpu_unavailable_reason(); \
    if (!folio_why_.empty()) GTEST_SKIP() << "GPU test skipped: " << folio_why_;  \
  } while (0)

inline int gpu_count() {
  auto n = device_count();
  return n.ok() ? *n : 0;
}

// Skips a test that needs n GPUs (tensor parallelism) on a machine with fewer.
#define FOLIO_REQUIRE_GPUS(n)                                                          \
  do {                                                                                 \
    FOLIO_REQUIRE_GPU();                                                               \
    const int folio_gpus_ = ::folio::cuda::testing::gpu_count();                       \
    if (folio_gpus_ < (n))                                                             \
      GTEST_SKIP() << "tensor-parallel test skipped: needs " << (n) << " GPUs, found " \
                   << folio_gpus_;                                                     \
  } while (0)

#define FOLIO_ASSERT_OK(expr)                         \
  do {                                                \
    const ::folio::Status folio_st_ = (expr);         \
    ASSERT_TRUE(folio_st_.ok()) << folio_st_.to_string(); \
  } while (0)

inline uint16_t to_bits(DType dt, float f) {
  if (dt == DType::kBF16) return static_cast<__nv_bfloat16_raw>(__float2bfloat16(f)).x;
  return static_cast<__half_raw>(__float2half(f)).x;
}

inline float from_bits(DType dt, uint16_t b) {
  if (dt == DType::kBF16) {
    __nv_bfloat16_raw r;
    r.x = b;
    return __bfloat162float(__nv_bfloat16(r));
  }
  __half_raw r;
  r.x = b;
  return __half2float(__half(r));
}

inline std::vector<float> random_vec(size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Rounds to the dtype in place, so host and device see the same numbers.
inline std::vector<float> rounded(DType dt, std::vector<float> v) {
  for (auto& x : v) x = from_bits(dt, to_bits(dt, x));
  return v;
}

// A device array of 16-bit elements of one dtype.
struct DevTensor {
  DType dt = DType::kBF16;
  size_t n = 0;
  DeviceBuffer buf;

  static DevTensor upload(DType dt, const std::vector<float>& host) {
    DevTensor t{dt, host.size(), {}};
    std::vector<uint16_t> bits(host.size());
    for (size_t i = 0; i < host.size(); ++i) bits[i] = to_bits(dt, host[i]);
    t.buf = std::move(DeviceBuffer::allocate(bits.size() * 2).value());
    EXPECT_TRUE(copy(t.buf.data(), bits.data(), bits.size() * 2).ok());
    return t;
  }
  static DevTensor poisoned(DType dt, size_t n) {
    DevTensor t{dt, n, std::move(DeviceBuffer::allocate(n * 2).value())};
    t.poison();
    return t;
  }
  void poison() { EXPECT_TRUE(memset_async(buf.data(), 0xFF, n * 2).ok()); }  // NaN in both
  std::vector<float> download() const {
    std::vector<uint16_t> bits(n);
    EXPECT_TRUE(copy(bits.data(), buf.data(), n * 2).ok());
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = from_bits(dt, bits[i]);
    return out;
  }
  void* data() const { return buf.data(); }
};

template <typename T>
DeviceBuffer upload_raw(const std::vector<T>& host) {
  DeviceBuffer b = std::move(DeviceBuffer::allocate(host.size() * sizeof(T)).value());
  EXPECT_TRUE(copy(b.data(), host.data(), host.size() * sizeof(T)).ok());
  return b;
}

// ||a - b|| / ||b||; infinity when a holds a NaN or the sizes differ (an unwritten poisoned
// element shows up here).
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline const char* dtype_label(DType dt) { return dtype_name(dt); }

}  // namespace folio::cuda::testing
