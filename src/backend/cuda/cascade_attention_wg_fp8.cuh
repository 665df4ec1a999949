// The cascade wgmma kernel over an fp8 e4m3 cache (cascade_attention_wg.cuh's partial_body with
// C = uint8_t): what differs from a 16-bit cache. Device code, included by
// cascade_attention_wg.cuh only (so by the host emulator too: nothing here may be device-only).
//
// wgmma reads its B operands (K for S = Q K^T, V for O += P V) from shared memory in 16-bit
// panels, so an fp8 tile goes through two buffers: TMA brings each page's e4m3 rows (128 bytes,
// a whole head_dim-128 row: the maps see the cache as 16-bit pairs, 64 "elements" per row) into
// an fp8 stage (K 8 KB | V 8 KB, 128-byte swizzled), and the warpgroup converts the stage into
// one fp16 tile (the 16-bit form's K and V panels, the layout TMA gives a 16-bit cache) before
// the tile's wgmmas. The conversion is exact (every e4m3 value is an fp16 value: fp8_e4m3.cuh),
// so the products run in fp16 as decode tc's fp8 path runs its mma (Q rounded to fp16, P in
// fp16). The conversions run beside the wgmmas: V of tile k while S = Q K^T of tile k runs, K of
// tile k + 1 while O += P V of tile k runs (the K and V halves of the fp16 tile alternate), and
// the stage is refilled once its V is converted, before tile k's softmax.
//
// Shared memory with kSt fp8 stages: kSt x 16 KB + the 32 KB tile (2 stages: 64 KB, as the
// 16-bit default's; the 3-stage form's Q goes through the tile, free until tile 0 is converted).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cuda/cascade_attention_wg_args.cuh"
#include "backend/cuda/fp8_e4m3.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace folio::cuda::cascade_wide {

constexpr uint32_t kFp8TileBytes = kPanelBytes;         // 64 rows of 128 e4m3 codes
constexpr uint32_t kFp8StageBytes = 2 * kFp8TileBytes;  // K and V
// kSt fp8 stages, the fp16 tile, the barriers, and slack to align the base to 1024 bytes.
constexpr size_t smem_bytes_fp8(int stages) {
  return size_t(stages) * kFp8StageBytes + kStageBytes + 64 + 1024;
}

// Two 16-bit T values (low first) as two M values (M: the products' type, T or fp16): the Q
// fragments of an fp8 cache's fp16 products. bf16 to fp16 is exact in fp16's normal range (values
// under 2^-14 lose bits, over 65504 saturate to infinity), as in decode tc's fp8 path.
template <typename T, typename M>
__device__ __forceinline__ uint32_t as_mma(uint32_t w) {
  if constexpr (std::is_same_v<T, M>) {
    return w;
  } else {
    __nv_bfloat162 b;
    std::memcpy(&b, &w, 4);
    const __half2 h = __float22half2_rn(__bfloat1622float2(b));
    uint32_t r;
    std::memcpy(&r, &h, 4);
    return r;
  }
}

// K (kv 0) or V (kv 1) of the fp8 stage `src` (K | V, rows of 8 16-byte chunks, chunk c of row
// r at c ^ (r % 8)) into the fp16 tile `dst` (K | V, each two panels of 64 dims: dims 64 p + 8 c
// .. of row r at panel p's chunk c ^ (r % 8)). Thread tid takes chunks tid + 128 i: a warp reads
// 4 whole rows (512 contiguous bytes) per step. Every store is store_16_smem: fence it
// (fence_proxy_async_smem) and pass a block barrier before a wgmma reads dst or a TMA refills
// src.
__device__ __forceinline__ void convert_fp8_half(const unsigned char* src, unsigned char* dst,
                                                 int kv, int tid) {
  src += kv * kFp8TileBytes;
  dst += kv * kTileBytes;
#pragma unroll
  for (int i = 0; i < 64 * 8 / 128; ++i) {
    const int c = tid + 128 * i, r = c / 8, lc = c % 8, sw = r % 8;
    const uint4 codes = *reinterpret_cast<const uint4*>(src + r * 128 + ((lc ^ sw) * 16));
    // Dims 16 lc .. + 15: panel lc / 4, its chunks 2 (lc % 4) and + 1.
    unsigned char* row = dst + (lc / 4) * kPanelBytes + r * 128;
    const int c0 = 2 * (lc % 4);
    const uint4 first = e4m3x8_to_half8(make_uint2(codes.x, codes.y));
    const uint4 second = e4m3x8_to_half8(make_uint2(codes.z, codes.w));
    // The second panel's lanes store their odd chunk first, so a quarter warp's first stores
    // fall on eight different chunks of the row's banks.
    if (lc < 4) {
      store_16_smem(row + ((c0 ^ sw) * 16), first);
      store_16_smem(row + (((c0 + 1) ^ sw) * 16), second);
    } else {
      store_16_smem(row + (((c0 + 1) ^ sw) * 16), second);
      store_16_smem(row + ((c0 ^ sw) * 16), first);
    }
  }
}

}  // namespace folio::cuda::cascade_wide
