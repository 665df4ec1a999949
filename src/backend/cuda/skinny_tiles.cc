#include "backend/cuda/skinny_tiles.h"

#include <cstdlib>

#include "backend/cuda/device_memory.h"
#include "backend/cuda/fast_dram.h"

namespace folio::cuda {

SkinnyVariant skinny_variant_named(const std::string& name) {
  if (name == "r4u2") return SkinnyVariant::kRows4Unroll2;
  if (name == "r2u4") return SkinnyVariant::kRows2Unroll4;
  if (name == "r1u4") return SkinnyVariant::kRows1Unroll4;
  if (name == "r1u8") return SkinnyVariant::kRows1Unroll8;
  if (name == "r4u4") return SkinnyVariant::kRows4Unroll4;
  return SkinnyVariant::kDefault;
}

SkinnyVariant skinny_variant_from_env() {
  static const SkinnyVariant v = [] {
    const char* e = std::getenv("FOLIO_SKINNY_VARIANT");
    return skinny_variant_named(e ? e : "");
  }();
  return v;
}

SkinnyVariant skinny_small_tile_for(double peak_gbps) {
  return fast_dram(peak_gbps) ? SkinnyVariant::kRows4Unroll2 : SkinnyVariant::kRows2Unroll4;
}

SkinnyVariant skinny_small_tile() {
  static const SkinnyVariant env = [] {
    const char* e = std::getenv("FOLIO_SKINNY_SMALL");
    return skinny_variant_named(e ? e : "");
  }();
  return env != SkinnyVariant::kDefault ? env
                                        : skinny_small_tile_for(current_device_peak_memory_gbps());
}

}  // namespace folio::cuda
