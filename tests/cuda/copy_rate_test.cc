// measure_device_copy_gbps (backend/cuda/copy_rate.h): a plausible rate on the GPU (an H200
// measured 4103 GB/s, an H100 copies about 3000), the current device left as it was, and
// errors (not crashes) for what it cannot measure.
#include "backend/cuda/copy_rate.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

TEST(CopyRate, MeasuresThisGpuAndKeepsTheDevice) {
  FOLIO_REQUIRE_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  auto gbps = measure_device_copy_gbps(0);
  ASSERT_TRUE(gbps.ok()) << gbps.status().to_string();
  EXPECT_GT(*gbps, 100);    // any GPU's device memory
  EXPECT_LT(*gbps, 20000);  // not an L2-resident copy
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
}

TEST(CopyRate, RejectsWhatItCannotMeasure) {
  EXPECT_EQ(measure_device_copy_gbps(0, kCopyRateMaxBytes, 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(measure_device_copy_gbps(0, size_t{1} << 20).status().code(),
            StatusCode::kInvalidArgument);
  FOLIO_REQUIRE_GPU();
  EXPECT_EQ(measure_device_copy_gbps(1 << 20).status().code(),  // no such device
            StatusCode::kInvalidArgument);
  // ... and no error left behind for the next launch's cudaGetLastError to report (this test
  // once made the next suite's first kernel fail with "invalid device ordinal").
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace folio::cuda
