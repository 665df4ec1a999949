// The typed device pointers every paged-attention kernel reads, filled from PagedAttentionParams
// in one place: each kernel's argument struct derives from PagedPointers (so kernels still say
// a.q, a.block_table), and prefill v2 and v3, which take the same geometry, share PrefillArgs.
// Only .cu/.cuh files include this.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/cuda/attention_params.h"
#include "backend/cuda/fast_divmod.h"

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
  int window;        // PagedAttentionParams::sliding_window (v2 only; 0: none)
  // The per-item divisions by launch constants (fast_divmod.h): by the query group G (a row r of
  // a KV head's rows is token r / G, q head r % G of the group), by num_kv_heads, and by the work
  // items of one row tile (num_seqs x num_kv_heads; v3tma_ring::take_item).
  int group;
  FastDivmod group_div, kv_heads_div, tile_items_div;

  // The q (and out) row of row gr of KV head kvh's rows in the sequence starting at token qs.
  __device__ int64_t q_row(int qs, int kvh, int gr) const {
    const int tok = group_div.div(gr);
    return static_cast<int64_t>(qs + tok) * num_heads + kvh * group + (gr - tok * group);
  }

  void set(const PagedAttentionParams& p, int tiles) {
    this->set_pointers(p);
    num_heads = p.num_heads;
    num_kv_heads = p.num_kv_heads;
    head_dim = p.head_dim;
    block_size = p.block_size;
    block_shift = (p.block_size & (p.block_size - 1)) == 0 ? __builtin_ctz(p.block_size) : -1;
    row_tiles = tiles;
    scale_log2 = p.scale * 1.4426950408889634f;
    window = p.sliding_window;
    group = p.num_heads / p.num_kv_heads;
    group_div = FastDivmod(group);
    kv_heads_div = FastDivmod(p.num_kv_heads);
    tile_items_div = FastDivmod(std::max(1, p.num_seqs) * p.num_kv_heads);
  }
};

}  // namespace folio::cuda
