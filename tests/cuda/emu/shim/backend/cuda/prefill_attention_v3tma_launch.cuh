// Host emulation of src/backend/cuda/prefill_attention_v3tma_launch.cuh (same API): the kernel
// runs on the SIMT emulator over the same work items, with FOLIO_EMU_SMS (default 2) standing in
// for the SM count of a persistent launch, so that each emulated block walks many items.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/prefill_attention_items.cuh"
#include "backend/cuda/prefill_attention_v3tma.cuh"

namespace folio::cuda::prefill_detail::v3tma_ring {

template <typename T, typename M = Maps>
Status launch_tma_kernel(void (*kernel)(Args<T>, M, int), const Args<T>& a,
                         const PagedAttentionParams& p, const PrefillPlan& plan, int threads,
                         void*, const char*, M maps = {}, size_t bytes = v3pw_ring::kSmemBytes) {
  FOLIO_RETURN_IF_ERROR(encode_maps(&maps, p));
  maps.ticket_slot = item_deal::next_ticket_slot();
  const int64_t items = static_cast<int64_t>(a.row_tiles) * p.num_seqs * a.num_kv_heads;
  int blocks = static_cast<int>(items);
  if (persistent_launch(plan, static_cast<int64_t>(a.row_tiles) * p.num_seqs)) {
    const char* e = std::getenv("FOLIO_EMU_SMS");
    blocks = static_cast<int>(std::min<int64_t>(items, e != nullptr ? std::atoi(e) : 2));
  }
  emu::launch(kernel, dim3(blocks), threads, bytes, a, maps, p.num_seqs);
  return Status();
}

}  // namespace folio::cuda::prefill_detail::v3tma_ring
