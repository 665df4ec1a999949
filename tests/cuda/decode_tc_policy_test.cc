// Decode kernel tc's launch policies, on the host: which form a launch takes (decode_tc_ring.h:
// registers, the cp.async ring, the fragment ring of 2 or 3 stages by cache, plan, page size,
// grid and DRAM rate) and its L2 prefetch (decode_tc_l2_ahead.h). The planner's own tests:
// decode_attention_plan_test.cc.
#include <gtest/gtest.h>

#include <cstdint>

#include "backend/cuda/decode_tc_l2_ahead.h"
#include "backend/cuda/decode_tc_ring.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/fast_dram.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

// tc's L2 prefetch (decode_tc_l2_ahead.h): bulk prefetches on small grids of a GPU whose DRAM
// peaks below 4 TB/s (the H100, where they were measured to help), none on its large grids;
// line prefetches on every grid at or above (the H200, where bulk ones lost and lines gained);
// none on an unknown GPU.
TEST(DecodeTcL2AheadTest, DefaultByGridAndBandwidth) {
  constexpr double kH100 = 3352, kH200 = 4800;
  auto is = [](TcL2Prefetch p, int steps, bool lines) {
    return p.steps == steps && p.lines == lines;
  };
  EXPECT_TRUE(is(tc_l2_prefetch_default(256, kH100), kTcL2AheadSteps, false));  // K1 b32 x 2048
  EXPECT_TRUE(is(tc_l2_prefetch_default(kTcL2AheadMaxBlocks, kH100), kTcL2AheadSteps, false));
  EXPECT_TRUE(is(tc_l2_prefetch_default(kTcL2AheadMaxBlocks + 1, kH100), 0, false));
  EXPECT_TRUE(is(tc_l2_prefetch_default(256, kH200), kTcL2AheadSteps, true));
  EXPECT_TRUE(is(tc_l2_prefetch_default(256 * 1000, kH200), kTcL2AheadSteps, true));  // B1, B2
  EXPECT_TRUE(is(tc_l2_prefetch_default(256, kFastDramGbps), kTcL2AheadSteps, true));
  EXPECT_TRUE(is(tc_l2_prefetch_default(256, 0), 0, false));
  EXPECT_TRUE(is(tc_l2_prefetch_default(256 * 1000, 0), 0, false));
}

// tc's default form (decode_tc_ring.h): the cp.async ring of 2 only for an fp8 cache in an
// unsplit plan below the fast-DRAM rate (the H100, or a GPU of unknown rate) or in token mode;
// the bulk ring of 2 read as fragments for a 16-bit cache in an unsplit paged plan on fast DRAM;
// registers otherwise.
TEST(DecodeTcRingTest, DefaultByCachePlanPageAndBandwidth) {
  constexpr double kH100 = 3352, kH200 = 4800;
  EXPECT_EQ(tc_ring_default(true, 1, 16, kH100, 256, 132), kTcFp8RingStages);
  EXPECT_EQ(tc_ring_default(true, 1, 16, 0, 256, 132), kTcFp8RingStages);
  EXPECT_EQ(tc_ring_default(true, 32, 16, kH100, 256, 132), 0);  // split: registers
  EXPECT_EQ(tc_ring_default(false, 1, 16, kH100, 256, 132), 0);  // 16-bit cache: registers
  EXPECT_EQ(tc_ring_default(true, 1, 16, kH200, 256, 132), 0);
  EXPECT_EQ(tc_ring_default(true, 1, 32, kH200, 256, 132), 0);
  EXPECT_EQ(tc_ring_default(true, 1, 16, kFastDramGbps, 256, 132), 0);
  EXPECT_EQ(tc_ring_default(true, 1, 1, kH200, 256, 132),
            kTcFp8RingStages);  // token mode: the ring
  EXPECT_EQ(tc_ring_default(true, 1, 8, kH200, 256, 132), 0);
  EXPECT_EQ(tc_ring_default(true, 1, 8, kH100, 256, 132), kTcFp8RingStages);
  EXPECT_EQ(tc_ring_default(true, 32, 1, kH200, 256, 132), 0);  // split token mode: registers
  EXPECT_EQ(tc_ring_default(false, 1, 1, kH200, 256, 132), 0);
  // A 16-bit cache: the bulk ring of 2 read as fragments in unsplit paged plans on fast DRAM.
  EXPECT_EQ(tc_ring_default(false, 1, 16, kH200, 256, 132), kTcFragRingStages);
  EXPECT_EQ(tc_ring_default(false, 32, 16, kH200, 256, 132), 0);  // split: registers
  // Pages under 16 tokens (token mode too): the fragment ring only past one wave of 2 blocks per
  // SM (264 on 132 SMs) and outside the ring of 3's window (396, 528]; else registers.
  EXPECT_EQ(tc_ring_default(false, 1, 8, kFastDramGbps, 256, 132), 0);
  EXPECT_EQ(tc_ring_default(false, 1, 8, kH200, 384, 132), kTcFragRingStages);
  EXPECT_EQ(tc_ring_default(false, 1, 8, kH200, 512, 132), 0);
  EXPECT_EQ(tc_ring_default(false, 1, 1, kH200, 1024, 132), kTcFragRingStages);
  EXPECT_EQ(tc_ring_default(false, 1, 1, kH200, 1024, 0), 0);  // SMs unknown
  for (bool fp8 : {false, true})
    for (int parts : {1, 32})
      for (int bs : {1, 8, 16, 32})
        for (double gbps : {0.0, kH100, kH200})
          for (int64_t grid : {128, 264, 265, 396, 397, 528, 529, 4096}) {
            const bool full_page = bs >= 16, window = grid > 396 && grid <= 528;
            const bool frags =
                !fp8 && parts == 1 && gbps == kH200 && (full_page || (grid > 264 && !window));
            EXPECT_EQ(tc_ring_fill_default(fp8, parts, bs, gbps, grid, 132),
                      frags ? kTcFillBulkFrags : kTcFillCpAsync)
                << fp8 << " " << parts << " " << bs << " " << gbps << " " << grid;
            if (frags) {
              EXPECT_EQ(tc_ring_default(fp8, parts, bs, gbps, grid, 132),
                        window ? kTcFragWaveRingStages : kTcFragRingStages);
            }
          }
}

// The fragment ring's depth by the grid (132 SMs): 3 stages (2 blocks per SM) only for grids past
// one wave of 3 per SM (396 blocks) and within two of 2 per SM (528); 2 elsewhere, and where the
// SMs are unknown.
TEST(DecodeTcRingTest, FragmentRingDepthByGrid) {
  constexpr double kH200 = 4800;
  EXPECT_EQ(tc_frag_ring_stages(256, 132), kTcFragRingStages);  // K1 b32 x 2048
  EXPECT_EQ(tc_frag_ring_stages(396, 132), kTcFragRingStages);  // one wave of 3 per SM
  EXPECT_EQ(tc_frag_ring_stages(397, 132), kTcFragWaveRingStages);
  EXPECT_EQ(tc_frag_ring_stages(512, 132), kTcFragWaveRingStages);  // b64
  EXPECT_EQ(tc_frag_ring_stages(528, 132), kTcFragWaveRingStages);  // two waves of 2 per SM
  EXPECT_EQ(tc_frag_ring_stages(529, 132), kTcFragRingStages);
  EXPECT_EQ(tc_frag_ring_stages(2048, 132), kTcFragRingStages);  // B2's 256 sequences
  EXPECT_EQ(tc_frag_ring_stages(512, 0), kTcFragRingStages);
  EXPECT_EQ(tc_frag_ring_stages(512, 114), kTcFragRingStages);  // 342 .. 456: past it
  EXPECT_EQ(tc_frag_ring_stages(400, 114), kTcFragWaveRingStages);
  EXPECT_EQ(tc_ring_default(false, 1, 16, kH200, 512, 132), kTcFragWaveRingStages);
  EXPECT_EQ(tc_ring_default(false, 1, 16, kH200, 1024, 132), kTcFragRingStages);
  EXPECT_EQ(tc_ring_default(false, 2, 16, kH200, 512, 132), 0);  // split: registers
  EXPECT_EQ(tc_ring_default(true, 1, 16, kH200, 512, 132), 0);   // fp8: registers there
  EXPECT_EQ(tc_ring_default(false, 1, 16, 3352, 512, 132), 0);   // the H100: registers
}

// Splits of long partitions count as unsplit for the form (the fragment ring over a 16-bit cache
// on fast DRAM); refined plans and shorter partitions do not.
TEST(DecodeTcRingTest, LongSplitsCountAsWhole) {
  EXPECT_TRUE(tc_split_counts_as_whole(kTcFragMinSplitTokens, false));
  EXPECT_TRUE(tc_split_counts_as_whole(4096, false));
  EXPECT_FALSE(tc_split_counts_as_whole(kTcFragMinSplitTokens / 2, false));
  EXPECT_FALSE(tc_split_counts_as_whole(4096, true));                        // refined
}

// The rate the policy reads: the driver's clock and bus width give a datasheet-like figure.
TEST(DecodeTcL2AheadTest, PeakMemoryRateOfThisGpu) {
  FOLIO_REQUIRE_GPU();
  const auto info = device_info(0);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_GT(info->peak_memory_gbps, 500) << info->name;
  EXPECT_LT(info->peak_memory_gbps, 20000) << info->name;
  FOLIO_ASSERT_OK(set_device(0));
  EXPECT_EQ(current_device_peak_memory_gbps(), info->peak_memory_gbps);
}

}  // namespace
}  // namespace folio::cuda
