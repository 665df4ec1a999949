// Emulated stand-in for src/backend/cuda/mbarrier_ptx.cuh (same API, host code): the mbarrier
// model and the cp.async landing policies are in emu_async.h.
#pragma once

#include "backend/cuda/mma_ptx.cuh"
#include "emu_async.h"

namespace folio::cuda {

inline void mbarrier_init(uint64_t* bar, uint32_t count) {
  emu::mbarrier_init(smem_addr(bar), count);
}
inline void mbarrier_arrive(uint64_t* bar) {
  emu::mbarrier_arrive(smem_addr(bar));
}
inline void cp_async_mbarrier_arrive_noinc(uint64_t* bar) {
  emu::cp_async_mbarrier_arrive_noinc(smem_addr(bar));
}
inline bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
  return emu::mbarrier_try_wait_parity(smem_addr(bar), parity);
}
inline void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

}  // namespace folio::cuda
