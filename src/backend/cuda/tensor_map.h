// Host-side encoding of TMA tensor maps (CUtensorMap, sm_90+) for the paged K/V cache. The
// encoder is the driver's cuTensorMapEncodeTiled, fetched through the runtime's entry-point
// query so the backend needs no link against libcuda.
#pragma once

#include <cuda.h>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

// A map over one layer's K or V cache, [slots, num_kv_heads, head_dim] of a 16-bit dtype, as a
// 3-D tensor (head_dim, kv head, slot) whose box is (64 elements, 1 head, box_slots slots): one
// copy lands box_slots rows of 128 bytes (half of a head_dim-128 row each) in shared memory,
// 128-byte swizzled (16-byte chunk c of row r at chunk c ^ (r % 8), given a destination aligned
// to 1024 bytes). The slot dimension is declared 2^31 - 1 long: the kernel only names slots that
// exist, and a negative slot coordinate reads as zeros (how a kernel fills keys past the end).
// head_dim must be a multiple of 64; box_slots in [1, 256].
Status encode_paged_cache_map(CUtensorMap* map, DType dt, const void* cache, int num_kv_heads,
                              int head_dim, int box_slots);

// The same, remembered per (cache, dtype, geometry, box): a layer's caches stay put, so a
// prefill step's 4 maps per layer are encoded once per engine instead of once per step. Safe to
// call from several threads (tensor-parallel workers).
Status cached_paged_cache_map(CUtensorMap* map, DType dt, const void* cache, int num_kv_heads,
                              int head_dim, int box_slots);

// A map over a query (or any row-major [num_tokens, num_heads, head_dim] array of a 16-bit
// dtype) as a 3-D tensor (head_dim, head, token) whose box is (64 elements, box_heads heads,
// box_tokens tokens): one copy lands box_heads x box_tokens rows of 128 bytes, token-major
// (row token * box_heads + head), 128-byte swizzled as above. Tokens past num_tokens (and
// negative coordinates) read as zeros. Not remembered: num_tokens changes every step, and an
// encoding is a few host microseconds.
Status encode_rows_map(CUtensorMap* map, DType dt, const void* rows, int num_tokens,
                       int num_heads, int head_dim, int box_heads, int box_tokens);

// encode_rows_map remembered per (rows, dtype, geometry, box), as cached_paged_cache_map: for
// arrays that stay put across steps (weights, the executor's activation buffers).
Status cached_rows_map(CUtensorMap* map, DType dt, const void* rows, int num_tokens, int num_heads,
                       int head_dim, int box_heads, int box_tokens);

}  // namespace folio::cuda
