// Host stand-ins for the device intrinsics the small ops use (scripts/emu-small-ops.sh), on top of
// the SIMT emulator, plus a launcher for kernels with several arguments. Host math here, so the
// emulation checks indexing and summation order, not the GPU's rounding.
#pragma once

#include <cmath>

#include "simt_emu.h"  // first: defines threadIdx, __syncthreads, __shfl_xor_sync

inline thread_local uint3 blockDim;  // simt_emu.h's kernels use constants instead

inline float rsqrtf(float x) {
  return 1.f / std::sqrt(x);
}
inline float __fmul_rn(float a, float b) {
  return a * b;
}

namespace emu {

// kernel<<<grid, threads, smem_bytes, stream>>>(args...), one block at a time. 256 spare bytes
// past the dynamic shared memory hold a kernel's static __shared__ array (rms_norm's partials).
template <typename Kernel, typename... Args>
void launch_n(Kernel kernel, dim3 grid, int threads, size_t smem_bytes, void* /*stream*/,
              Args... args) {
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block b;
        b.smem.assign(smem_bytes + 256, 0xFF);
        b.bar = std::make_unique<std::barrier<>>(threads);
        for (int w = 0; w < threads / 32; ++w)
          b.warp_bar.push_back(std::make_unique<std::barrier<>>(32));
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
          ts.emplace_back([&, t] {
            cur = &b;
            tid = t;
            threadIdx = uint3{static_cast<unsigned>(t), 0, 0};
            blockIdx = uint3{x, y, z};
            blockDim = uint3{static_cast<unsigned>(threads), 1, 1};
            kernel(args...);
          });
        for (auto& t : ts) t.join();
      }
}

}  // namespace emu
