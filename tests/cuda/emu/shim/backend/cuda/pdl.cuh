// Host stand-in for backend/cuda/pdl.cuh on the SIMT emulator: kernels run one after another, so
// the dependency waits are no-ops and launch_pdl is an ordinary emulated launch.
#pragma once

#include "backend/cuda/cuda_check.h"

namespace folio::cuda {

inline void pdl_wait() {}
inline void pdl_launch_dependents() {}
inline bool pdl_early_reads() { return true; }  // pdl.h: the reads before the wait (no-op here)

template <typename Kernel, typename... Args>
Status launch_pdl(Kernel kernel, dim3 grid, dim3 block, size_t smem, void* stream,
                  const char* /*name*/, Args... args) {
  emu::launch_n(kernel, grid, static_cast<int>(block.x), smem, stream, args...);
  return Status();
}

}  // namespace folio::cuda
