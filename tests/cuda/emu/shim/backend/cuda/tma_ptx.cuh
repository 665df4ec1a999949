// Emulated stand-in for src/backend/cuda/tma_ptx.cuh (same API): expect_tx and TMA copies on the
// mbarrier model of emu_async.h. A 3-D tile copy reads the box of the map (shim tensor_map.h)
// at the given coordinates, elements outside the tensor as zeros, and writes it as the hardware's
// 128-byte swizzle does: rows of 128 bytes, 16-byte chunk c of the row at shared address R stored
// at chunk c ^ ((R >> 7) & 7), so a tile that is not aligned to 1024 bytes comes out permuted.
// TMA stores (the same walk backwards) are emu_bulk_store.h's.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tensor_map.h"
#include "emu_async.h"
#include "emu_bulk_store.h"

namespace folio::cuda {

inline void fence_mbarrier_init() {}

inline void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  emu::mbarrier_arrive_expect_tx(smem_addr(bar), bytes);
}

// The box of `map` at (c0, c1, c2) against 128-byte-swizzled shared memory at `base`: calls
// chunk(shared offset, global address or null outside the tensor) for each 16-byte chunk, in the
// hardware's order (chunk c of box row R at chunk c ^ ((R >> 7) & 7)).
template <typename F>
inline void walk_box(const CUtensorMap* map, int c0, int c1, int c2, uint32_t base, F&& chunk) {
  EmuTensorMap m;
  std::memcpy(&m, map, sizeof m);
  const uint32_t row_bytes = m.box[0] * m.elem_bytes;
  if (row_bytes != 128) emu::async_fail("emulated TMA: only 128-byte swizzled rows");
  if (base % 128 != 0) emu::async_fail("emulated TMA: shared memory not 128-byte aligned");
  const uint32_t per_chunk = 16 / m.elem_bytes;
  for (uint32_t i2 = 0; i2 < m.box[2]; ++i2)
    for (uint32_t i1 = 0; i1 < m.box[1]; ++i1) {
      const uint32_t row = base + (i2 * m.box[1] + i1) * row_bytes;
      const int64_t y = static_cast<int64_t>(c1) + i1, z = static_cast<int64_t>(c2) + i2;
      for (uint32_t c = 0; c < row_bytes / 16; ++c) {
        const int64_t x = static_cast<int64_t>(c0) + c * per_chunk;
        const bool in = x >= 0 && x + per_chunk <= static_cast<int64_t>(m.dims[0]) && y >= 0 &&
                        y < static_cast<int64_t>(m.dims[1]) && z >= 0 &&
                        z < static_cast<int64_t>(m.dims[2]);
        unsigned char* g = in ? const_cast<unsigned char*>(m.base) + z * m.strides[1] +
                                    y * m.strides[0] + x * m.elem_bytes
                              : nullptr;
        chunk(row + ((c ^ ((row >> 7) & 7u)) << 4), g);
      }
    }
}

inline void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                        uint64_t* bar) {
  std::vector<std::pair<uint32_t, const void*>> chunks;
  walk_box(map, c0, c1, c2, smem_addr(dst),
           [&](uint32_t s, unsigned char* g) { chunks.emplace_back(s, g); });
  emu::tma_issue(std::move(chunks), smem_addr(bar));
}

// TMA store: the same walk backwards; chunks outside the tensor are dropped.
inline void tma_store_3d(const CUtensorMap* map, int c0, int c1, int c2, const void* src) {
  std::vector<emu::BulkStoreChunk> chunks;
  walk_box(map, c0, c1, c2, smem_addr(src),
           [&](uint32_t s, unsigned char* g) { chunks.push_back({s, g}); });
  emu::bulk_store_issue(std::move(chunks));
}

inline void bulk_commit_group() { emu::bulk_commit_group(); }
template <int N>
inline void bulk_wait_group_read() {
  emu::bulk_wait_group(N);
}
template <int N>
inline void bulk_wait_group() {
  emu::bulk_wait_group(N);
}

inline void tma_prefetch_map(const CUtensorMap*) {}

}  // namespace folio::cuda
