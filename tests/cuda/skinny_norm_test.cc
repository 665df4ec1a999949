// The skinny GEMV's fused RMSNorm (SkinnyProblem::norm_weight, rms_norm_smem.cuh): the same bits
// as rms_norm then the plain skinny product, for plain, accumulating, fp32-output and gated
// (silu) products, 1-4 rows, depths whose block-kernel reduction has 3 to 32 partials; close to
// an fp64 reference; and the limits it rejects.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "backend/cuda/rms_norm.h"
#include "backend/cuda/skinny_gemm.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;

constexpr float kEps = 1e-5f;

// fp64 rms_norm(x) · w^T, x's rows normalised with weight g.
std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& g,
                             const std::vector<float>& w, int m, int n, int k) {
  std::vector<float> y(static_cast<size_t>(m) * n);
  for (int r = 0; r < m; ++r) {
    const float* xr = x.data() + static_cast<size_t>(r) * k;
    double ss = 0;
    for (int i = 0; i < k; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const double inv = 1.0 / std::sqrt(ss / k + kEps);
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int i = 0; i < k; ++i) s += xr[i] * inv * g[i] * w[static_cast<size_t>(j) * k + i];
      y[static_cast<size_t>(r) * n + j] = static_cast<float>(s);
    }
  }
  return y;
}

struct Inputs {
  std::vector<float> x, g, w;
  DevTensor dx, dg, dw, normed;
};

Inputs make_inputs(DType dt, int m, int n_rows, int k, std::mt19937& rng) {
  Inputs in;
  // A residual stream's scale (|x| up to 8) and norm weights around 1.
  in.x = testing::rounded(dt, testing::random_vec(static_cast<size_t>(m) * k, rng, -8.f, 8.f));
  in.g = testing::rounded(dt, testing::random_vec(k, rng, 0.5f, 1.5f));
  in.w = testing::rounded(dt, testing::random_vec(static_cast<size_t>(n_rows) * k, rng));
  in.dx = DevTensor::upload(dt, in.x);
  in.dg = DevTensor::upload(dt, in.g);
  in.dw = DevTensor::upload(dt, in.w);
  in.normed = DevTensor::poisoned(dt, static_cast<size_t>(m) * k);
  return in;
}

TEST(SkinnyNorm, FusedEqualsRmsNormThenGemm) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(5);
  for (DType dt : {DType::kBF16, DType::kFP16})
    for (int m : {1, 2, 3, 4})
      for (auto [n, k] : {std::pair{37, 520}, std::pair{1000, 1032}, std::pair{4099, 4096},
                          std::pair{300, 8192}}) {
        if (!skinny_norm_supported(dt, m, k, nullptr)) continue;  // m 3, 4 x 8192: over 47 KiB
        SCOPED_TRACE(std::string(dtype_name(dt)) + " m " + std::to_string(m) + " n " +
                     std::to_string(n) + " k " + std::to_string(k));
        ASSERT_TRUE(rms_norm_is_block_pack8(k));
        Inputs in = make_inputs(dt, m, n, k, rng);
        FOLIO_ASSERT_OK(rms_norm(dt, in.dx.data(), in.dg.data(), in.normed.data(), m, k, kEps,
                                 nullptr));
        const auto want = reference(in.x, in.g, in.w, m, n, k);
        auto y0 = testing::rounded(dt, testing::random_vec(static_cast<size_t>(m) * n, rng));
        for (bool acc : {false, true}) {
          DevTensor two = acc ? DevTensor::upload(dt, y0) : DevTensor::poisoned(dt, y0.size());
          DevTensor fused = acc ? DevTensor::upload(dt, y0) : DevTensor::poisoned(dt, y0.size());
          FOLIO_ASSERT_OK(skinny_gemm(dt, in.normed.data(), in.dw.data(), two.data(), m, n, k,
                                      acc, nullptr));
          SkinnyProblem pr{in.dx.data(), in.dw.data(), fused.data(), m, n, k, acc};
          pr.norm_weight = in.dg.data();
          pr.norm_eps = kEps;
          FOLIO_ASSERT_OK(skinny_gemm(dt, pr, nullptr));
          const auto got = fused.download();
          EXPECT_EQ(got, two.download()) << (acc ? "accumulate" : "overwrite");
          if (!acc) {
            EXPECT_LT(testing::rel_error(got, want), 1e-2);
          }
        }
        // fp32 output (the lm_head's form: rows of 2 per warp, 4 loads in flight).
        std::vector<float> a(static_cast<size_t>(m) * n), b(a.size());
        auto f1 = DeviceBuffer::allocate(sizeof(float) * a.size());
        auto f2 = DeviceBuffer::allocate(sizeof(float) * a.size());
        ASSERT_TRUE(f1.ok() && f2.ok());
        FOLIO_ASSERT_OK(skinny_gemm_f32(dt, in.normed.data(), in.dw.data(),
                                        static_cast<float*>(f1->data()), m, n, k, nullptr));
        SkinnyProblem pf{in.dx.data(), in.dw.data(), f2->data(), m, n, k};
        pf.f32_out = true;
        pf.norm_weight = in.dg.data();
        pf.norm_eps = kEps;
        FOLIO_ASSERT_OK(skinny_gemm(dt, pf, nullptr));
        cudaMemcpy(a.data(), f1->data(), sizeof(float) * a.size(), cudaMemcpyDeviceToHost);
        cudaMemcpy(b.data(), f2->data(), sizeof(float) * b.size(), cudaMemcpyDeviceToHost);
        EXPECT_EQ(b, a) << "fp32 output";
        EXPECT_LT(testing::rel_error(b, want), 1e-2);  // x normalised in the dtype, as rms_norm
      }
}

// The gated form (gate_up + silu_and_mul, skinny_gemm_silu) with the norm fused.
TEST(SkinnyNorm, GatedFusedEqualsRmsNormThenGated) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(7);
  for (DType dt : {DType::kBF16, DType::kFP16})
    for (int m : {1, 2, 3, 4})
      for (auto [inter, k] : {std::pair{3, 4096}, std::pair{1433, 4096}, std::pair{100, 1032}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " m " + std::to_string(m) + " inter " +
                     std::to_string(inter) + " k " + std::to_string(k));
        Inputs in = make_inputs(dt, m, 2 * inter, k, rng);
        FOLIO_ASSERT_OK(rms_norm(dt, in.dx.data(), in.dg.data(), in.normed.data(), m, k, kEps,
                                 nullptr));
        DevTensor two = DevTensor::poisoned(dt, static_cast<size_t>(m) * inter);
        DevTensor fused = DevTensor::poisoned(dt, static_cast<size_t>(m) * inter);
        FOLIO_ASSERT_OK(skinny_gemm_silu(dt, in.normed.data(), in.dw.data(), two.data(), m, inter,
                                         k, nullptr));
        SkinnyProblem pr{in.dx.data(), in.dw.data(), fused.data(), m, inter, k};
        pr.norm_weight = in.dg.data();
        pr.norm_eps = kEps;
        FOLIO_ASSERT_OK(skinny_gemm_silu(dt, pr, nullptr));
        EXPECT_EQ(fused.download(), two.download());
      }
}

TEST(SkinnyNorm, RejectsWhatItCannotFuse) {
  // The block kernel's one-pack-per-thread order: dims above 512 and up to 8192, whole packs.
  EXPECT_TRUE(rms_norm_is_block_pack8(4096));
  EXPECT_TRUE(rms_norm_is_block_pack8(8192));
  EXPECT_FALSE(rms_norm_is_block_pack8(512));  // the warp kernel's order
  EXPECT_FALSE(rms_norm_is_block_pack8(8200));
  EXPECT_FALSE(rms_norm_is_block_pack8(4100));
  EXPECT_TRUE(skinny_norm_supported(DType::kBF16, 2, 8192, nullptr));
  EXPECT_FALSE(skinny_norm_supported(DType::kBF16, 3, 8192, nullptr));  // 48 KiB of smem
  EXPECT_FALSE(skinny_norm_supported(DType::kBF16, 1, 16384, nullptr));
  EXPECT_FALSE(skinny_norm_supported(DType::kBF16, 1, 4100, nullptr));
  alignas(16) static const uint16_t g[16] = {};
  EXPECT_FALSE(skinny_norm_supported(DType::kBF16, 1, 4096, g + 1));
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(9);
  Inputs in = make_inputs(DType::kBF16, 4, 8, 8192, rng);
  DevTensor y = DevTensor::poisoned(DType::kBF16, 32);
  SkinnyProblem pr{in.dx.data(), in.dw.data(), y.data(), 4, 8, 8192};
  pr.norm_weight = in.dg.data();
  EXPECT_EQ(skinny_gemm(DType::kBF16, pr, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(skinny_gemm_silu(DType::kBF16, pr, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace folio::cuda
