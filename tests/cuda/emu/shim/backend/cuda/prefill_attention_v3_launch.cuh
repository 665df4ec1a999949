// Host emulation of src/backend/cuda/prefill_attention_v3_launch.cuh (same API): the row tiles
// and dtype dispatch from the real prefill_attention_v3_rows.cuh, the launch through the SIMT
// emulator (emu::launch) instead of <<<...>>> (no shared-memory opt-in on the host).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3.cuh"
#include "backend/cuda/prefill_attention_v3_rows.cuh"

namespace folio::cuda::prefill_detail::v3k {

template <typename T>
Status launch_grid(void (*kernel)(Args<T>), const Args<T>& a, int num_seqs, int threads,
                   size_t bytes, void*, const char*) {
  const dim3 grid(a.row_tiles, num_seqs, a.num_kv_heads);
  emu::launch(kernel, grid, threads, bytes, a);
  return Status();
}

}  // namespace folio::cuda::prefill_detail::v3k
