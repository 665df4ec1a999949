// The typed device pointers every paged-attention kernel reads, filled from PagedAttentionParams
// in one place: each kernel's argument struct derives from PagedPointers (so kernels still say
// a.q, a.block_table), and prefill v2 and v3, which take the same geometry, share PrefillArgs.
// Only .cu/.cuh files include this.
#pragma once

#include <cstdint>

#include "backend/cuda/attention_params.h"

namespace folio::cuda {

template <typename T>
struct PagedPointers {
  const T* q;
  const T* k_cache;
  const T* v_cache;
  T* out;
  const int32_t* query_start;
  const int32_t* context_lens;
  const int32_t* block_table_start;
  const int32_t* block_table;

  void set_pointers(const PagedAttentionParams& p) {
    q = static_cast<const T*>(p.q);
    k_cache = static_cast<const T*>(p.k_cache);
    v_cache = static_cast<const T*>(p.v_cache);
    out = static_cast<T*>(p.out);
    query_start = p.query_start;
    context_lens = p.context_lens;
    block_table_start = p.block_table_start;
    block_table = p.block_table;
  }
};

// Prefill v2 (mma.sync) and v3 (wgmma): pointers, geometry and the base-2 softmax scale.
template <typename T>
struct PrefillArgs : PagedPointers<T> {
  int num_heads, num_kv_heads, head_dim, block_size, row_tiles;
  int block_shift;   // log2(block_size) when it is a power of two, else -1 (divide)
  float scale_log2;  // scale * log2(e): the softmax runs in base 2

  void set(const PagedAttentionParams& p, int tiles) {
    this->set_pointers(p);
    num_heads = p.num_heads;
    num_kv_heads = p.num_kv_heads;
    head_dim = p.head_dim;
    block_size = p.block_size;
    block_shift = (p.block_size & (p.block_size - 1)) == 0 ? __builtin_ctz(p.block_size) : -1;
    row_tiles = tiles;
    scale_log2 = p.scale * 1.4426950408889634f;
  }
};

}  // namespace folio::cuda
