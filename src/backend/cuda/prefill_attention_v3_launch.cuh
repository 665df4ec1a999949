// The host side every v3-family prefill kernel shares (v3/v3p/v3pq, v3n128, v3pw, v3pwpp): the
// plan's row tiles into Args<T> (prefill_attention_v3_rows.cuh), and the launch over the family's
// grid (row tiles, sequences, KV heads) with the kernel's dynamic shared memory opted in.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3.cuh"
#include "backend/cuda/prefill_attention_v3_rows.cuh"
#include "backend/cuda/smem_opt_in.h"

namespace folio::cuda::prefill_detail::v3k {

// kernel<<<(row tiles, num_seqs, KV heads), threads, bytes>>>(a), after the shared-memory opt-in.
template <typename T>
Status launch_grid(void (*kernel)(Args<T>), const Args<T>& a, int num_seqs, int threads,
                   size_t bytes, void* stream, const char* name) {
  FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes));
  const dim3 grid(a.row_tiles, num_seqs, a.num_kv_heads);
  kernel<<<grid, threads, bytes, as_stream(stream)>>>(a);
  return launch_status(name);
}

}  // namespace folio::cuda::prefill_detail::v3k
