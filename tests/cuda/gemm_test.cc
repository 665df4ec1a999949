// cuBLASLt GEMM y = x · w^T (+ y) against a double-precision loop, bf16/fp16, odd shapes, the
// accumulate mode, and the per-shape plan cache.
#include "backend/cuda/gemm.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;
using testing::rel_error;
using testing::rounded;

std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>* y0, int m, int n, int k) {
  std::vector<float> y(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = y0 ? (*y0)[static_cast<size_t>(i) * n + j] : 0.0;
      for (int e = 0; e < k; ++e)
        acc += static_cast<double>(x[static_cast<size_t>(i) * k + e]) * w[static_cast<size_t>(j) * k + e];
      y[static_cast<size_t>(i) * n + j] = static_cast<float>(acc);
    }
  return y;
}

class GemmTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
  DType dt() const { return GetParam(); }
  std::mt19937 rng{42};
};

TEST_P(GemmTest, MatchesReferenceOnSeveralShapes) {
  auto gemm = Gemm::create();
  ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
  struct Shape { int m, n, k; };
  for (Shape s : {Shape{1, 512, 1024}, Shape{37, 100, 72}, Shape{128, 384, 256}, Shape{3, 24, 8}}) {
    auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(s.m) * s.k, rng));
    auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(s.n) * s.k, rng));
    auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
    auto y = DevTensor::poisoned(dt(), static_cast<size_t>(s.m) * s.n);
    FOLIO_ASSERT_OK((*gemm)->matmul_nt(dt(), dx.data(), dw.data(), y.data(), s.m, s.n, s.k,
                                       false, nullptr));
    EXPECT_LT(rel_error(y.download(), reference(x, w, nullptr, s.m, s.n, s.k)), 1e-2)
        << s.m << "x" << s.n << "x" << s.k;
  }
  EXPECT_EQ((*gemm)->cached_plans(), 4u);
}

TEST_P(GemmTest, AccumulateAddsIntoOutputAndReusesPlan) {
  auto gemm = Gemm::create();
  ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
  const int m = 9, n = 256, k = 128;
  auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k, rng));
  auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(n) * k, rng));
  auto y0 = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * n, rng, -5, 5));
  auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
  for (int rep = 0; rep < 2; ++rep) {
    auto y = DevTensor::upload(dt(), y0);
    FOLIO_ASSERT_OK((*gemm)->matmul_nt(dt(), dx.data(), dw.data(), y.data(), m, n, k, true, nullptr));
    EXPECT_LT(rel_error(y.download(), reference(x, w, &y0, m, n, k)), 1e-2);
  }
  EXPECT_EQ((*gemm)->cached_plans(), 1u);
}

INSTANTIATE_TEST_SUITE_P(DTypes, GemmTest, ::testing::Values(DType::kBF16, DType::kFP16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace folio::cuda
