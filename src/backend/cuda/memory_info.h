// Free and total device memory of the current device (cudaMemGetInfo), for the executor's memory
// planning: what the weights, the activations and the KV cache may take under
// --gpu-memory-utilization. Host-only header.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace folio::cuda {

struct MemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  size_t used_bytes() const { return total_bytes - free_bytes; }
};

Result<MemoryInfo> memory_info();

}  // namespace folio::cuda
