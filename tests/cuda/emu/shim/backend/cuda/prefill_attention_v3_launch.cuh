// Host emulation of src/backend/cuda/prefill_attention_v3_launch.cuh (same API): the row tiles
// and dtype dispatch as there, the launch through the SIMT emulator (emu::launch) instead of
// <<<...>>> (no shared-memory opt-in on the host).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3.cuh"

namespace folio::cuda::prefill_detail::v3k {

template <typename F>
Status with_row_tiles(const PagedAttentionParams& p, const PrefillPlan& plan, F&& launch) {
  const int64_t row_tiles = (plan.max_rows + BM - 1) / BM;
  if (row_tiles == 0) return Status();
  if (row_tiles > 0x7fffffff) return invalid_argument("prefill_attention: too many rows");
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
    Args<T> a{};
    a.set(p, static_cast<int>(row_tiles));
    return launch(a);
  });
}

template <typename T>
Status launch_grid(void (*kernel)(Args<T>), const Args<T>& a, int num_seqs, int threads,
                   size_t bytes, void*, const char*) {
  const dim3 grid(a.row_tiles, num_seqs, a.num_kv_heads);
  emu::launch(kernel, grid, threads, bytes, a);
  return Status();
}

}  // namespace folio::cuda::prefill_detail::v3k
