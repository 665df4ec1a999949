// Dequantization of fp8 KV cache blocks into a 16-bit scratch pool, for the prefill attention
// kernels (which read K/V as bf16/fp16 tiles through TMA or cp.async): the executor gathers the
// blocks of a group of sequences into scratch blocks, points a remapped block table at them and
// runs prefill_attention on the scratch as if it were a 16-bit cache.
//
// Layout as kv_cache_ops.h: a block is block_elems = block_size * num_kv_heads * head_dim
// consecutive elements, block id b at element b * block_elems, in every cache.
#pragma once

#include <cstdint>

#include "backend/cuda/dtype.h"
#include "backend/forward_batch.h"
#include "base/status.h"

namespace folio::cuda {

// For each (src, dst) pair of `pairs` (device array [num_pairs]): block src of the e4m3 caches
// k_cache / v_cache, converted exactly to out_dtype, into block dst of k_out / v_out. One launch
// for K and V. block_elems must be a multiple of 8; every pointer 16-byte aligned.
Status dequant_kv_blocks(DType out_dtype, const void* k_cache, const void* v_cache, void* k_out,
                         void* v_out, int64_t block_elems, const BlockCopy* pairs, int num_pairs,
                         void* stream);

}  // namespace folio::cuda
