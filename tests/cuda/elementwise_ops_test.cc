// Elementwise CUDA ops (embedding, RMSNorm, fused add+RMSNorm, per-head q/k norm, rope, split_qkv
// with bias, SiLU-and-mul) against the CPU reference, bf16 and fp16, vector and scalar paths.
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/embedding.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/silu_and_mul.h"
#include "backend/cuda/split_qkv.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;
using testing::rel_error;
using testing::rounded;

double tol(DType dt) { return dt == DType::kBF16 ? 1e-2 : 2e-3; }

class ElementwiseTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
  DType dt() const { return GetParam(); }
  std::mt19937 rng{1234};
};

TEST_P(ElementwiseTest, EmbeddingGathersRowsExactly) {
  for (int hidden : {72, 13}) {  // packed and scalar paths
    const int vocab = 50, T = 9;
    auto table = rounded(dt(), testing::random_vec(static_cast<size_t>(vocab) * hidden, rng));
    std::vector<int32_t> ids = {0, 49, 7, 7, 13, 1, 48, 25, 3};
    auto d_table = DevTensor::upload(dt(), table);
    auto d_ids = testing::upload_raw(ids);
    auto out = DevTensor::poisoned(dt(), static_cast<size_t>(T) * hidden);
    FOLIO_ASSERT_OK(embedding(dt(), d_table.data(), d_ids.as<int32_t>(), out.data(), T, hidden,
                              vocab, nullptr));
    auto got = out.download();
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < hidden; ++i)
        ASSERT_EQ(got[t * hidden + i], table[static_cast<size_t>(ids[t]) * hidden + i])
            << "token " << t << " elem " << i;
  }
}

TEST_P(ElementwiseTest, RmsNormMatchesReference) {
  for (int dim : {4096, 100, 8}) {
    const int rows = 37;
    auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(rows) * dim, rng, -3, 3));
    auto w = rounded(dt(), testing::random_vec(dim, rng, 0.5f, 1.5f));
    std::vector<float> ref(x.size());
    cpu::rms_norm(x.data(), w.data(), ref.data(), rows, dim, 1e-5f);
    auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
    auto y = DevTensor::poisoned(dt(), x.size());
    FOLIO_ASSERT_OK(rms_norm(dt(), dx.data(), dw.data(), y.data(), rows, dim, 1e-5f, nullptr));
    EXPECT_LT(rel_error(y.download(), ref), tol(dt())) << "dim " << dim;
    // In place (the Qwen3 per-head q/k norm runs this way: rows = tokens * heads, dim = head_dim).
    FOLIO_ASSERT_OK(rms_norm(dt(), dx.data(), dw.data(), dx.data(), rows, dim, 1e-5f, nullptr));
    EXPECT_LT(rel_error(dx.download(), ref), tol(dt())) << "in place, dim " << dim;
  }
}

TEST_P(ElementwiseTest, AddRmsNormUpdatesResidualAndNormalises) {
  for (int dim : {1024, 36}) {
    const int rows = 19;
    auto res = rounded(dt(), testing::random_vec(static_cast<size_t>(rows) * dim, rng, -2, 2));
    auto x = rounded(dt(), testing::random_vec(res.size(), rng, -2, 2));
    auto w = rounded(dt(), testing::random_vec(dim, rng, 0.5f, 1.5f));
    auto ref_res = res;
    std::vector<float> ref_y(res.size());
    cpu::add_rms_norm(ref_res.data(), x.data(), w.data(), ref_y.data(), rows, dim, 1e-6f);
    auto dres = DevTensor::upload(dt(), res), dx = DevTensor::upload(dt(), x);
    auto dw = DevTensor::upload(dt(), w);
    auto y = DevTensor::poisoned(dt(), res.size());
    FOLIO_ASSERT_OK(add_rms_norm(dt(), dres.data(), dx.data(), dw.data(), y.data(), rows, dim,
                                 1e-6f, nullptr));
    EXPECT_LT(rel_error(dres.download(), ref_res), tol(dt())) << "residual, dim " << dim;
    EXPECT_LT(rel_error(y.download(), ref_y), tol(dt())) << "y, dim " << dim;
  }
}

TEST_P(ElementwiseTest, RopeRotatesQAndKInPlace) {
  for (int head_dim : {128, 64}) {
    const int T = 9, H = 5, KVH = 1, half = head_dim / 2;
    std::vector<int32_t> pos = {0, 1, 2, 17, 500, 4095, 8191, 16500, 20000};
    // llama3-like: some frequencies scaled down by 8 (the op only sees the final values).
    std::vector<float> inv_freq(half);
    std::vector<double> inv_freq_d(half);
    for (int i = 0; i < half; ++i) {
      inv_freq[i] = static_cast<float>(std::pow(500000.0, -2.0 * i / head_dim) / (i > half / 2 ? 8 : 1));
      inv_freq_d[i] = inv_freq[i];
    }
    auto q = rounded(dt(), testing::random_vec(static_cast<size_t>(T) * H * head_dim, rng));
    auto k = rounded(dt(), testing::random_vec(static_cast<size_t>(T) * KVH * head_dim, rng));
    auto ref_q = q, ref_k = k;
    cpu::apply_rope(ref_q.data(), pos.data(), T, H, head_dim, inv_freq_d);
    cpu::apply_rope(ref_k.data(), pos.data(), T, KVH, head_dim, inv_freq_d);
    auto dq = DevTensor::upload(dt(), q), dk = DevTensor::upload(dt(), k);
    auto dpos = testing::upload_raw(pos);
    auto dfreq = testing::upload_raw(inv_freq);
    FOLIO_ASSERT_OK(rope(dt(), dq.data(), dk.data(), dpos.as<int32_t>(), dfreq.as<float>(), T, H,
                         KVH, head_dim, nullptr));
    EXPECT_LT(rel_error(dq.download(), ref_q), tol(dt())) << "q, head_dim " << head_dim;
    EXPECT_LT(rel_error(dk.download(), ref_k), tol(dt())) << "k, head_dim " << head_dim;
  }
}

TEST_P(ElementwiseTest, SplitQkvAddsBias) {
  struct Shape { int q, kv; bool bias; };
  for (Shape s : {Shape{5 * 64, 64, true}, Shape{4 * 128, 2 * 128, false}, Shape{15, 5, true}}) {
    const int T = 11, width = s.q + 2 * s.kv;
    auto qkv = rounded(dt(), testing::random_vec(static_cast<size_t>(T) * width, rng));
    auto bias = rounded(dt(), testing::random_vec(width, rng));
    auto dqkv = DevTensor::upload(dt(), qkv), dbias = DevTensor::upload(dt(), bias);
    auto q = DevTensor::poisoned(dt(), static_cast<size_t>(T) * s.q);
    auto k = DevTensor::poisoned(dt(), static_cast<size_t>(T) * s.kv);
    auto v = DevTensor::poisoned(dt(), static_cast<size_t>(T) * s.kv);
    FOLIO_ASSERT_OK(split_qkv(dt(), dqkv.data(), s.bias ? dbias.data() : nullptr, q.data(),
                              k.data(), v.data(), T, s.q, s.kv, nullptr));
    std::vector<float> rq, rk, rv;
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < width; ++i) {
        const float x = qkv[static_cast<size_t>(t) * width + i] + (s.bias ? bias[i] : 0.f);
        (i < s.q ? rq : i < s.q + s.kv ? rk : rv).push_back(x);
      }
    EXPECT_LT(rel_error(q.download(), rq), tol(dt()));
    EXPECT_LT(rel_error(k.download(), rk), tol(dt()));
    EXPECT_LT(rel_error(v.download(), rv), tol(dt()));
  }
}

TEST_P(ElementwiseTest, SiluAndMulMatchesReference) {
  for (int inter : {1000, 37}) {
    const int rows = 7;
    auto gu = rounded(dt(), testing::random_vec(static_cast<size_t>(rows) * 2 * inter, rng, -4, 4));
    std::vector<float> ref(static_cast<size_t>(rows) * inter);
    cpu::silu_and_mul(gu.data(), ref.data(), rows, inter);
    auto dgu = DevTensor::upload(dt(), gu);
    auto out = DevTensor::poisoned(dt(), ref.size());
    FOLIO_ASSERT_OK(silu_and_mul(dt(), dgu.data(), out.data(), rows, inter, nullptr));
    EXPECT_LT(rel_error(out.download(), ref), tol(dt())) << "inter " << inter;
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, ElementwiseTest, ::testing::Values(DType::kBF16, DType::kFP16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace folio::cuda
