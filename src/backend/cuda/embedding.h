// Embedding gather on the GPU: out[t, :] = table[token_ids[t], :].
// table: [vocab, hidden], out: [num_tokens, hidden], token_ids: device int32 [num_tokens].
// Ids outside [0, vocab) give a zero row (the executor validates ids on the host first; this
// only keeps a bad id from reading outside the table).
#pragma once

#include <cstdint>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

Status embedding(DType dtype, const void* table, const int32_t* token_ids, void* out,
                 int num_tokens, int hidden, int vocab, void* stream);

}  // namespace folio::cuda
