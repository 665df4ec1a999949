// Emulated stand-in for src/backend/cuda/tensor_map.h (same API): the map's opaque bytes hold an
// EmuTensorMap (base address, dimensions, byte strides, box, element size) that the emulated TMA
// copy (shim tma_ptx.cuh) decodes. The argument checks are the real ones (tensor_map_check.h).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "backend/cuda/dtype.h"
#include "backend/cuda/tensor_map_check.h"
#include "base/status.h"

namespace folio::cuda {

struct EmuTensorMap {
  const unsigned char* base;
  uint64_t dims[3];     // elements, innermost first
  uint64_t strides[2];  // bytes, of dims 1 and 2
  uint32_t box[3];
  uint32_t elem_bytes;
};
static_assert(sizeof(EmuTensorMap) <= sizeof(CUtensorMap), "fits the opaque map");

inline Status encode_paged_cache_map(CUtensorMap* map, DType, const void* cache, int num_kv_heads,
                                     int head_dim, int box_slots) {
  FOLIO_RETURN_IF_ERROR(check_paged_cache_map(cache, num_kv_heads, head_dim, box_slots));
  const uint64_t row = static_cast<uint64_t>(head_dim) * 2;
  const EmuTensorMap m{static_cast<const unsigned char*>(cache),
                       {static_cast<uint64_t>(head_dim), static_cast<uint64_t>(num_kv_heads),
                        0x7fffffffull},
                       {row, row * num_kv_heads},
                       {64, 1, static_cast<uint32_t>(box_slots)},
                       2};
  std::memset(map, 0, sizeof *map);
  std::memcpy(map, &m, sizeof m);
  return Status();
}

inline Status cached_paged_cache_map(CUtensorMap* map, DType dt, const void* cache,
                                     int num_kv_heads, int head_dim, int box_slots) {
  return encode_paged_cache_map(map, dt, cache, num_kv_heads, head_dim, box_slots);
}

inline Status encode_rows_map(CUtensorMap* map, DType, const void* rows, int num_tokens,
                              int num_heads, int head_dim, int box_heads, int box_tokens) {
  FOLIO_RETURN_IF_ERROR(
      check_rows_map(rows, num_tokens, num_heads, head_dim, box_heads, box_tokens));
  const uint64_t row = static_cast<uint64_t>(head_dim) * 2;
  const EmuTensorMap m{static_cast<const unsigned char*>(rows),
                       {static_cast<uint64_t>(head_dim), static_cast<uint64_t>(num_heads),
                        static_cast<uint64_t>(num_tokens)},
                       {row, row * num_heads},
                       {64, static_cast<uint32_t>(box_heads), static_cast<uint32_t>(box_tokens)},
                       2};
  std::memset(map, 0, sizeof *map);
  std::memcpy(map, &m, sizeof m);
  return Status();
}

inline Status cached_rows_map(CUtensorMap* map, DType dt, const void* rows, int num_tokens,
                              int num_heads, int head_dim, int box_heads, int box_tokens) {
  return encode_rows_map(map, dt, rows, num_tokens, num_heads, head_dim, box_heads, box_tokens);
}

}  // namespace folio::cuda
