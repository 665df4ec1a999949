// skinny_gemm (m <= 4, every tile variant, fp32 output) against an fp32 CPU reference on bf16/fp16-rounded inputs, with and
// without accumulation, odd n and k; Gemm::matmul_nt routes small m to it. With
// FOLIO_CUDA_BENCH=1, the Llama-3-8B decode shapes: skinny vs cuBLASLt, weights evicted from L2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "backend/cuda/fast_dram.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/silu_and_mul.h"
#include "backend/cuda/skinny_gemm.h"
#include "backend/cuda/skinny_tiles.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;

std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& y0, int m, int n, int k, bool acc) {
  std::vector<float> y(static_cast<size_t>(m) * n);
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      double s = acc ? y0[static_cast<size_t>(r) * n + j] : 0.0;
      for (int i = 0; i < k; ++i)
        s += static_cast<double>(x[static_cast<size_t>(r) * k + i]) * w[static_cast<size_t>(j) * k + i];
      y[static_cast<size_t>(r) * n + j] = static_cast<float>(s);
    }
  return y;
}

// The small products' tile by the DRAM's peak rate (host only): the H100's r2u4, the H200's r4u2;
// and the switches' names.
TEST(SkinnyGemm, SmallProductTileByDramRate) {
  EXPECT_EQ(skinny_small_tile_for(3352), SkinnyVariant::kRows2Unroll4);  // H100 SXM
  EXPECT_EQ(skinny_small_tile_for(0), SkinnyVariant::kRows2Unroll4);     // unknown
  EXPECT_EQ(skinny_small_tile_for(kFastDramGbps), SkinnyVariant::kRows4Unroll2);
  EXPECT_EQ(skinny_small_tile_for(4800), SkinnyVariant::kRows4Unroll2);  // H200
  EXPECT_EQ(skinny_variant_named("r2u4"), SkinnyVariant::kRows2Unroll4);
  EXPECT_EQ(skinny_variant_named("r4u2"), SkinnyVariant::kRows4Unroll2);
  EXPECT_EQ(skinny_variant_named("bulk"), SkinnyVariant::kDefault);
}

TEST(SkinnyGemm, MatchesReference) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(3);
  for (DType dt : {DType::kBF16, DType::kFP16})
    for (int m : {1, 2, 3, 4})
      for (auto [n, k] : {std::pair{37, 8}, std::pair{100, 1032}, std::pair{4099, 4096},
                          std::pair{64, 14336}, std::pair{17, 296}})
        for (bool acc : {false, true}) {
          SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n) + " k " +
                       std::to_string(k) + (acc ? " acc" : ""));
          auto x = testing::rounded(dt, testing::random_vec(static_cast<size_t>(m) * k, rng));
          auto w = testing::rounded(dt, testing::random_vec(static_cast<size_t>(n) * k, rng));
          auto y0 = testing::rounded(dt, testing::random_vec(static_cast<size_t>(m) * n, rng));
          DevTensor dx = DevTensor::upload(dt, x), dw = DevTensor::upload(dt, w);
          DevTensor dy = acc ? DevTensor::upload(dt, y0) : DevTensor::poisoned(dt, y0.size());
          const auto want = reference(x, w, y0, m, n, k, acc);
          for (SkinnyVariant v : {SkinnyVariant::kDefault, SkinnyVariant::kRows1Unroll4,
                                  SkinnyVariant::kRows1Unroll8, SkinnyVariant::kRows4Unroll2,
                                  SkinnyVariant::kRows4Unroll4}) {
            if (acc) dy = DevTensor::upload(dt, y0);
            FOLIO_ASSERT_OK(
                skinny_gemm(dt, dx.data(), dw.data(), dy.data(), m, n, k, acc, nullptr, v));
            EXPECT_LT(testing::rel_error(dy.download(), want), 1e-2) << "variant " << int(v);
          }
          if (acc) continue;
          auto yf = DeviceBuffer::allocate(sizeof(float) * m * n);
          ASSERT_TRUE(yf.ok());
          FOLIO_ASSERT_OK(skinny_gemm_f32(dt, dx.data(), dw.data(),
                                          static_cast<float*>(yf->data()), m, n, k, nullptr));
          std::vector<float> got(static_cast<size_t>(m) * n);
          cudaMemcpy(got.data(), yf->data(), sizeof(float) * got.size(), cudaMemcpyDeviceToHost);
          EXPECT_LT(testing::rel_error(got, want), 1e-4) << "fp32 output";
        }
}

// skinny_gemm_silu is gate_up then silu_and_mul in one launch: the same bits as the two
// launches (same per-row sums, same rounding points), and close to an fp64 reference.
TEST(SkinnyGemm, SiluFusedEqualsGemmThenSiluAndMul) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(11);
  for (DType dt : {DType::kBF16, DType::kFP16})
    for (int m : {1, 2, 3, 4})
      for (auto [inter, k] : {std::pair{37, 8}, std::pair{100, 1032}, std::pair{3, 4096},
                              std::pair{1433, 4096}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " m " + std::to_string(m) + " inter " +
                     std::to_string(inter) + " k " + std::to_string(k));
        auto x = testing::rounded(dt, testing::random_vec(static_cast<size_t>(m) * k, rng));
        auto w = testing::rounded(dt, testing::random_vec(static_cast<size_t>(2) * inter * k, rng));
        DevTensor dx = DevTensor::upload(dt, x), dw = DevTensor::upload(dt, w);
        DevTensor gate_up = DevTensor::poisoned(dt, static_cast<size_t>(m) * 2 * inter);
        DevTensor two = DevTensor::poisoned(dt, static_cast<size_t>(m) * inter);
        DevTensor fused = DevTensor::poisoned(dt, static_cast<size_t>(m) * inter);
        FOLIO_ASSERT_OK(skinny_gemm(dt, dx.data(), dw.data(), gate_up.data(), m, 2 * inter, k,
                                    false, nullptr, SkinnyVariant::kRows4Unroll2));
        FOLIO_ASSERT_OK(silu_and_mul(dt, gate_up.data(), two.data(), m, inter, nullptr));
        FOLIO_ASSERT_OK(
            skinny_gemm_silu(dt, dx.data(), dw.data(), fused.data(), m, inter, k, nullptr));
        const std::vector<float> got = fused.download();
        EXPECT_EQ(got, two.download());
        const auto g = reference(x, w, {}, m, 2 * inter, k, false);
        std::vector<float> want(static_cast<size_t>(m) * inter);
        for (int r = 0; r < m; ++r)
          for (int i = 0; i < inter; ++i) {
            const double a = g[static_cast<size_t>(r) * 2 * inter + i];
            const double b = g[static_cast<size_t>(r) * 2 * inter + inter + i];
            want[static_cast<size_t>(r) * inter + i] = static_cast<float>(a / (1 + std::exp(-a)) * b);
          }
        EXPECT_LT(testing::rel_error(got, want), 2e-2);
      }
}

TEST(SkinnyGemm, GemmRoutesSmallMAndAgreesWithCublas) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(4);
  auto gemm = Gemm::create(32u << 20, GemmAutotune::kOff, kSkinnyMaxM);
  ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
  const int n = 4352, k = 4096;  // 34 MiB of weights: over FOLIO_SKINNY_MIN_MIB=32 too
  for (int m : {1, 3, 4, 5}) {
    auto x = testing::random_vec(static_cast<size_t>(m) * k, rng);
    auto w = testing::random_vec(static_cast<size_t>(n) * k, rng);
    DevTensor dx = DevTensor::upload(DType::kBF16, x), dw = DevTensor::upload(DType::kBF16, w);
    DevTensor a = DevTensor::poisoned(DType::kBF16, static_cast<size_t>(m) * n);
    DevTensor b = DevTensor::poisoned(DType::kBF16, static_cast<size_t>(m) * n);
    FOLIO_ASSERT_OK((*gemm)->matmul_nt(DType::kBF16, dx.data(), dw.data(), a.data(), m, n, k, false,
                                       nullptr));
    EXPECT_EQ((*gemm)->routes_to_skinny(m, n, k, dx.data(), dw.data(), a.data()),
              m <= kSkinnyMaxM);
    if (m <= kSkinnyMaxM) {
      FOLIO_ASSERT_OK(
          skinny_gemm(DType::kBF16, dx.data(), dw.data(), b.data(), m, n, k, false, nullptr));
      EXPECT_EQ((*gemm)->cached_plans(), 0u) << "m " << m << " should not need a cuBLASLt plan";
      EXPECT_LT(testing::rel_error(a.download(), b.download()), 1e-6) << "m " << m;
    } else {
      EXPECT_EQ((*gemm)->cached_plans(), 1u);
    }
  }
  // A small matrix at m 1 goes to the skinny kernel too, unless FOLIO_SKINNY_MIN_MIB keeps it on
  // cuBLASLt (read once per process).
  const char* min_mib = std::getenv("FOLIO_SKINNY_MIN_MIB");
  const bool small_on_cublas = min_mib && std::atoi(min_mib) > 0;
  auto small = Gemm::create(32u << 20, GemmAutotune::kOff, kSkinnyMaxM);
  ASSERT_TRUE(small.ok());
  DevTensor sx = DevTensor::upload(DType::kBF16, testing::random_vec(256, rng));
  DevTensor sw = DevTensor::upload(DType::kBF16, testing::random_vec(256 * 300, rng));
  DevTensor sy = DevTensor::poisoned(DType::kBF16, 300);
  FOLIO_ASSERT_OK(
      (*small)->matmul_nt(DType::kBF16, sx.data(), sw.data(), sy.data(), 1, 300, 256, false, nullptr));
  EXPECT_EQ((*small)->cached_plans(), small_on_cublas ? 1u : 0u);
  EXPECT_FALSE(skinny_gemm_supported(kSkinnyMaxM + 1, 64, nullptr, nullptr, nullptr));
  EXPECT_FALSE(skinny_gemm_supported(1, 12, nullptr, nullptr, nullptr));  // k % 8
}

TEST(SkinnyGemm, BenchAgainstCublas) {
  FOLIO_REQUIRE_GPU();
  if (!std::getenv("FOLIO_CUDA_BENCH")) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1";
  auto cublas = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
  ASSERT_TRUE(cublas.ok());
  // L2 eviction by reading (a 256 MiB product): a memset would leave 50 MB of dirty lines whose
  // write-back the timed kernel would pay for (~9 us per call on the H100).
  std::mt19937 frng(7);
  DevTensor flush_w = DevTensor::poisoned(DType::kBF16, size_t{16384} * 8192);
  DevTensor flush_x = DevTensor::upload(DType::kBF16, testing::random_vec(8192, frng));
  DevTensor flush_y = DevTensor::poisoned(DType::kBF16, 16384);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::mt19937 rng(5);
  struct S { const char* name; int n, k; };
  for (S s : {S{"qkv", 6144, 4096}, S{"o_proj", 4096, 4096}, S{"gate_up", 28672, 4096},
              S{"down", 4096, 14336}, S{"lm_head", 128256, 4096}}) {
    DevTensor w = DevTensor::upload(DType::kBF16, testing::random_vec(size_t{1} * s.n * s.k, rng));
    for (int m : {1, 2, 4}) {
      DevTensor x = DevTensor::upload(DType::kBF16, testing::random_vec(size_t{1} * m * s.k, rng));
      DevTensor y = DevTensor::poisoned(DType::kBF16, size_t{1} * m * s.n);
      auto time = [&](auto fn) {
        float best = 1e9f;
        for (int it = 0; it < 6; ++it) {
          EXPECT_TRUE(skinny_gemm(DType::kBF16, flush_x.data(), flush_w.data(), flush_y.data(), 1,
                                  16384, 8192, false, nullptr)
                          .ok());  // evict L2
          cudaEventRecord(e0);
          EXPECT_TRUE(fn().ok());
          cudaEventRecord(e1);
          cudaEventSynchronize(e1);
          float ms = 0;
          cudaEventElapsedTime(&ms, e0, e1);
          if (it > 0) best = std::min(best, ms);
        }
        return best * 1000.f;
      };
      const float us_lt = time([&] {
        return (*cublas)->matmul_nt(DType::kBF16, x.data(), w.data(), y.data(), m, s.n, s.k, false,
                                    nullptr);
      });
      const double bytes = 2.0 * s.n * s.k;
      std::printf("skinny %-8s m %2d: cuBLASLt %7.1f us %5.2f TB/s |", s.name, m, us_lt,
                  bytes / us_lt / 1e6);
      for (SkinnyVariant v : {SkinnyVariant::kDefault, SkinnyVariant::kRows1Unroll4,
                              SkinnyVariant::kRows1Unroll8, SkinnyVariant::kRows4Unroll2,
                              SkinnyVariant::kRows4Unroll4}) {
        const float us = time([&] {
          return skinny_gemm(DType::kBF16, x.data(), w.data(), y.data(), m, s.n, s.k, false,
                             nullptr, v);
        });
        std::printf(" v%d %6.1f us %5.2f", int(v), us, bytes / us / 1e6);
      }
      std::printf(" TB/s\n");
    }
  }
}

}  // namespace
}  // namespace folio::cuda
