// Internal to the GPU sampler: the split path for few rows (sample_rows_split.cu). Only .cu files
// include this.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/sample_rows.h"

namespace folio::cuda {

// Whether sample_rows may take the split path for `args` (split_rows set, few rows, no ops,
// enough scratch, not switched off).
bool sample_split_usable(const SampleRowsArgs& args);

// Token, logprob and rank of every row (num_top 0); requires sample_split_usable(args).
Status sample_rows_split(const SampleRowsArgs& args, cudaStream_t stream);

}  // namespace folio::cuda
