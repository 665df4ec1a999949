// reshape_and_cache (16-bit and fp8 caches), copy_blocks (copy-on-write, all layers in one
// launch) and the swap copies between the device cache and pinned host blocks, checked
// bit-exactly against the CPU reference (fp8: the host codec base/fp8.h).
#include <numeric>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/kv_cache_ops.h"
#include "cuda_test_util.h"
#include "fp8_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;
using testing::rounded;

class KvCacheOpsTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
  DType dt() const { return GetParam(); }
  std::mt19937 rng{99};
};

TEST_P(KvCacheOpsTest, ReshapeAndCacheWritesSlotsAndSkipsNegative) {
  for (int kv_width : {3 * 128, 5 * 7}) {  // packed and scalar paths
    const int num_slots = 64, T = 20;
    auto kc = rounded(dt(), testing::random_vec(static_cast<size_t>(num_slots) * kv_width, rng));
    auto vc = rounded(dt(), testing::random_vec(kc.size(), rng));
    auto k = rounded(dt(), testing::random_vec(static_cast<size_t>(T) * kv_width, rng));
    auto v = rounded(dt(), testing::random_vec(k.size(), rng));
    std::vector<int64_t> slots(T);
    std::vector<int> perm(num_slots);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int t = 0; t < T; ++t) slots[t] = t % 4 == 3 ? -1 : perm[t];
    auto dkc = DevTensor::upload(dt(), kc), dvc = DevTensor::upload(dt(), vc);
    auto dk = DevTensor::upload(dt(), k), dv = DevTensor::upload(dt(), v);
    auto dslots = testing::upload_raw(slots);
    FOLIO_ASSERT_OK(reshape_and_cache(dt(), dk.data(), dv.data(), dslots.as<int64_t>(), T,
                                      kv_width, dkc.data(), dvc.data(), nullptr));
    cpu::reshape_and_cache(k.data(), v.data(), slots.data(), T, kv_width, kc.data(), vc.data());
    EXPECT_EQ(dkc.download(), kc) << "kv_width " << kv_width;
    EXPECT_EQ(dvc.download(), vc) << "kv_width " << kv_width;
  }
}

// The fp8 cache: each written element is the codec's e4m3 code of the dtype value (values past
// +-448 saturate); rows of skipped tokens and unused rows keep their bytes.
TEST_P(KvCacheOpsTest, ReshapeAndCacheFp8WritesCodesAndSkipsNegative) {
  for (int kv_width : {3 * 128, 5 * 7}) {  // packed and scalar paths
    const int num_slots = 64, T = 20;
    const size_t cache_bytes = static_cast<size_t>(num_slots) * kv_width;
    std::vector<uint8_t> kc(cache_bytes), vc(cache_bytes);
    std::uniform_int_distribution<int> byte(0, 255);
    for (size_t i = 0; i < cache_bytes; ++i) {
      kc[i] = static_cast<uint8_t>(byte(rng));
      vc[i] = static_cast<uint8_t>(byte(rng));
    }
    auto k = rounded(dt(), testing::random_vec(static_cast<size_t>(T) * kv_width, rng, -600, 600));
    auto v = rounded(dt(), testing::random_vec(k.size(), rng, -2, 2));
    std::vector<int64_t> slots(T);
    std::vector<int> perm(num_slots);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int t = 0; t < T; ++t) slots[t] = t % 4 == 3 ? -1 : perm[t];
    auto dkc = testing::DevBytes::upload(kc), dvc = testing::DevBytes::upload(vc);
    auto dk = DevTensor::upload(dt(), k), dv = DevTensor::upload(dt(), v);
    auto dslots = testing::upload_raw(slots);
    FOLIO_ASSERT_OK(reshape_and_cache(dt(), dk.data(), dv.data(), dslots.as<int64_t>(), T, kv_width,
                                      dkc.data(), dvc.data(), nullptr, KvCacheDtype::kFp8E4m3));
    for (int t = 0; t < T; ++t) {
      if (slots[t] < 0) continue;
      for (int i = 0; i < kv_width; ++i) {
        const size_t src = static_cast<size_t>(t) * kv_width + i;
        const size_t dst = static_cast<size_t>(slots[t]) * kv_width + i;
        kc[dst] = float_to_fp8_e4m3(k[src]);
        vc[dst] = float_to_fp8_e4m3(v[src]);
      }
    }
    size_t n = 0;
    std::string m = testing::byte_diff(dkc.download(), kc, &n);
    EXPECT_EQ(n, 0u) << "K, kv_width " << kv_width << ": " << m;
    m = testing::byte_diff(dvc.download(), vc, &n);
    EXPECT_EQ(n, 0u) << "V, kv_width " << kv_width << ": " << m;
  }
}

TEST_P(KvCacheOpsTest, CopyBlocksCopiesEveryLayerInOneLaunch) {
  const int layers = 3, num_blocks = 12;
  const size_t block_elems = 16 * 2 * 64;  // block_size 16, 2 kv heads, head_dim 64
  std::vector<std::vector<float>> host;
  std::vector<DevTensor> dev;
  std::vector<void*> ptrs;
  for (int c = 0; c < 2 * layers; ++c) {  // K and V of each layer
    host.push_back(rounded(dt(), testing::random_vec(block_elems * num_blocks, rng)));
    dev.push_back(DevTensor::upload(dt(), host.back()));
    ptrs.push_back(dev.back().data());
  }
  const std::vector<BlockCopy> pairs = {{0, 5}, {3, 4}, {11, 1}, {3, 7}};
  std::vector<int32_t> src, dst;
  for (auto p : pairs) {
    src.push_back(p.src);
    dst.push_back(p.dst);
  }
  auto dptrs = testing::upload_raw(ptrs);
  auto dpairs = testing::upload_raw(pairs);
  FOLIO_ASSERT_OK(copy_blocks(dptrs.as<void*>(), 2 * layers, block_elems * 2,
                              dpairs.as<BlockCopy>(), static_cast<int>(pairs.size()), nullptr));
  for (int c = 0; c < 2 * layers; ++c) {
    cpu::copy_blocks(host[c].data(), block_elems, src, dst);
    EXPECT_EQ(dev[c].download(), host[c]) << "cache " << c;
  }
}

TEST_P(KvCacheOpsTest, SwapOutAndInRoundTripsThroughPinnedHost) {
  const int caches = 4, dev_blocks = 10, host_blocks = 6;
  const size_t block_elems = 8 * 3 * 128, block_bytes = block_elems * 2;
  std::vector<std::vector<float>> dev_host;
  std::vector<DevTensor> dev;
  std::vector<PinnedHostBuffer> pinned;
  std::vector<void*> dev_bases, pin_bases;  // what the kernel dereferences
  for (int c = 0; c < caches; ++c) {
    dev_host.push_back(rounded(dt(), testing::random_vec(block_elems * dev_blocks, rng)));
    dev.push_back(DevTensor::upload(dt(), dev_host.back()));
    pinned.push_back(std::move(PinnedHostBuffer::allocate(block_bytes * host_blocks).value()));
    std::memset(pinned.back().data(), 0, block_bytes * host_blocks);
    dev_bases.push_back(dev.back().data());
    auto mapped = pinned.back().device_pointer();
    ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
    pin_bases.push_back(*mapped);
  }
  auto d_dev = testing::upload_raw(dev_bases);
  auto d_pin = testing::upload_raw(pin_bases);
  // Out: device blocks 2,3,4 -> host 0,1,2 and 9 -> 5; the rest of the host pool stays zero.
  const std::vector<BlockCopy> out = {{2, 0}, {3, 1}, {4, 2}, {9, 5}};
  auto d_out = testing::upload_raw(out);
  FOLIO_ASSERT_OK(swap_blocks(d_dev.as<void*>(), d_pin.as<void*>(), caches, block_bytes,
                              d_out.as<BlockCopy>(), static_cast<int>(out.size()), nullptr));
  FOLIO_ASSERT_OK(synchronize());
  for (int c = 0; c < caches; ++c) {
    const auto* bits = static_cast<const uint16_t*>(pinned[c].data());
    for (auto p : out)
      for (size_t e = 0; e < block_elems; ++e)
        ASSERT_EQ(testing::from_bits(dt(), bits[p.dst * block_elems + e]),
                  dev_host[c][p.src * block_elems + e]);
    for (int h : {3, 4})
      for (size_t e = 0; e < block_elems; ++e) ASSERT_EQ(bits[h * block_elems + e], 0) << h;
  }
  // In: host 0,1 -> device 7,8 and host 5 -> device 0.
  const std::vector<BlockCopy> in = {{0, 7}, {1, 8}, {5, 0}};
  auto d_in = testing::upload_raw(in);
  FOLIO_ASSERT_OK(swap_blocks(d_pin.as<void*>(), d_dev.as<void*>(), caches, block_bytes,
                              d_in.as<BlockCopy>(), static_cast<int>(in.size()), nullptr));
  for (int c = 0; c < caches; ++c) {
    auto expect = dev_host[c];
    auto put = [&](int host_block, int dev_block) {
      // host block h holds what device block out[h].src held
      const int orig = host_block == 5 ? 9 : 2 + host_block;
      std::copy_n(dev_host[c].begin() + orig * block_elems, block_elems,
                  expect.begin() + dev_block * block_elems);
    };
    put(0, 7);
    put(1, 8);
    put(5, 0);
    EXPECT_EQ(dev[c].download(), expect) << "cache " << c;
  }
  // Shapes the kernel cannot move are refused before any launch.
  EXPECT_FALSE(swap_blocks(d_pin.as<void*>(), d_dev.as<void*>(), caches, block_bytes + 2,
                           d_in.as<BlockCopy>(), 3, nullptr)
                   .ok());
}

INSTANTIATE_TEST_SUITE_P(DTypes, KvCacheOpsTest, ::testing::Values(DType::kBF16, DType::kFP16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace folio::cuda
