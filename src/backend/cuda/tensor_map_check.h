// The geometry a paged-cache tensor map can describe (tensor_map.h), checked before any map is
// encoded; shared by the encoder and the host emulator's stand-in for it.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace folio::cuda {

// head_dim a multiple of the 64-column box, at least one head, a box of 1..256 slots, and the
// 16-byte-aligned base address TMA needs.
inline Status check_paged_cache_map(const void* cache, int num_kv_heads, int head_dim,
                                    int box_slots) {
  if (head_dim % 64 != 0 || num_kv_heads <= 0 || box_slots < 1 || box_slots > 256)
    return invalid_argument("tensor map: head_dim " + std::to_string(head_dim) + ", box " +
                            std::to_string(box_slots));
  if (reinterpret_cast<uintptr_t>(cache) % 16 != 0)
    return invalid_argument("tensor map: the cache is not 16-byte aligned");
  return Status();
}

// The same for a rows map (encode_rows_map): whole 64-column boxes of 1..256 heads and tokens
// within the tensor's heads, at least one token.
inline Status check_rows_map(const void* rows, int num_tokens, int num_heads, int head_dim,
                             int box_heads, int box_tokens) {
  if (head_dim % 64 != 0 || num_tokens <= 0 || num_heads <= 0 || box_heads < 1 ||
      box_heads > num_heads || box_heads > 256 || box_tokens < 1 || box_tokens > 256)
    return invalid_argument("tensor map: rows of " + std::to_string(num_tokens) + " x " +
                            std::to_string(num_heads) + " x " + std::to_string(head_dim) +
                            ", box " + std::to_string(box_heads) + " x " +
                            std::to_string(box_tokens));
  if (reinterpret_cast<uintptr_t>(rows) % 16 != 0)
    return invalid_argument("tensor map: the rows are not 16-byte aligned");
  return Status();
}

}  // namespace folio::cuda
