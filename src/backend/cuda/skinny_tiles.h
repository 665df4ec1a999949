// Which warp tile (skinny_gemm.h's SkinnyVariant) a skinny product gets when the caller says
// kDefault: the measuring switches FOLIO_SKINNY_VARIANT and FOLIO_SKINNY_SMALL, and the tile of
// the small products (o_proj, down) by the GPU's DRAM rate. Host code, no CUDA types.
//
// Small products (dtype output, at most kSkinnySmallRows rows): under r4u2 such a product has one
// block of 8 warps per SM (4096 rows: 128 blocks), 32 KB of weights in flight per SM; r2u4
// doubles the warps at the same bytes per warp. B3 on the H100 (session 9, 4 rounds alternated):
// 5.765-5.812 ms with r2u4 against 5.812-5.835 with r4u2 (r4u4 5.91, r1u8 6.17-6.20). On the H200
// (session 23, 5 rounds over two calls): r4u2 4.338-4.348 against 4.382-4.424 (NOTES.md).
#pragma once

#include <string>

#include "backend/cuda/skinny_gemm.h"

namespace folio::cuda {

inline constexpr int kSkinnySmallRows = 8192;

// A tile's name (r4u2, r2u4, r1u4, r1u8, r4u4); kDefault for any other.
SkinnyVariant skinny_variant_named(const std::string& name);

// FOLIO_SKINNY_VARIANT (read once): replaces kDefault on every product, for timing the tiles in
// place (B3), where the figures differ from the isolated benchmark's; kDefault when unset.
SkinnyVariant skinny_variant_from_env();

// The small products' tile on a GPU whose DRAM peaks at `peak_gbps` (DeviceInfo::
// peak_memory_gbps): r2u4 below kFastDramGbps (fast_dram.h; the H100's best), r4u2 at or above
// it (the H200's).
SkinnyVariant skinny_small_tile_for(double peak_gbps);

// FOLIO_SKINNY_SMALL (read once) when set, else skinny_small_tile_for the current device.
SkinnyVariant skinny_small_tile();

}  // namespace folio::cuda
