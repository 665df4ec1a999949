// The Hopper GEMM (gemm_wgmma.h) against a double-precision loop: bf16 and fp16, m below, at and
// above the 256-row tile, accumulate on and off, one column tile over k = 14336 (every block of
// the grid holds a piece of it: the finisher adds 100+ partial sums), launches repeated and
// replayed from a CUDA graph (the flags must be back at zero each time), and Gemm's routing
// under FOLIO_GEMM_WGMMA=1. Skips off sm_90 devices (the kernel needs wgmma and TMA).
#include "backend/cuda/gemm_wgmma.h"

#include <cuda_runtime.h>

#include <cstdlib>

#include "backend/cuda/gemm.h"
#include "cuda_test_util.h"
#include "gemm_reference.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;
using testing::rel_error;
using testing::rounded;
constexpr auto reference = testing::gemm_reference;

class GemmWgmmaTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    FOLIO_REQUIRE_GPU();
    alignas(16) static char probe[16];
    if (!gemm_wgmma_fits(dt(), 1, 128, 64, probe, probe, probe))
      GTEST_SKIP() << "gemm_wgmma needs an sm_90 device";
    const size_t bytes = gemm_wgmma_workspace_bytes(gemm_wgmma_max_blocks());
    ws = std::move(DeviceBuffer::allocate(bytes).value());
    ASSERT_EQ(cudaMemset(ws.data(), 0, bytes), cudaSuccess);
  }
  DType dt() const { return GetParam(); }
  double tol() const { return dt() == DType::kBF16 ? 1e-2 : 2e-3; }
  Status run(const DevTensor& x, const DevTensor& w, DevTensor& y, int m, int n, int k, bool acc,
             cudaStream_t s = nullptr) {
    return gemm_wgmma(dt(), x.data(), w.data(), y.data(), m, n, k, acc, ws.data(), ws.bytes(), s);
  }
  DeviceBuffer ws;
  std::mt19937 rng{11};
};

TEST_P(GemmWgmmaTest, MatchesReference) {
  struct Shape {
    int m, n, k;
    bool acc;
  };
  for (Shape s : {Shape{256, 512, 1024, false}, Shape{1, 128, 64, true}, Shape{100, 384, 4096, true},
                  Shape{300, 256, 512, false}, Shape{512, 1024, 256, true},
                  Shape{64, 128, 14336, false}, Shape{40, 256, 14336, true},
                  Shape{200, 4096, 128, false}}) {
    auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(s.m) * s.k, rng));
    auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(s.n) * s.k, rng));
    auto y0 = rounded(dt(), testing::random_vec(static_cast<size_t>(s.m) * s.n, rng));
    auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
    auto dy = s.acc ? DevTensor::upload(dt(), y0)
                    : DevTensor::poisoned(dt(), static_cast<size_t>(s.m) * s.n);
    FOLIO_ASSERT_OK(run(dx, dw, dy, s.m, s.n, s.k, s.acc));
    EXPECT_LT(rel_error(dy.download(), reference(x, w, s.acc ? &y0 : nullptr, s.m, s.n, s.k)),
              tol())
        << s.m << "x" << s.n << "x" << s.k << (s.acc ? " accumulate" : "");
  }
}

TEST_P(GemmWgmmaTest, RepeatsAndReplaysFromAGraph) {
  const int m = 192, n = 512, k = 2048;  // 4 tiles (2 pairs) of 32 iterations
  auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(n) * k, rng));
  auto dw = DevTensor::upload(dt(), w);
  auto dx = DevTensor::poisoned(dt(), static_cast<size_t>(m) * k);
  auto dy = DevTensor::poisoned(dt(), static_cast<size_t>(m) * n);
  const auto fresh_x = [&] {
    auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k, rng));
    EXPECT_TRUE(copy(dx.data(), DevTensor::upload(dt(), x).data(), x.size() * 2).ok());
    return x;
  };
  for (int r = 0; r < 3; ++r) {
    const auto x = fresh_x();
    dy.poison();
    FOLIO_ASSERT_OK(run(dx, dw, dy, m, n, k, false));
    EXPECT_LT(rel_error(dy.download(), reference(x, w, nullptr, m, n, k)), tol()) << "run " << r;
  }
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status st = run(dx, dw, dy, m, n, k, false, s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  FOLIO_ASSERT_OK(st);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int r = 0; r < 3; ++r) {
    const auto x = fresh_x();
    dy.poison();
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_LT(rel_error(dy.download(), reference(x, w, nullptr, m, n, k)), tol()) << "replay " << r;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST_P(GemmWgmmaTest, GemmRoutesMidBatchesHereWhenAsked) {
  const int m = 256, n = 256, k = 512;
  auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k, rng));
  auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(n) * k, rng));
  auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
  auto dy = DevTensor::poisoned(dt(), static_cast<size_t>(m) * n);
  setenv("FOLIO_GEMM_WGMMA", "1", 1);
  auto gemm = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
  unsetenv("FOLIO_GEMM_WGMMA");
  ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
  FOLIO_ASSERT_OK((*gemm)->matmul_nt(dt(), dx.data(), dw.data(), dy.data(), m, n, k, false, nullptr));
  EXPECT_LT(rel_error(dy.download(), reference(x, w, nullptr, m, n, k)), tol());
  EXPECT_EQ((*gemm)->cached_plans(), 0u);  // no cuBLASLt plan: the product went to gemm_wgmma
}

TEST(GemmWgmma, RefusesWhatItCannotTake) {
  FOLIO_REQUIRE_GPU();
  alignas(16) static char p[64];
  if (!gemm_wgmma_fits(DType::kBF16, 4, 128, 64, p, p, p))
    GTEST_SKIP() << "gemm_wgmma needs an sm_90 device";
  EXPECT_FALSE(gemm_wgmma_fits(DType::kBF16, 4, 100, 64, p, p, p));  // n not a multiple of 128
  EXPECT_FALSE(gemm_wgmma_fits(DType::kBF16, 4, 128, 72, p, p, p));  // k not a multiple of 64
  EXPECT_FALSE(gemm_wgmma_fits(DType::kBF16, 4, 128, 64, p + 2, p, p));  // misaligned x
  EXPECT_FALSE(gemm_wgmma_fits(DType::kBF16, 0, 128, 64, p, p, p));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GemmWgmmaTest, ::testing::Values(DType::kBF16, DType::kFP16),
                         [](const auto& info) { return std::string(testing::dtype_label(info.param)); });

}  // namespace
}  // namespace folio::cuda
