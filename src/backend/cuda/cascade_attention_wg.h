// Internal to the cascade kernels (cascade_attention.cu): the launch of the wide-item partial
// kernel (cascade_attention_wg.cuh says what it does and why).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cascade_plan.h"
#include "backend/cuda/attention_params.h"
#include "base/status.h"

namespace folio::cuda::cascade_detail {

// Partials for every kv head into part_o / part_ml (the workspace's layout,
// cascade_attention.cu) of items[0, num_wide), one per block, and of the one-row items
// items[single_begin, single_begin + num_single), `pack` per block; stages: 3, or 2
// (CascadeTuning::wgmma_stages). The caller checked cascade_wide_supported(p).
Status launch_wide(const PagedAttentionParams& p, const CascadeItem* items, int num_wide,
                   int single_begin, int num_single, int pack, const int32_t* rows, float* part_o,
                   float* part_ml, int stages, cudaStream_t stream);

}  // namespace folio::cuda::cascade_detail
