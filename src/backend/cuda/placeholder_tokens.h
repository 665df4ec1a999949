// Async scheduling's placeholders resolved on the GPU (backend/forward_batch.h): a launched
// step's token id -(1 + j) stands for sample j of the step launched before it, whose tokens are
// still in that step's SampleOut array on the device. In place, on the stream, before the
// embedding reads the ids (and before the step's own sampling overwrites the samples).
// Reference: resolve_placeholders in backend/forward_batch.h.
// A placeholder naming no sample (j >= num_samples) becomes token 0; the executor checks them on
// the host first, so this only keeps a bad id from reading outside the array.
#pragma once

#include <cstdint>

#include "backend/cuda/sample_rows.h"
#include "base/status.h"

namespace folio::cuda {

Status resolve_placeholder_tokens(int32_t* token_ids, int num_tokens, const SampleOut* samples,
                                  int num_samples, void* stream);

// The same for the rows' placeholder penalty ops (backend/device_sampling.h; reference:
// resolve_placeholder_ops), in place in the uploaded `ops`, one block per row.
Status resolve_placeholder_ops(const DeviceSampleRow* rows, int num_rows, LogitOp* ops,
                               const SampleOut* samples, int num_samples, void* stream);

}  // namespace folio::cuda
