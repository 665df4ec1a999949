// Paged KV-cache writes and copies on the GPU.
//
// Cache layout (same as the CPU reference, backend/cpu/cpu_ops.h): each layer's K and V cache is
// [num_blocks * block_size, num_kv_heads, head_dim], so slot = block_id * block_size + offset
// indexes a token's row directly and a block is one contiguous run of
// block_size * num_kv_heads * head_dim elements. Token mode is block_size 1.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/dtype.h"
#include "backend/forward_batch.h"
#include "backend/kv_cache_dtype.h"
#include "base/status.h"

namespace folio::cuda {

// Writes the step's K and V ([num_tokens, kv_width], kv_width = num_kv_heads * head_dim) into
// their cache rows at slot_mapping (device int64 [num_tokens]); negative slots are skipped.
// One launch for K and V. kv_dtype kFp8E4m3: the caches hold e4m3 bytes and each value is
// converted from dtype (round to nearest even, saturating at +-448: base/fp8.h).
Status reshape_and_cache(DType dtype, const void* k, const void* v, const int64_t* slot_mapping,
                         int num_tokens, int kv_width, void* k_cache, void* v_cache,
                         void* stream, KvCacheDtype kv_dtype = KvCacheDtype::kAuto);

// Copy-on-write: for every (src, dst) pair (device array [num_pairs]) copies block src over block
// dst in each of the num_caches caches (device array of base pointers: e.g. every layer's K and
// V), all in one launch. block_bytes must be a multiple of 16. Pairs must not chain (no dst that
// is another pair's src): the copies run concurrently.
Status copy_blocks(void* const* caches, int num_caches, size_t block_bytes,
                   const BlockCopy* pairs, int num_pairs, void* stream);

// Swap in/out: copy_blocks between two pools of the same geometry, block src of pool
// src_bases[c] over block dst of pool dst_bases[c], every pair and cache in one launch. One pool
// is a device cache, the other pinned host memory (PinnedHostBuffer: mapped, so the kernel reads
// or writes it across the bus). src_bases, dst_bases (num_caches base pointers each) and `pairs`
// are DEVICE arrays. Asynchronous on `stream`: the pinned pool must stay alive until it completes.
// (cudaMemcpyAsync per block run and cache, the first version, spent ~18 ms of host time on the
// ~8,000 copies of one preempted Llama-3-8B sequence of 2k tokens.)
Status swap_blocks(const void* const* src_bases, void* const* dst_bases, int num_caches,
                   size_t block_bytes, const BlockCopy* pairs, int num_pairs, void* stream);

}  // namespace folio::cuda
