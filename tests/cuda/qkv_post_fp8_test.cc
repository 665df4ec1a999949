// qkv_post with an fp8 (e4m3) KV cache (QkvPostParams::kv_dtype kFp8E4m3), bit for bit:
// - against the unfused chain it replaces ending in reshape_and_cache's fp8 write (caches
//   compared whole: untouched rows must keep their poison), and q against the chain's q;
// - against the host codec (base/fp8.h) applied to the same op's 16-bit cache output, so the
//   fp8 value is exactly e4m3(the value a 16-bit cache would hold).
#include <array>

#include "fp8_test_util.h"
#include "qkv_post_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevBytes;
using testing::DevTensor;
using testing::QkvShape;
using testing::rounded;

class QkvPostFp8Test : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
  DType dt() const { return GetParam(); }
  // range: inputs uniform in [-range, range] (a large one saturates some K/V values at 448).
  void run_case(const QkvShape& s, bool bias, bool norm, int block_size, float range = 2.f);
  std::mt19937 rng{4242};
};

void QkvPostFp8Test::run_case(const QkvShape& s, bool with_bias, bool with_norm, int block_size,
                              float range) {
  const float eps = 1e-6f;
  const testing::QkvPostInputs in(dt(), s, block_size, rng, range);
  SCOPED_TRACE(in.where(with_bias, with_norm, block_size) + " range " + std::to_string(range));
  const size_t cache_elems = in.cache_elems;
  const int kvs = in.kvs;
  const int64_t num_slots = in.num_slots;

  // The chain, ending in the fp8 cache write.
  auto q = DevTensor::poisoned(dt(), static_cast<size_t>(s.T) * in.qs);
  auto kc = DevBytes::filled(cache_elems, 0xFF), vc = DevBytes::filled(cache_elems, 0xFF);
  FOLIO_ASSERT_OK(in.run_chain(with_bias, with_norm, eps, q, kc.data(), vc.data(),
                               KvCacheDtype::kFp8E4m3));

  // The fused op, into a 16-bit cache and into an fp8 cache; the form varies by case (the
  // launch's choice, or forced: the pairs form only without qk norm).
  QkvPostParams p = in.params(with_bias, with_norm, eps);
  p.form = std::array{QkvPostForm::kAuto, QkvPostForm::kHeads,
                      QkvPostForm::kPairs}[(s.T + s.hd + with_bias) % 3];
  if (with_norm && p.form == QkvPostForm::kPairs) p.form = QkvPostForm::kAuto;
  auto fq16 = DevTensor::poisoned(dt(), q.n), fq8 = DevTensor::poisoned(dt(), q.n);
  auto fkc16 = DevTensor::poisoned(dt(), cache_elems);
  auto fvc16 = DevTensor::poisoned(dt(), cache_elems);
  auto fkc8 = DevBytes::filled(cache_elems, 0xFF), fvc8 = DevBytes::filled(cache_elems, 0xFF);
  p.q_out = fq16.data();
  p.k_cache = fkc16.data();
  p.v_cache = fvc16.data();
  FOLIO_ASSERT_OK(qkv_post(p, nullptr));
  p.kv_dtype = KvCacheDtype::kFp8E4m3;
  p.q_out = fq8.data();
  p.k_cache = fkc8.data();
  p.v_cache = fvc8.data();
  FOLIO_ASSERT_OK(qkv_post(p, nullptr));

  EXPECT_EQ(testing::download_bits(fq8), testing::download_bits(q)) << "q vs chain";
  const auto gk = fkc8.download(), gv = fvc8.download();
  size_t n = 0;
  std::string m = testing::byte_diff(gk, kc.download(), &n);
  EXPECT_EQ(n, 0u) << "k cache vs chain: " << m;
  m = testing::byte_diff(gv, vc.download(), &n);
  EXPECT_EQ(n, 0u) << "v cache vs chain: " << m;

  // Against the codec of the 16-bit run's caches; rows of no slot keep the poison.
  std::vector<bool> written(num_slots, false);
  for (int64_t sl : in.slots)
    if (sl >= 0) written[sl] = true;
  const auto k16 = testing::download_bits(fkc16), v16 = testing::download_bits(fvc16);
  std::vector<uint8_t> want_k(cache_elems, 0xFF), want_v(cache_elems, 0xFF);
  for (int64_t sl = 0; sl < num_slots; ++sl) {
    if (!written[sl]) continue;
    for (int i = 0; i < kvs; ++i) {
      const size_t e = static_cast<size_t>(sl) * kvs + i;
      want_k[e] = testing::e4m3_of_bits(dt(), k16[e]);
      want_v[e] = testing::e4m3_of_bits(dt(), v16[e]);
    }
  }
  m = testing::byte_diff(gk, want_k, &n);
  EXPECT_EQ(n, 0u) << "k cache vs codec of the 16-bit output: " << m;
  m = testing::byte_diff(gv, want_v, &n);
  EXPECT_EQ(n, 0u) << "v cache vs codec of the 16-bit output: " << m;
}

TEST_P(QkvPostFp8Test, MatchesChainAndCodec) {
  struct Heads {
    int nh, nkv;
  };
  for (int hd : {16, 64, 128, 256, 36})  // 36: the scalar path (not a multiple of 8)
    for (int T : {1, 3, 257})
      for (Heads h : {Heads{4, 2}, Heads{7, 1}})
        for (int flags = 0; flags < 4; ++flags)
          run_case({T, h.nh, h.nkv, hd}, flags & 1, flags & 2, (T + flags + hd) % 2 ? 16 : 1);
}

TEST_P(QkvPostFp8Test, SaturatesLargeValues) {
  // K after rope and V reach ~1.4 x 400: past 448 on some elements (saturated to +-448).
  for (int hd : {128, 36}) {
    run_case({257, 8, 2, hd}, true, false, 16, 400.f);
    run_case({3, 4, 4, hd}, false, false, 1, 1000.f);
  }
}

TEST_P(QkvPostFp8Test, LlamaAndQwenShapes) {
  for (int block_size : {1, 16}) {
    run_case({2048, 32, 8, 128}, false, false, block_size);  // Llama-3-8B
    run_case({2048, 16, 8, 128}, false, true, block_size);   // Qwen3 (qk norm)
    run_case({1, 32, 8, 128}, false, false, block_size);
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, QkvPostFp8Test, ::testing::Values(DType::kBF16, DType::kFP16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace folio::cuda
