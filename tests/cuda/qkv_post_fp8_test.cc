// qkv_post with an fp8 (e4m3) KV cache (QkvPostParams::kv_dtype kFp8E4m3), bit for bit:
// - against the unfused chain it replaces ending in reshape_and_cache's fp8 write (caches
//   compared whole: untouched rows must keep their poison), and q against the chain's q;
// - against the host codec (base/fp8.h) applied to the same op's 16-bit cache output, so the
//   fp8 value is exactly e4m3(the value a 16-bit cache would hold).
#include "backend/cuda/kv_cache_ops.h"
#include "backend/cuda/qkv_post.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/split_qkv.h"
#include "fp8_test_util.h"
#include "small_ops_test_util.h"

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
  const int qs = s.nh * s.hd, kvs = s.nkv * s.hd, width = qs + 2 * kvs;
  const float eps = 1e-6f;
  SCOPED_TRACE("T " + std::to_string(s.T) + " heads " + std::to_string(s.nh) + "/" +
               std::to_string(s.nkv) + " hd " + std::to_string(s.hd) + " bias " +
               std::to_string(with_bias) + " norm " + std::to_string(with_norm) + " block " +
               std::to_string(block_size) + " range " + std::to_string(range));
  auto qkv =
      rounded(dt(), testing::random_vec(static_cast<size_t>(s.T) * width, rng, -range, range));
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

  // The chain, ending in the fp8 cache write.
  auto q = DevTensor::poisoned(dt(), static_cast<size_t>(s.T) * qs);
  auto k = DevTensor::poisoned(dt(), static_cast<size_t>(s.T) * kvs);
  auto v = DevTensor::poisoned(dt(), static_cast<size_t>(s.T) * kvs);
  auto kc = DevBytes::filled(cache_elems, 0xFF), vc = DevBytes::filled(cache_elems, 0xFF);
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
                                    kc.data(), vc.data(), nullptr, KvCacheDtype::kFp8E4m3));

  // The fused op, into a 16-bit cache and into an fp8 cache.
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
  for (int64_t sl : slots)
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
