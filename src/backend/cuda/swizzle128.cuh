// The 128-byte-swizzled tile layout that wgmma's shared-memory descriptors (wgmma_ptx.cuh) and
// TMA copies with CU_TENSOR_MAP_SWIZZLE_128B (tensor_map.h) agree on, for 16-bit elements.
#pragma once

#include <cstdint>

namespace folio::cuda {

// Byte offset of element (row, col) in a 128-byte-swizzled tile of `rows` rows: col / 64 panels
// of rows x 128 bytes; row r's 16-byte chunk c at chunk c ^ (r % 8). The tile must start on a
// 1024-byte boundary for the hardware's swizzle (by address bits) to match.
__device__ __forceinline__ uint32_t sw128_offset(int row, int col, int rows) {
  return static_cast<uint32_t>((col >> 6) * rows * 128 + row * 128 +
                               ((((col >> 3) & 7) ^ (row & 7)) << 4) + (col & 7) * 2);
}

}  // namespace folio::cuda
