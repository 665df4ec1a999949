// Decode kernel tc's default form when the plan leaves it to the launcher
// (DecodePlan::tc_ring_stages and tc_ring_bulk -1): the register form (0) or a shared-memory ring
// of 2 stages filled by cp.async or by bulk row copies (decode_attention_tc.cuh), a host-side
// policy kept apart from the launcher so that it can be tested without a GPU.
//
// Measured (src/backend/cuda/NOTES.md):
// - A 16-bit cache keeps the register form everywhere (H100, session 9: the ring was 11-22%
//   slower on every K1 shape).
// - An fp8 cache on the H100 (session 9): the ring of 2 where the plan does not split, K1 b32 x
//   2048 65.1 us against 84.1 in registers, b128 x 2048 234.2 against 264.5; B2 (fp8, 512
//   sequences) 10,240 output tok/s against 9,785. A split plan's short partitions keep the
//   registers (b1 x 8192 18.9 against 19.3).
// - An fp8 cache on the H200 (session 26): the register form prefetches K/V into L2 by line on
//   GPUs whose DRAM peaks at or above kFastDramGbps (decode_tc_l2_ahead.h; session 25) and the
//   ring form does not, and there the registers win unsplit plans too: K1 b128 x 2048 183.1 us
//   against 197.1 with the ring, b128 x 8192 648.0 against 751.0, b32 x 2048 58.5 against 57.2;
//   B2's wave (256 x 1024 / 1024, --kv-cache-dtype fp8) 10,867 / 10,838 output tok/s against
//   10,755 / 10,738, alternated in one call.
// - Token mode (block_size 1) with an fp8 cache on the H200 (session 27): K1 mixed, the ring
//   ahead at b128 x 8192 (749.5 us against 951.6 in registers) and b32 x 2048 (61.1 / 64.7),
//   behind at b48-b96 x 2048 (79.8 / 74.3 at b48, 148.4 / 139.1 at b96), level at b128 x 2048;
//   end to end B1 in token mode (--kv-cache-dtype fp8 --block-size 1) 57.97 req/s with the ring
//   against 55.89 in registers (one run each). Not profiled. Pages of 8 tokens follow pages of
//   16 (registers ahead from b48: b128 x 8192 688.7 against 739.1).
// So the ring of 2 for an fp8 cache in an unsplit plan on a GPU below kFastDramGbps (or of
// unknown rate, 0: what held before the H200 was measured), and in token mode on any GPU.
// - A 16-bit cache on the H200 (session 31): the bulk ring read as fragments (tc_frags_win), of
//   2 or 3 stages by the grid (session 32: tc_frag_ring_stages); pages under 16 tokens only on
//   some grids (session 32).
// FOLIO_TC_RING / FOLIO_TC_RING_BULK (the launcher) and DecodePlan::tc_ring_stages /
// tc_ring_bulk override it.
#pragma once

#include <cstdint>

#include "backend/cuda/fast_dram.h"

namespace folio::cuda {

inline constexpr int kTcFp8RingStages = 2;
inline constexpr int kTcFragRingStages = 2;      // 3 blocks per SM (70 KiB of stages each)
inline constexpr int kTcFragWaveRingStages = 3;  // 2 blocks per SM (105 KiB each)
// Resident blocks per SM (decode_attention_tc_smem.cuh's blocks_per_sm; decode_attention_tc.cu
// checks that they agree): the register form over a 16-bit cache, the fragment rings of 2 and 3.
inline constexpr int kTcRegisterBlocksPerSm = 2;
inline constexpr int kTcFragRingBlocksPerSm = 3, kTcFragWaveRingBlocksPerSm = 2;
// How a ring fills (DecodePlan::tc_ring_bulk; decode_attention_tc.cuh's kFill): cp.async, bulk
// rows read back as the register form's pieces, bulk rows read back as fragments (16-bit only).
inline constexpr int kTcFillCpAsync = 0, kTcFillBulkRows = 1, kTcFillBulkFrags = 2;

// Grids past one wave of 3 blocks per SM and within two of 2 per SM (on `num_sms` SMs, 0:
// unknown): where the fragment ring's 3 stages pay over its 2 (tc_frag_ring_stages).
constexpr bool tc_ring3_window(int64_t grid_blocks, int num_sms) {
  return grid_blocks > int64_t{num_sms} * kTcFragRingBlocksPerSm &&
         grid_blocks <= 2 * int64_t{num_sms} * kTcFragWaveRingBlocksPerSm;
}

// Pages of at least this many tokens take the fragment ring on every grid; smaller ones (token
// mode included) only where it was measured ahead (tc_frags_win).
inline constexpr int kTcFragFullPage = 16;

// The bulk ring read as fragments: a 16-bit cache in an unsplit plan on fast DRAM.
// - Pages of 16+ tokens, every grid (H200, session 31: K1 b128 x 2048 269.1 us against 292.5 in
//   registers, b32 75.0 / 77.8, b128 x 8192 1057.4 / 1103.3; B2's wave 9,471 / 9,386 against
//   9,147 / 9,161 output tok/s).
// - Smaller pages, whose 16-token chunks gather rows from several pages (token mode: 16), only
//   for grids past one wave of the registers' 2 blocks per SM and outside tc_ring3_window (H200,
//   session 32, K1 queued, fragments against the best other form: page 8 b48 x 2048 110.5 us
//   against 133.1 in registers, b96 207.8 / 225.2, b128 x 8192 1089.2 / 1111.6, but b32 84.6 /
//   79.6 and b64 160.0 / 152.9; token mode b48 115.5 against v2's 117.9, b96 207.2 / 224.5,
//   b128 280.1 / 281.2, but b32 84.8 against tc's registers 80.3 and b64 159.9 against v2's
//   147.3). With `num_sms` 0 (unknown) they keep the registers.
// Split plans keep the registers (b1 x 8192 19.9 / 19.7 us, B3 +1%); the H100 was not measured.
constexpr bool tc_frags_win(bool fp8_cache, int max_partitions, int block_size, double peak_gbps,
                            int64_t grid_blocks, int num_sms) {
  if (fp8_cache || max_partitions != 1 || !fast_dram(peak_gbps)) return false;
  if (block_size >= kTcFragFullPage) return true;
  return num_sms > 0 && grid_blocks > int64_t{num_sms} * kTcRegisterBlocksPerSm &&
         !tc_ring3_window(grid_blocks, num_sms);
}

// A split plan over a 16-bit cache whose partitions hold at least this many tokens (and are not
// refined per sequence on the device) counts as unsplit for the policy: its blocks stream as long
// as an unsplit grid's (the split only adds the merge). H200, session 32, K1 queued, page 16,
// the forms forced on split plans, fragment ring 2 against the registers: partitions of 1024 at
// b4 x 8192 45.3 / 46.6 us and b8 x 4096 45.3 / 47.0, of 2048 at b8 x 8192 79.4 / 81.5 and b16 x
// 4096 79.0 / 81.3, of 4096 at b16 x 8192 144.7 / 149.1; of 512 (b2 x 8192) 29.3 / 30.8, but of
// 256 (b1 x 8192) 20.4 / 19.9. Refined plans (graph buckets of a few sequences, whose device-side
// partitions shrink to 64+ tokens with short contexts) keep the registers, which issue their first
// loads before pdl_wait (B3: the fragment ring +1%).
inline constexpr int kTcFragMinSplitTokens = 1024;
constexpr bool tc_split_counts_as_whole(int partition_size, bool refined) {
  return !refined && partition_size >= kTcFragMinSplitTokens;
}

// The fragment ring's stages for a grid of `grid_blocks` on `num_sms` SMs (0: unknown): 2, which
// fits 3 blocks per SM, except in tc_ring3_window: there a second wave of the ring of 2 would run
// a third of the SMs' slots, while the ring of 3 (2 per SM, the same 24 chunks in flight per SM)
// fills both of its waves. On the H200 (session 32, K1 queued, page 16, 132 SMs) b56 / b64 x 2048
// (448 / 512 blocks) ran 140.6 / 145.3 us with 3 stages against 166.7 / 167.5 with 2, b64 x 4096
// 276.4 against 321.5; the ring of 2 won everywhere else measured: b40-b48 (one wave of 3 per SM,
// 94.1 / 107.7 against 135.5 / 136.6), b72-b128 (171.7 against 202.8 at b72, 274.0 against 278.8
// at b128), b48 x 8192, b80 x 4096.
constexpr int tc_frag_ring_stages(int64_t grid_blocks, int num_sms) {
  return tc_ring3_window(grid_blocks, num_sms) ? kTcFragWaveRingStages : kTcFragRingStages;
}

// `max_partitions`: the plan's (1: unsplit); `block_size`: tokens per cache page (1: token mode);
// `peak_gbps`: DeviceInfo::peak_memory_gbps (0 when unknown); `grid_blocks`: the launch's blocks;
// `num_sms`: the GPU's (0 when unknown).
constexpr int tc_ring_default(bool fp8_cache, int max_partitions, int block_size, double peak_gbps,
                              int64_t grid_blocks, int num_sms) {
  if (tc_frags_win(fp8_cache, max_partitions, block_size, peak_gbps, grid_blocks, num_sms))
    return tc_frag_ring_stages(grid_blocks, num_sms);
  const bool registers_win = fast_dram(peak_gbps) && block_size > 1;
  return fp8_cache && max_partitions == 1 && !registers_win ? kTcFp8RingStages : 0;
}

// How the default's ring fills (DecodePlan::tc_ring_bulk): bulk rows read as fragments where
// tc_frags_win, else cp.async.
constexpr int tc_ring_fill_default(bool fp8_cache, int max_partitions, int block_size,
                                   double peak_gbps, int64_t grid_blocks, int num_sms) {
  return tc_frags_win(fp8_cache, max_partitions, block_size, peak_gbps, grid_blocks, num_sms)
             ? kTcFillBulkFrags
             : kTcFillCpAsync;
}

}  // namespace folio::cuda
