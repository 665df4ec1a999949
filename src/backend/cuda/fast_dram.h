// Where kernels whose best form was measured to differ between the H100 SXM (3352 GB/s DRAM peak)
// and the H200 (4800) draw the line: at or above kFastDramGbps, the H200's form (tc's L2
// prefetch by line on every grid: decode_tc_l2_ahead.h; tc's register form for an fp8 cache:
// decode_tc_ring.h; tc for token-mode grids of one wave: DecodeCacheFormat in
// decode_attention.h; the skinny GEMV's r4u2 tile for small products: skinny_tiles.h). Only those
// two GPUs were measured; the rate is DeviceInfo::peak_memory_gbps (device_memory.h), a
// datasheet-like figure from the driver.
#pragma once

namespace folio::cuda {

inline constexpr double kFastDramGbps = 4000;
constexpr bool fast_dram(double peak_gbps) { return peak_gbps >= kFastDramGbps; }

}  // namespace folio::cuda
