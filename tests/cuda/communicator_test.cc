// The NCCL communicator on its own (dist/communicator.h): the library loads at run time, ids
// are unique, NVLink multicast stays off unless the user set it, and an init whose other rank
// never arrives ends at its deadline with a clear error. TP executors over it:
// tp_executor_test.cc.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda_test_util.h"
#include "dist/communicator.h"

namespace folio {
namespace {

// Needs the NCCL library, not a GPU: loading it, its version, a unique id, and NVLink multicast
// off in the environment unless the user chose otherwise.
TEST(Communicator, LoadsNcclMakesIdsAndLeavesNvlsOff) {
  auto version = Communicator::version();
  if (!version.ok()) GTEST_SKIP() << "NCCL not loadable here: " << version.status().message();
  std::printf("NCCL %s\n", version->c_str());
  EXPECT_EQ(version->front(), '2');
  const char* before = std::getenv("NCCL_NVLS_ENABLE");
  auto a = Communicator::unique_id();
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = Communicator::unique_id();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_NE(*a, *b);
  const char* after = std::getenv("NCCL_NVLS_ENABLE");
  ASSERT_NE(after, nullptr);
  if (before == nullptr) {
    EXPECT_STREQ(after, "0");
  }
  setenv("NCCL_NVLS_ENABLE", "1", 1);  // a user's own setting is kept
  Communicator::disable_nvls_unless_set();
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "1");
  setenv("NCCL_NVLS_ENABLE", "0", 1);
}

// One rank of two, the other never comes: init gives up at its deadline with a clear error
// (and aborts the half-made communicator) instead of waiting forever. One GPU is enough.
TEST(Communicator, InitTimesOutWhenARankNeverArrives) {
  FOLIO_REQUIRE_GPU();
  const char* blocking = std::getenv("FOLIO_NCCL_BLOCKING");
  if (blocking && std::string(blocking) == "1") GTEST_SKIP() << "blocking NCCL has no deadline";
  auto id = Communicator::unique_id();
  if (!id.ok()) GTEST_SKIP() << "NCCL not loadable here: " << id.status().message();
  FOLIO_ASSERT_OK(cuda::set_device(0));
  const auto t0 = std::chrono::steady_clock::now();
  auto comm = Communicator::init(*id, 0, 2, 3.0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("did not complete within 3 s"), std::string::npos)
      << comm.status().message();
  EXPECT_LT(s, 30.0);
}

}  // namespace
}  // namespace folio
