// measure_host_copy_gbps: a positive rate on any machine, clear errors for what it cannot time.
#include "base/host_copy_rate.h"

#include <gtest/gtest.h>

namespace folio {
namespace {

TEST(HostCopyRate, MeasuresAndRejectsBadArguments) {
  auto r = measure_host_copy_gbps(size_t{16} << 20, 3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_GT(*r, 0.1);
  EXPECT_EQ(measure_host_copy_gbps(1000, 3).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(measure_host_copy_gbps(size_t{16} << 20, 0).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace folio
