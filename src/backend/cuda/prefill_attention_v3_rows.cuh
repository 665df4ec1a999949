// The plan's row tiles into Args<T> for the batch's dtype, shared by every v3-family prefill
// launcher (v3/v3p/v3pq, v3n128, v3pw, v3pwpp, v3tma, v3tmap, v3tmapp) and by the host emulator's
// stand-in for prefill_attention_v3_launch.cuh (tests/cuda/emu/shim).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3.cuh"

namespace folio::cuda::prefill_detail::v3k {

// Calls launch(args) with args = Args<T> of p for p's dtype T (launch: a lambda templated on T).
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

}  // namespace folio::cuda::prefill_detail::v3k
