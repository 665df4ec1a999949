// Programmatic dependent launch (sm_90): lets a kernel start while the kernel before it on the
// stream is still finishing, so the launch, the block scheduling and (for the skinny GEMM) the
// first weight loads overlap the predecessor's tail instead of following it. At batch-1 decode a
// step is ~300 kernels whose work is a few microseconds each, so these boundaries are a sizeable
// share of the step (see NOTES.md for the measurement).
//
// Contract for a kernel launched with launch_pdl:
//   - pdl_wait() before its first read of anything an earlier kernel wrote, and before its first
//     global write (the predecessor may still be reading); it returns once every earlier kernel
//     on the stream has completed and its writes are visible. Work that touches only data no
//     kernel writes (weights) may come before it.
//   - pdl_launch_dependents() may come anywhere: from then on the next PDL-launched kernel may
//     start (and sit in its own pdl_wait). Without it, the next kernel starts at this one's end.
// Both are no-ops when the kernel was launched normally, so the device side is always safe; the
// danger is only a launch_pdl of a kernel that lacks pdl_wait. Stream capture records these
// launches as programmatic graph edges (CUDA 12.3+). FOLIO_PDL=0 launches normally.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.h"

namespace folio::cuda {

__device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization allowed.
template <typename... Params, typename... Args>
Status launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, void* stream,
                  const char* name, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = as_stream(stream);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  if (e != cudaSuccess) return cuda_status(e, name);  // which clears it (cuda_check.h)
  return launch_status(name);
}

}  // namespace folio::cuda
