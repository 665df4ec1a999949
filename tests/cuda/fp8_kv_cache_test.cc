// The fp8 (e4m3) KV cache's conversions on the GPU against the host codec base/fp8.h, bit for bit:
// - encoding (fp8_e4m3.cuh, through reshape_and_cache, the writers' path): every bf16 and every
//   fp16 bit pattern, which covers every value a kernel ever encodes (K and V are rounded to the
//   model dtype first): ties at every e4m3 spacing, fp32/bf16/fp16 subnormals, e4m3 subnormals
//   and their boundary 2^-6, the 448 / 464 / 480 saturation boundaries, values far past 448,
//   +-inf, +-0, and NaNs of both signs (0x7F whatever the sign); packed (8-wide) and scalar
//   kernels;
// - decoding (dequant_kv_blocks): all 256 codes, NaN included, into bf16 and fp16 scratch blocks,
//   the other blocks untouched.
#include "backend/cuda/kv_cache_ops.h"
#include "backend/cuda/kv_dequant.h"
#include "fp8_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevBytes;
using testing::DevTensor;

class Fp8KvCacheTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
  DType dt() const { return GetParam(); }
};

// Encodes `bits` (K) and its reverse (V) through reshape_and_cache into fp8 caches of rows of
// kv_width (the tail past bits.size() padded with zeros) and compares each byte with the codec.
void check_encode(DType dt, const std::vector<uint16_t>& bits, int kv_width) {
  const int T = static_cast<int>((bits.size() + kv_width - 1) / kv_width);
  const size_t n = static_cast<size_t>(T) * kv_width;
  std::vector<uint16_t> k(n, 0), v(n, 0);
  std::copy(bits.begin(), bits.end(), k.begin());
  std::copy(bits.rbegin(), bits.rend(), v.begin());
  // Token t into slot T - 1 - t (the caches' rows in reverse), every row written.
  std::vector<int64_t> slots(T);
  for (int t = 0; t < T; ++t) slots[t] = T - 1 - t;
  auto dk = testing::upload_raw(k), dv = testing::upload_raw(v);
  auto dslots = testing::upload_raw(slots);
  auto kc = DevBytes::filled(n, 0xFF), vc = DevBytes::filled(n, 0xFF);
  FOLIO_ASSERT_OK(reshape_and_cache(dt, dk.data(), dv.data(), dslots.as<int64_t>(), T, kv_width,
                                    kc.data(), vc.data(), nullptr, KvCacheDtype::kFp8E4m3));
  std::vector<uint8_t> want_k(n), want_v(n);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < kv_width; ++i) {
      const size_t src = static_cast<size_t>(t) * kv_width + i;
      const size_t dst = static_cast<size_t>(T - 1 - t) * kv_width + i;
      want_k[dst] = testing::e4m3_of_bits(dt, k[src]);
      want_v[dst] = testing::e4m3_of_bits(dt, v[src]);
    }
  size_t count = 0;
  std::string m = testing::byte_diff(kc.download(), want_k, &count);
  EXPECT_EQ(count, 0u) << "K, kv_width " << kv_width << ": " << m;
  m = testing::byte_diff(vc.download(), want_v, &count);
  EXPECT_EQ(count, 0u) << "V, kv_width " << kv_width << ": " << m;
}

TEST_P(Fp8KvCacheTest, EncodeMatchesHostCodecOnEveryValue) {
  std::vector<uint16_t> all(1 << 16);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  check_encode(dt(), all, 256);  // packed: 8 values -> one 8-byte store
  check_encode(dt(), all, 9);    // scalar (a row width that is no multiple of 8)
}

// The codec's own corner cases, spelled out (also covered by the sweep above): what a failure
// there means is easier to read here.
TEST_P(Fp8KvCacheTest, EncodeCornerCases) {
  const float cases[] = {0.f,        -0.f,      1.f,       1.0625f,  1.1875f,   -1.0625f,
                         448.f,      -448.f,    464.f,     -464.f,   480.f,     1e4f,
                         INFINITY,   -INFINITY, 0x1p-6f,   0x1p-7f,  0x1p-9f,   0x1p-10f,
                         0x1.8p-10f, 0x1.4p-9f, 0x1.8p-9f, 0x1p-20f, 240.f,     232.f,
                         NAN,        -NAN,      0.9375f,   0.96875f, -0.96875f, 0x1.ep-7f};
  std::vector<uint16_t> bits;
  for (float f : cases) bits.push_back(testing::to_bits(dt(), f));
  check_encode(dt(), bits, 8);
  check_encode(dt(), bits, 1);
}

TEST_P(Fp8KvCacheTest, DequantBlocksIsExact) {
  const int num_blocks = 7;
  const int64_t block_elems = 16 * 2 * 64;  // block_size 16, 2 kv heads, head_dim 64
  const size_t n = static_cast<size_t>(num_blocks) * block_elems;
  std::vector<uint8_t> kc(n), vc(n);
  for (size_t i = 0; i < n; ++i) {  // every code in every block, at shifting positions
    kc[i] = static_cast<uint8_t>(i * 7 + i / block_elems);
    vc[i] = static_cast<uint8_t>(255 - i * 3);
  }
  auto dkc = DevBytes::upload(kc), dvc = DevBytes::upload(vc);
  const int out_blocks = 6;
  auto ko = DevTensor::poisoned(dt(), static_cast<size_t>(out_blocks) * block_elems);
  auto vo = DevTensor::poisoned(dt(), ko.n);
  const std::vector<BlockCopy> pairs = {{0, 3}, {6, 0}, {2, 5}, {5, 1}};
  auto dpairs = testing::upload_raw(pairs);
  FOLIO_ASSERT_OK(dequant_kv_blocks(dt(), dkc.data(), dvc.data(), ko.data(), vo.data(), block_elems,
                                    dpairs.as<BlockCopy>(), static_cast<int>(pairs.size()),
                                    nullptr));
  std::vector<uint16_t> gk(ko.n), gv(vo.n);
  FOLIO_ASSERT_OK(copy(gk.data(), ko.data(), gk.size() * 2));
  FOLIO_ASSERT_OK(copy(gv.data(), vo.data(), gv.size() * 2));
  std::vector<bool> written(out_blocks, false);
  for (const BlockCopy& p : pairs) {
    written[p.dst] = true;
    for (int64_t e = 0; e < block_elems; ++e) {
      const size_t src = static_cast<size_t>(p.src) * block_elems + e;
      const size_t dst = static_cast<size_t>(p.dst) * block_elems + e;
      for (int c = 0; c < 2; ++c) {
        const uint8_t code = c ? vc[src] : kc[src];
        const uint16_t got = c ? gv[dst] : gk[dst];
        const float want = fp8_e4m3_to_float(code);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(testing::from_bits(dt(), got))) << "code " << int{code};
        } else {
          // Exact: the value's dtype bits, the sign of zero included.
          ASSERT_EQ(got, testing::to_bits(dt(), want))
              << (c ? "V" : "K") << " code " << int{code} << " block " << p.src << " -> " << p.dst;
        }
      }
    }
  }
  for (int b = 0; b < out_blocks; ++b) {
    if (written[b]) continue;
    for (int64_t e = 0; e < block_elems; ++e) {
      const size_t i = static_cast<size_t>(b) * block_elems + e;
      ASSERT_TRUE(gk[i] == 0xFFFF && gv[i] == 0xFFFF) << "unlisted block " << b << " written";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, Fp8KvCacheTest, ::testing::Values(DType::kBF16, DType::kFP16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Argument errors come back before any GPU work (runs without a GPU too).
TEST(Fp8KvCacheArgsTest, DequantRejectsBadBlocksAndAlignment) {
  alignas(16) static unsigned char buf[64];
  const BlockCopy* pairs = reinterpret_cast<const BlockCopy*>(buf);
  EXPECT_EQ(dequant_kv_blocks(DType::kBF16, buf, buf, buf, buf, 12, pairs, 1, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dequant_kv_blocks(DType::kBF16, buf, buf, buf, buf, 0, pairs, 1, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dequant_kv_blocks(DType::kBF16, buf + 8, buf, buf, buf, 16, pairs, 1, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(dequant_kv_blocks(DType::kBF16, buf, buf, buf, buf, 16, pairs, 0, nullptr).ok());
}

}  // namespace
}  // namespace folio::cuda
