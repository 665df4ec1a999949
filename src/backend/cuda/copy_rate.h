// A GPU's memory copy rate, measured: what the bandwidth floor of a decode step divides its bytes
// by (folio bench latency), the same figure the kernel benchmarks measure first (K1's "copy d2d").
// Plain C++ header.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace folio::cuda {

inline constexpr size_t kCopyRateMaxBytes = size_t{256} << 20;  // per buffer: 4x+ any L2
inline constexpr size_t kCopyRateMinBytes = size_t{64} << 20;

// GB/s of bytes read plus written: the median of `runs` device-to-device copies of one buffer
// into another on `device` (timed by events, after one untimed copy), each buffer
// min(max_bytes, a quarter of the free memory). The current device is restored. An error (never
// a crash) without a device or with less than 4 x kCopyRateMinBytes free.
Result<double> measure_device_copy_gbps(int device, size_t max_bytes = kCopyRateMaxBytes,
                                        int runs = 5);

}  // namespace folio::cuda
