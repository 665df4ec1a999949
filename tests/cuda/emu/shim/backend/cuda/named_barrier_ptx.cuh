// Emulated stand-in for src/backend/cuda/named_barrier_ptx.cuh (same API, host code): the model
// (arrival counting per id, deadlock report) is in emu_block_sync.h.
#pragma once

#include "emu_block_sync.h"

namespace folio::cuda {

inline void named_barrier_sync(int id, int count) {
  emu::named_barrier(id, count, true);
}
inline void named_barrier_arrive(int id, int count) {
  emu::named_barrier(id, count, false);
}

}  // namespace folio::cuda
