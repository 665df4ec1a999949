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
// cascade_attention.cu) over a grid of `blocks` x kv heads: the kernel reads num_wide and
// num_packs from counts[0..1] on the device (CascadeCounts), takes items[0, num_wide) one per
// block and the packs, pack b's items items[pack_start[b], pack_start[b + 1]) to one block
// (device array of num_packs + 1; may be null when num_packs is 0); blocks past that have no
// work. stages: 2 or 3, or 4 over an fp8 cache (CascadeTuning::wgmma_stages). The caller
// checked cascade_wide_supported(p).
Status launch_wide(const PagedAttentionParams& p, const CascadeItem* items,
                   const int32_t* pack_start, const int32_t* rows, float* part_o, float* part_ml,
                   int stages, cudaStream_t stream, const void* counts, int blocks);

}  // namespace folio::cuda::cascade_detail
