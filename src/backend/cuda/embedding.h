// Embedding gather on the GPU: out[t, :] = table[token_ids[t], :].
// table: [vocab, hidden], out: [num_tokens, hidden], token_ids: device int32 [num_tokens].
// Ids outside [0, vocab) give a zero row (the executor validates ids on the host first; this
// only keeps a bad id from reading outside the table).
// id_offset: the table holds rows [id_offset, id_offset + vocab) of the vocabulary (a
// tensor-parallel rank's slice); ids outside it give zero rows, which the all-reduce over ranks
// fills in.
#pragma once

#include <cstdint>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

Status embedding(DType dtype, const void* table, const int32_t* token_ids, void* out,
                 int num_tokens, int hidden, int vocab, void* stream, int id_offset = 0);

}  // namespace folio::cuda
