// Kernels that use more than 48 KiB of dynamic shared memory must opt in, per kernel and per
// device (the attribute is per device context: with tensor parallelism each rank's GPU needs its
// own). This remembers which (kernel, device) pairs have opted in; thread-safe.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace folio::cuda {

// Sets cudaFuncAttributeMaxDynamicSharedMemorySize of `kernel` to `bytes` on the current device,
// once per (kernel, device).
Status opt_in_dynamic_smem(const void* kernel, size_t bytes);

}  // namespace folio::cuda
