// The launch of the TMA-ring prefill kernels (v3tma, v3tmap, v3tmapp) over their work items; the
// host emulator has its own version of this header (tests/cuda/emu/shim) that runs them on the CPU.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/prefill_attention_items.cuh"
#include "backend/cuda/prefill_attention_v3tma.cuh"
#include "backend/cuda/smem_opt_in.h"

namespace folio::cuda::prefill_detail::v3tma_ring {

// Host: kernel<<<blocks, threads, bytes>>>(a, maps, num_seqs) over the
// row_tiles x num_seqs x num_kv_heads work items: one block per SM, each walking items
// (persistent: dealt from a counter, or blockIdx.x, + gridDim.x, ...), or one block per item
// where at most half of the items have rows (decode rows beside a long prefill: a persistent
// block would walk thousands of empty items, each costing a few dependent loads, while an empty
// block exits at once) or with FOLIO_PREFILL_PERSISTENT=0 (for comparison). maps: the kernel's
// maps, whose four K/V maps of p and item counter (ticket_slot) are set here (v3tmaq passes its
// MapsQ with the q map set); bytes: the ring's shared memory (v3tma and v3tmaq add theirs).
template <typename T, typename M = Maps>
Status launch_tma_kernel(void (*kernel)(Args<T>, M, int), const Args<T>& a,
                         const PagedAttentionParams& p, const PrefillPlan& plan, int threads,
                         void* stream, const char* name, M maps = {},
                         size_t bytes = v3pw_ring::kSmemBytes) {
  FOLIO_RETURN_IF_ERROR(encode_maps(&maps, p));
  maps.ticket_slot = item_deal::next_ticket_slot();
  if (bytes > 227 * 1024) return internal_error("prefill_attention: ring beyond shared memory");
  FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes));
  const int64_t items = static_cast<int64_t>(a.row_tiles) * p.num_seqs * a.num_kv_heads;
  if (items > 0x7fffffff) return invalid_argument("prefill_attention: too many work items");
  int blocks = static_cast<int>(items);
  if (persistent_launch(plan, static_cast<int64_t>(a.row_tiles) * p.num_seqs)) {
    int device = 0, sms = 0;
    FOLIO_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
    FOLIO_RETURN_IF_ERROR(cuda_status(
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count"));
    blocks = static_cast<int>(std::min<int64_t>(items, sms));
  }
  kernel<<<blocks, threads, bytes, as_stream(stream)>>>(a, maps, p.num_seqs);
  return launch_status(name);
}

}  // namespace folio::cuda::prefill_detail::v3tma_ring
