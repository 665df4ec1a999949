// The fp32-output lm_head GEMM against a double-precision loop on both paths (cuBLASLt tuned and
// untuned, cublasGemmEx), the tuned path's plan cache, prepare() then CUDA-graph capture, and the
// refusal to create a plan during capture. Tolerance 1e-4: fp32 output (bf16 output would miss it
// by ~30x).
#include "backend/cuda/logits_gemm.h"
#include "backend/cuda/skinny_gemm.h"

#include <cuda_runtime.h>

#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;
using testing::rel_error;
using testing::rounded;

std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w, int m, int n,
                             int k) {
  std::vector<float> y(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int e = 0; e < k; ++e)
        acc += static_cast<double>(x[static_cast<size_t>(i) * k + e]) *
               w[static_cast<size_t>(j) * k + e];
      y[static_cast<size_t>(i) * n + j] = static_cast<float>(acc);
    }
  return y;
}

struct F32 {
  DeviceBuffer buf;
  size_t n;
  explicit F32(size_t n_) : buf(std::move(DeviceBuffer::allocate(n_ * 4).value())), n(n_) {
    EXPECT_TRUE(memset_async(buf.data(), 0xFF, n * 4).ok());  // NaN
  }
  float* data() const { return buf.as<float>(); }
  std::vector<float> download() const {
    std::vector<float> v(n);
    EXPECT_TRUE(copy(v.data(), buf.data(), n * 4).ok());
    return v;
  }
};

class LogitsGemmTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
  DType dt() const { return GetParam(); }
  std::mt19937 rng{5};
};

TEST_P(LogitsGemmTest, EveryPathMatchesReference) {
  struct Variant {
    LogitsGemmPath path;
    GemmAutotune tune;
    const char* name;
  };
  const Variant variants[] = {{LogitsGemmPath::kLt, GemmAutotune::kOn, "lt tuned"},
                              {LogitsGemmPath::kLt, GemmAutotune::kOff, "lt heuristic"},
                              {LogitsGemmPath::kGemmEx, GemmAutotune::kOff, "gemmex"}};
  struct Shape {
    int m, n, k;
  };
  for (const Variant& v : variants) {
    auto g = LogitsGemm::create(v.path, v.tune, 0);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ((*g)->path(), v.path);
    for (Shape s : {Shape{1, 3000, 512}, Shape{7, 1001, 96}, Shape{64, 512, 256}}) {
      auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(s.m) * s.k, rng));
      auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(s.n) * s.k, rng));
      auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
      F32 y(static_cast<size_t>(s.m) * s.n);
      for (int rep = 0; rep < 2; ++rep)  // the second call reuses the plan
        FOLIO_ASSERT_OK(
            (*g)->matmul_nt_f32(dt(), dx.data(), dw.data(), y.data(), s.m, s.n, s.k, nullptr));
      EXPECT_LT(rel_error(y.download(), reference(x, w, s.m, s.n, s.k)), 1e-4)
          << v.name << " " << s.m << "x" << s.n << "x" << s.k;
    }
    EXPECT_EQ((*g)->cached_plans(), v.path == LogitsGemmPath::kLt ? 3u : 0u) << v.name;
    if (v.tune == GemmAutotune::kOff)
      EXPECT_EQ((*g)->tuned_plans(), 0u) << v.name;
    else
      EXPECT_GE((*g)->tuned_plans(), 1u) << v.name;
  }
}

TEST_P(LogitsGemmTest, PrepareThenCaptureAndReplay) {
  auto g = LogitsGemm::create(LogitsGemmPath::kLt, GemmAutotune::kOn, 0);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const int m = 3, n = 2048, k = 256;
  auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k, rng));
  auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(n) * k, rng));
  auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
  F32 y(static_cast<size_t>(m) * n);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the poisoning ran on the legacy stream
  // Without a plan, capture refuses to create one.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status refused = (*g)->matmul_nt_f32(dt(), dx.data(), dw.data(), y.data(), m, n, k, s);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphDestroy(graph);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("capturing"), std::string::npos) << refused.to_string();
  EXPECT_EQ((*g)->cached_plans(), 0u);
  // prepare, capture, replay.
  FOLIO_ASSERT_OK((*g)->prepare(dt(), dx.data(), dw.data(), y.data(), m, n, k, s));
  ASSERT_EQ(memset_async(y.data(), 0xFF, y.n * 4, s).ok(), true);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status st = (*g)->matmul_nt_f32(dt(), dx.data(), dw.data(), y.data(), m, n, k, s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  FOLIO_ASSERT_OK(st);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_LT(rel_error(y.download(), reference(x, w, m, n, k)), 1e-4);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// Decode-sized m goes to skinny_gemm_f32 (no cuBLAS plan) and agrees with the reference; m past
// the cut still takes the lt path.
TEST_P(LogitsGemmTest, SmallMRunsSkinnyKernel) {
  auto g = LogitsGemm::create(LogitsGemmPath::kLt, GemmAutotune::kOff, kSkinnyMaxM);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const int n = 3001, k = 512;
  for (int m : {1, 3, kSkinnyMaxM, kSkinnyMaxM + 1}) {
    auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k, rng));
    auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(n) * k, rng));
    auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
    F32 y(static_cast<size_t>(m) * n);
    FOLIO_ASSERT_OK((*g)->matmul_nt_f32(dt(), dx.data(), dw.data(), y.data(), m, n, k, nullptr));
    EXPECT_LT(rel_error(y.download(), reference(x, w, m, n, k)), 1e-4) << "m " << m;
    EXPECT_EQ((*g)->cached_plans(), m <= kSkinnyMaxM ? 0u : 1u) << "m " << m;
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, LogitsGemmTest, ::testing::Values(DType::kBF16, DType::kFP16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace folio::cuda
