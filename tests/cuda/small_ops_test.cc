// The per-layer small ops rewritten for latency: rms_norm (warp- and block-per-row kernels), rope
// (vectorised, shared cos/sin) and the fused qkv_post, against the CPU reference, against the
// kernels they replace, and against the unfused chain of GPU ops (bit for bit).
#include <cmath>

#include "backend/cuda/kv_cache_ops.h"
#include "backend/cuda/qkv_post.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/split_qkv.h"
#include "small_ops_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;
using testing::rel_error;
using testing::rounded;

double tol(DType dt) {
  return dt == DType::kBF16 ? 1e-2 : 2e-3;
}

class SmallOpsTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
  DType dt() const { return GetParam(); }
  std::mt19937 rng{4321};
};

const char* kernel_name(RmsNormKernel k) {
  return k == RmsNormKernel::kAuto ? "auto" : k == RmsNormKernel::kWarpPerRow ? "warp" : "block";
}

// dims: 16-byte packs (4096, 8192, 128), scalar (100, 36, 4100), and rows too long for the
// register-cached block kernel (40000: the reread path; 16384: several packs per thread).
TEST_P(SmallOpsTest, RmsNormKernelsMatchReference) {
  for (RmsNormKernel kern :
       {RmsNormKernel::kAuto, RmsNormKernel::kWarpPerRow, RmsNormKernel::kBlockPerRow})
    for (int dim : {4096, 8192, 16384, 128, 100, 36, 4100, 40000})
      for (int rows : {1, 3, 8, 257}) {
        if (static_cast<int64_t>(rows) * dim > 4'000'000) continue;
        auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(rows) * dim, rng, -3, 3));
        auto w = rounded(dt(), testing::random_vec(dim, rng, 0.5f, 1.5f));
        std::vector<float> ref(x.size());
        cpu::rms_norm(x.data(), w.data(), ref.data(), rows, dim, 1e-5f);
        auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
        auto y = DevTensor::poisoned(dt(), x.size());
        FOLIO_ASSERT_OK(rms_norm_with(kern, dt(), nullptr, dx.data(), dw.data(), y.data(), rows,
                                      dim, 1e-5f, nullptr));
        EXPECT_LT(rel_error(y.download(), ref), tol(dt()))
            << kernel_name(kern) << " rows " << rows << " dim " << dim;
        FOLIO_ASSERT_OK(rms_norm_with(kern, dt(), nullptr, dx.data(), dw.data(), dx.data(), rows,
                                      dim, 1e-5f, nullptr));  // in place
        EXPECT_LT(rel_error(dx.download(), ref), tol(dt()))
            << "in place, " << kernel_name(kern) << " rows " << rows << " dim " << dim;
      }
}

TEST_P(SmallOpsTest, AddRmsNormKernelsMatchReference) {
  for (RmsNormKernel kern : {RmsNormKernel::kWarpPerRow, RmsNormKernel::kBlockPerRow})
    for (int dim : {4096, 36, 40000})
      for (int rows : {1, 5}) {
        auto res = rounded(dt(), testing::random_vec(static_cast<size_t>(rows) * dim, rng, -2, 2));
        auto x = rounded(dt(), testing::random_vec(res.size(), rng, -2, 2));
        auto w = rounded(dt(), testing::random_vec(dim, rng, 0.5f, 1.5f));
        auto ref_res = res;
        std::vector<float> ref_y(res.size());
        cpu::add_rms_norm(ref_res.data(), x.data(), w.data(), ref_y.data(), rows, dim, 1e-6f);
        auto dres = DevTensor::upload(dt(), res), dx = DevTensor::upload(dt(), x);
        auto dw = DevTensor::upload(dt(), w);
        auto y = DevTensor::poisoned(dt(), res.size());
        FOLIO_ASSERT_OK(rms_norm_with(kern, dt(), dres.data(), dx.data(), dw.data(), y.data(), rows,
                                      dim, 1e-6f, nullptr));
        EXPECT_LT(rel_error(dres.download(), ref_res), tol(dt()))
            << "residual, " << kernel_name(kern) << " dim " << dim;
        EXPECT_LT(rel_error(y.download(), ref_y), tol(dt()))
            << "y, " << kernel_name(kern) << " dim " << dim;
      }
}

// head_dim 6 and 36 take the scalar path (head_dim / 2 not a multiple of 8).
TEST_P(SmallOpsTest, RopeMatchesReferenceAndLegacyKernel) {
  struct Heads {
    int nh, nkv;
  };
  for (int hd : {16, 64, 80, 128, 256, 6, 36})
    for (int T : {1, 3, 257, 2048})
      for (Heads h : {Heads{5, 1}, Heads{4, 0}}) {  // GQA, and q alone (k == nullptr)
        if (T == 2048 && hd != 128) continue;
        auto pos = testing::make_positions(T, rng);
        auto inv_freq = testing::make_inv_freq(hd);
        std::vector<double> inv_freq_d(inv_freq.begin(), inv_freq.end());
        auto q = rounded(dt(), testing::random_vec(static_cast<size_t>(T) * h.nh * hd, rng));
        auto k = rounded(dt(), testing::random_vec(static_cast<size_t>(T) * h.nkv * hd, rng));
        auto ref_q = q, ref_k = k;
        cpu::apply_rope(ref_q.data(), pos.data(), T, h.nh, hd, inv_freq_d);
        cpu::apply_rope(ref_k.data(), pos.data(), T, h.nkv, hd, inv_freq_d);
        auto dpos = testing::upload_raw(pos);
        auto dfreq = testing::upload_raw(inv_freq);
        DevTensor dq[2] = {DevTensor::upload(dt(), q), DevTensor::upload(dt(), q)};
        DevTensor dk[2] = {DevTensor::upload(dt(), k), DevTensor::upload(dt(), k)};
        int i = 0;
        for (RopeKernel kern : {RopeKernel::kAuto, RopeKernel::kLegacy}) {
          FOLIO_ASSERT_OK(rope_with(kern, dt(), dq[i].data(), h.nkv ? dk[i].data() : nullptr,
                                    dpos.as<int32_t>(), dfreq.as<float>(), T, h.nh, h.nkv, hd,
                                    nullptr));
          ++i;
        }
        const std::string where = "hd " + std::to_string(hd) + " T " + std::to_string(T) +
                                  " kv heads " + std::to_string(h.nkv);
        EXPECT_LT(rel_error(dq[0].download(), ref_q), tol(dt())) << "q, " << where;
        if (h.nkv) {
          EXPECT_LT(rel_error(dk[0].download(), ref_k), tol(dt())) << "k, " << where;
        }
        // Against the old kernel: the same fp32 math up to FMA contraction, so at most 1 ulp.
        for (int j = 0; j < 2; ++j) {
          auto a = testing::download_bits(j ? dk[0] : dq[0]);
          auto b = testing::download_bits(j ? dk[1] : dq[1]);
          int worst = 0;
          size_t differ = 0;
          for (size_t e = 0; e < a.size(); ++e) {
            // Near zero the two roundings may land on opposite signs: count those as 1 ulp.
            const float fa = testing::from_bits(dt(), a[e]), fb = testing::from_bits(dt(), b[e]);
            const int d =
                std::fabs(fa - fb) <= 1e-5f ? (a[e] != b[e]) : testing::ulp_distance(a[e], b[e]);
            worst = std::max(worst, d);
            differ += d != 0;
          }
          EXPECT_LE(worst, 1) << (j ? "k" : "q") << " vs legacy, " << where << ", " << differ
                              << " of " << a.size() << " differ";
        }
      }
}

INSTANTIATE_TEST_SUITE_P(DTypes, SmallOpsTest, ::testing::Values(DType::kBF16, DType::kFP16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Bad shapes are Status errors, caught before any launch (so these run without a GPU too).
TEST(SmallOpsErrors, BadShapesAreRejected) {
  int dummy = 0;
  EXPECT_FALSE(rms_norm(DType::kBF16, &dummy, &dummy, &dummy, 1, 0, 1e-6f, nullptr).ok());
  EXPECT_FALSE(rope(DType::kBF16, &dummy, nullptr, nullptr, nullptr, 1, 1, 0, 7, nullptr).ok());
  QkvPostParams p;
  p.num_tokens = 1;
  p.num_heads = 4;
  p.num_kv_heads = 2;
  p.head_dim = 258;
  EXPECT_FALSE(qkv_post(p, nullptr).ok()) << "head_dim over 256";
  p.head_dim = 63;
  EXPECT_FALSE(qkv_post(p, nullptr).ok()) << "odd head_dim";
  p.head_dim = 64;
  p.q_norm = &dummy;
  EXPECT_FALSE(qkv_post(p, nullptr).ok()) << "q_norm without k_norm";
  p.k_norm = &dummy;
  EXPECT_FALSE(qkv_post(p, nullptr).ok()) << "null buffers";
  p.num_kv_heads = 0;
  EXPECT_FALSE(qkv_post(p, nullptr).ok()) << "no kv heads";
}

}  // namespace
}  // namespace folio::cuda
