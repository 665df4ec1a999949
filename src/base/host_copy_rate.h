// The host's memory copy rate, for the bandwidth floor of a CPU decode step (folio bench
// latency): what the CPU backend's memory-bound decode divides its bytes by.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace folio {

inline constexpr size_t kHostCopyRateBytes = size_t{256} << 20;  // far beyond any CPU cache

// GB/s of bytes read plus written (2 x bytes per copy, as a device-to-device copy counts): the
// median of `runs` memcpy's of `bytes`, after one untimed copy that faults the pages in.
// InvalidArgument for bytes < 1 MiB or runs < 1; ResourceExhausted when the buffers cannot be had.
Result<double> measure_host_copy_gbps(size_t bytes = kHostCopyRateBytes, int runs = 5);

}  // namespace folio
