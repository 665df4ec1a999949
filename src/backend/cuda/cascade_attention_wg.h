// Internal to the cascade kernels (cascade_attention.cu): the launch of the wide-item partial
// kernel (cascade_attention_wg.cuh says what it does and why).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cascade_plan.h"
#include "backend/cuda/attention_params.h"
#include "base/status.h"

namespace folio::cuda::cascade_detail {

// The wgmma kernel's geometry: head_dim 128 and a block size that is a power of two in [8, 64]
// (whatever the dtypes; cascade_supported checks those).
bool wide_geometry(const PagedAttentionParams& p);

// Partials for every kv head into part_o / part_ml (the workspace's layout,
// cascade_attention.cu) of items[0, num_wide), one per block, and of the packs: pack b's items
// items[pack_start[b], pack_start[b + 1]) to one block (device array of num_packs + 1; may be
// null when num_packs is 0); stages: 2 or 3, or 4 over an fp8 cache (CascadeTuning::wgmma_stages).
// The bounded form (device_counts non-null: CascadeDevicePlan::device_counts): the kernel reads
// num_wide and num_packs from device_counts[0..1] and the grid is max_blocks wide (the host's
// num_wide and num_packs are not used). The caller checked cascade_wide_supported(p).
Status launch_wide(const PagedAttentionParams& p, const CascadeItem* items, int num_wide,
                   const int32_t* pack_start, int num_packs, const int32_t* rows, float* part_o,
                   float* part_ml, int stages, cudaStream_t stream,
                   const int32_t* device_counts = nullptr, int max_blocks = 0);

}  // namespace folio::cuda::cascade_detail
