// qkv_post (split + bias + Qwen3 qk norm + rope + paged K/V write in one launch) against the
// unfused chain of GPU ops it replaces (bit for bit, caches compared whole, untouched rows
// included) and against the CPU reference of that chain (tolerance).
#include "backend/cuda/qkv_post.h"

#include "backend/cuda/kv_cache_ops.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/split_qkv.h"
#include "small_ops_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;
using testing::QkvShape;
using testing::rel_error;
using testing::rounded;

double tol(DType dt) {
  return dt == DType::kBF16 ? 1e-2 : 2e-3;
}

class QkvPostTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
  DType dt() const { return GetParam(); }
  void run_case(const QkvShape& s, bool bias, bool norm, int block_size);
  std::mt19937 rng{777};
};

// Counts differing elements and the worst ulp distance, for the failure message.
std::string diff(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, size_t* count) {
  *count = 0;
  int worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) {
      ++*count;
      worst = std::max(worst, testing::ulp_distance(a[i], b[i]));
    }
  return std::to_string(*count) + " of " + std::to_string(a.size()) + " differ, worst " +
         std::to_string(worst) + " ulp";
}

void QkvPostTest::run_case(const QkvShape& s, bool with_bias, bool with_norm, int block_size) {
  const int qs = s.nh * s.hd, kvs = s.nkv * s.hd, width = qs + 2 * kvs;
  const float eps = 1e-6f;
  const std::string where = "T " + std::to_string(s.T) + " heads " + std::to_string(s.nh) + "/" +
                            std::to_string(s.nkv) + " hd " + std::to_string(s.hd) + " bias " +
                            std::to_string(with_bias) + " norm " + std::to_string(with_norm) +
                            " block " + std::to_string(block_size);
  SCOPED_TRACE(where);
  auto qkv = rounded(dt(), testing::random_vec(static_cast<size_t>(s.T) * width, rng, -2, 2));
  auto bias = rounded(dt(), testing::random_vec(width, rng, -0.5f, 0.5f));
  auto qn = rounded(dt(), testing::random_vec(s.hd, rng, 0.5f, 1.5f));
  auto kn = rounded(dt(), testing::random_vec(s.hd, rng, 0.5f, 1.5f));
  auto pos = testing::make_positions(s.T, rng);
  auto inv_freq = testing::make_inv_freq(s.hd);
  int64_t num_slots = 0;
  auto slots = testing::make_slots(s.T, block_size, rng, &num_slots);

  auto d_qkv = DevTensor::upload(dt(), qkv), d_bias = DevTensor::upload(dt(), bias);
  auto d_qn = DevTensor::upload(dt(), qn), d_kn = DevTensor::upload(dt(), kn);
  auto d_pos = testing::upload_raw(pos);
  auto d_freq = testing::upload_raw(inv_freq);
  auto d_slots = testing::upload_raw(slots);
  const size_t cache_elems = static_cast<size_t>(num_slots) * kvs;
  const void* b = with_bias ? d_bias.data() : nullptr;

  // The chain, as the executor runs it.
  auto q = DevTensor::poisoned(dt(), static_cast<size_t>(s.T) * qs);
  auto k = DevTensor::poisoned(dt(), static_cast<size_t>(s.T) * kvs);
  auto v = DevTensor::poisoned(dt(), static_cast<size_t>(s.T) * kvs);
  auto kc = DevTensor::poisoned(dt(), cache_elems), vc = DevTensor::poisoned(dt(), cache_elems);
  FOLIO_ASSERT_OK(
      split_qkv(dt(), d_qkv.data(), b, q.data(), k.data(), v.data(), s.T, qs, kvs, nullptr));
  if (with_norm) {
    FOLIO_ASSERT_OK(
        rms_norm(dt(), q.data(), d_qn.data(), q.data(), s.T * s.nh, s.hd, eps, nullptr));
    FOLIO_ASSERT_OK(
        rms_norm(dt(), k.data(), d_kn.data(), k.data(), s.T * s.nkv, s.hd, eps, nullptr));
  }
  FOLIO_ASSERT_OK(rope(dt(), q.data(), k.data(), d_pos.as<int32_t>(), d_freq.as<float>(), s.T, s.nh,
                       s.nkv, s.hd, nullptr));
  FOLIO_ASSERT_OK(reshape_and_cache(dt(), k.data(), v.data(), d_slots.as<int64_t>(), s.T, kvs,
                                    kc.data(), vc.data(), nullptr));

  // The fused op.
  auto fq = DevTensor::poisoned(dt(), q.n);
  auto fkc = DevTensor::poisoned(dt(), cache_elems), fvc = DevTensor::poisoned(dt(), cache_elems);
  QkvPostParams p;
  p.dtype = dt();
  p.num_tokens = s.T;
  p.num_heads = s.nh;
  p.num_kv_heads = s.nkv;
  p.head_dim = s.hd;
  p.eps = eps;
  p.qkv = d_qkv.data();
  p.bias = b;
  p.q_norm = with_norm ? d_qn.data() : nullptr;
  p.k_norm = with_norm ? d_kn.data() : nullptr;
  p.positions = d_pos.as<int32_t>();
  p.inv_freq = d_freq.as<float>();
  p.slot_mapping = d_slots.as<int64_t>();
  p.q_out = fq.data();
  p.k_cache = fkc.data();
  p.v_cache = fvc.data();
  FOLIO_ASSERT_OK(qkv_post(p, nullptr));

  size_t n = 0;
  std::string m = diff(testing::download_bits(fq), testing::download_bits(q), &n);
  EXPECT_EQ(n, 0u) << "q vs chain: " << m;
  m = diff(testing::download_bits(fkc), testing::download_bits(kc), &n);
  EXPECT_EQ(n, 0u) << "k cache vs chain: " << m;
  m = diff(testing::download_bits(fvc), testing::download_bits(vc), &n);
  EXPECT_EQ(n, 0u) << "v cache vs chain: " << m;

  // Against the CPU reference: q whole; the caches at the written rows; the other rows must
  // still hold the poison (NaN).
  std::vector<float> rq, rkc(cache_elems, 0.f), rvc(cache_elems, 0.f);
  testing::reference_qkv_post(dt(), s, qkv, with_bias ? bias.data() : nullptr,
                              with_norm ? qn.data() : nullptr, with_norm ? kn.data() : nullptr, eps,
                              pos, inv_freq, slots, &rq, &rkc, &rvc);
  EXPECT_LT(rel_error(fq.download(), rq), tol(dt())) << "q vs reference";
  std::vector<bool> written(num_slots, false);
  for (int64_t sl : slots)
    if (sl >= 0) written[sl] = true;
  const auto gk = fkc.download(), gv = fvc.download();
  std::vector<float> wk, wv, rk, rv;
  for (int64_t sl = 0; sl < num_slots; ++sl)
    for (int i = 0; i < kvs; ++i) {
      const size_t e = static_cast<size_t>(sl) * kvs + i;
      if (written[sl]) {
        wk.push_back(gk[e]);
        wv.push_back(gv[e]);
        rk.push_back(rkc[e]);
        rv.push_back(rvc[e]);
      } else {
        ASSERT_TRUE(std::isnan(gk[e]) && std::isnan(gv[e]))
            << "unwritten slot " << sl << " touched";
      }
    }
  EXPECT_LT(rel_error(wk, rk), tol(dt())) << "k cache vs reference";
  EXPECT_LT(rel_error(wv, rv), tol(dt())) << "v cache vs reference";
}

TEST_P(QkvPostTest, MatchesChainAndReference) {
  struct Heads {
    int nh, nkv;
  };
  for (int hd : {16, 64, 80, 128, 256, 36})  // 36: the scalar path (not a multiple of 8)
    for (int T : {1, 3, 257})
      for (Heads h : {Heads{4, 2}, Heads{3, 3}, Heads{7, 1}})
        for (int flags = 0; flags < 4; ++flags)
          run_case({T, h.nh, h.nkv, hd}, flags & 1, flags & 2, (T + flags + hd) % 2 ? 16 : 1);
}

TEST_P(QkvPostTest, LlamaAndQwenShapesAtManyTokens) {
  for (int block_size : {1, 16}) {
    run_case({2048, 32, 8, 128}, false, false, block_size);  // Llama-3-8B
    run_case({2048, 16, 8, 128}, false, true, block_size);   // Qwen3 (qk norm)
    run_case({1, 32, 8, 128}, false, false, block_size);
    run_case({257, 28, 4, 128}, true, false, block_size);  // Qwen2 (bias)
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, QkvPostTest, ::testing::Values(DType::kBF16, DType::kFP16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace folio::cuda
