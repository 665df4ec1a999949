// qkv_post (split + bias + Qwen3 qk norm + rope + paged K/V write in one launch) against the
// unfused chain of GPU ops it replaces (bit for bit, caches compared whole, untouched rows
// included) and against the CPU reference of that chain (tolerance).
#include "backend/cuda/qkv_post.h"

#include "qkv_post_test_util.h"

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
  const float eps = 1e-6f;
  const testing::QkvPostInputs in(dt(), s, block_size, rng);
  SCOPED_TRACE(in.where(with_bias, with_norm, block_size));
  const size_t cache_elems = in.cache_elems;
  const int kvs = in.kvs;
  const int64_t num_slots = in.num_slots;

  // The chain, as the executor runs it.
  auto q = DevTensor::poisoned(dt(), static_cast<size_t>(s.T) * in.qs);
  auto kc = DevTensor::poisoned(dt(), cache_elems), vc = DevTensor::poisoned(dt(), cache_elems);
  FOLIO_ASSERT_OK(in.run_chain(with_bias, with_norm, eps, q, kc.data(), vc.data()));

  // The fused op in each form (the pairs form only without qk norm): bit for bit the chain.
  auto fq = DevTensor::poisoned(dt(), q.n);
  auto fkc = DevTensor::poisoned(dt(), cache_elems), fvc = DevTensor::poisoned(dt(), cache_elems);
  for (QkvPostForm form : {QkvPostForm::kHeads, QkvPostForm::kPairs, QkvPostForm::kAuto}) {
    // kAuto last: its output is checked against the reference below as well.
    if (with_norm && form == QkvPostForm::kPairs) continue;
    SCOPED_TRACE("form " + std::to_string(static_cast<int>(form)));
    for (DevTensor* t : {&fq, &fkc, &fvc}) t->poison();
    QkvPostParams p = in.params(with_bias, with_norm, eps);
    p.q_out = fq.data();
    p.k_cache = fkc.data();
    p.v_cache = fvc.data();
    p.form = form;
    FOLIO_ASSERT_OK(qkv_post(p, nullptr));

    size_t n = 0;
    std::string m = diff(testing::download_bits(fq), testing::download_bits(q), &n);
    EXPECT_EQ(n, 0u) << "q vs chain: " << m;
    m = diff(testing::download_bits(fkc), testing::download_bits(kc), &n);
    EXPECT_EQ(n, 0u) << "k cache vs chain: " << m;
    m = diff(testing::download_bits(fvc), testing::download_bits(vc), &n);
    EXPECT_EQ(n, 0u) << "v cache vs chain: " << m;
  }

  // Against the CPU reference: q whole; the caches at the written rows; the other rows must
  // still hold the poison (NaN).
  std::vector<float> rq, rkc(cache_elems, 0.f), rvc(cache_elems, 0.f);
  testing::reference_qkv_post(dt(), s, in.qkv, with_bias ? in.bias.data() : nullptr,
                              with_norm ? in.qn.data() : nullptr,
                              with_norm ? in.kn.data() : nullptr, eps, in.pos, in.inv_freq,
                              in.slots, &rq, &rkc, &rvc);
  EXPECT_LT(rel_error(fq.download(), rq), tol(dt())) << "q vs reference";
  std::vector<bool> written(num_slots, false);
  for (int64_t sl : in.slots)
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

TEST(QkvPost, FormsByTokensAndNorm) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(3);
  const testing::QkvPostInputs in(DType::kBF16, {4, 4, 2, 64}, 16, rng);
  auto fq = DevTensor::poisoned(DType::kBF16, static_cast<size_t>(4) * in.qs);
  auto kc = DevTensor::poisoned(DType::kBF16, in.cache_elems);
  auto vc = DevTensor::poisoned(DType::kBF16, in.cache_elems);
  QkvPostParams p = in.params(false, true, 1e-6f);  // with qk norm
  p.q_out = fq.data();
  p.k_cache = kc.data();
  p.v_cache = vc.data();
  p.form = QkvPostForm::kPairs;
  const Status st = qkv_post(p, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "pairs cannot norm: " << st.to_string();
  p.form = QkvPostForm::kAuto;
  p.num_tokens = 4096;  // only the choice is asked: nothing launches
  EXPECT_EQ(qkv_post_form(p), QkvPostForm::kHeads) << "qk norm: a warp per head";
  p.q_norm = p.k_norm = nullptr;
  EXPECT_EQ(qkv_post_form(p), QkvPostForm::kPairs) << "many tokens, no norm";
  p.num_tokens = kQkvPostPairsMinTokens - 1;
  EXPECT_EQ(qkv_post_form(p), QkvPostForm::kHeads) << "few tokens";
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
