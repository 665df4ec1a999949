// Internal to the GPU sampler: the logprobs pass over the raw rows after the draw (see
// sample_rows.h). Only .cu files include this.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/sample_rows.h"

namespace folio::cuda {

// For each row: reads out[row].token_id and fills its logprob, rank and top num_logprobs.
Status launch_row_logprobs(const SampleRowsArgs& args, cudaStream_t stream);

}  // namespace folio::cuda
