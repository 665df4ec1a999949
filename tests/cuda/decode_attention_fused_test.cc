// decode_attention with PagedAttentionParams::qkv_post (kernel tc doing qkv_post's split, bias,
// rope and K/V write itself) against qkv_post then decode_attention: the same output bits and
// the same cache bytes, over 16-bit and fp8 caches, GQA groups of 4, 7 and 8, token mode and
// pages, with and without bias, single and split partitions, the register and ring forms; and
// the calls it must refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "attention_test_util.h"
#include "backend/cuda/decode_attention.h"
#include "backend/cuda/qkv_post.h"

namespace folio::cuda {
namespace {

using testing::AttentionProblem;
using testing::DevTensor;
using testing::SeqSpec;

struct FusedCase {
  DType dt;
  int heads, kv_heads, block_size;
  KvCacheDtype kv = KvCacheDtype::kAuto;
  int partition_size = 0;  // 0: the planner's (refined) split
  int ring = -1;           // DecodePlan::tc_ring_stages
  bool bias = false;
};

std::string name(const FusedCase& c) {
  return std::string(dtype_name(c.dt)) + "_h" + std::to_string(c.heads) + "_kv" +
         std::to_string(c.kv_heads) + "_bs" + std::to_string(c.block_size) + "_p" +
         std::to_string(c.partition_size) + (c.kv == KvCacheDtype::kFp8E4m3 ? "_fp8" : "") +
         (c.ring >= 0 ? "_ring" + std::to_string(c.ring) : "") + (c.bias ? "_bias" : "");
}
void PrintTo(const FusedCase& c, std::ostream* os) { *os << name(c); }

// Both caches' bytes (16-bit caches as their float values, exact).
std::vector<float> caches(const AttentionProblem& p) {
  if (p.fp8()) {
    std::vector<float> out;
    for (const auto* b : {&p.dk8, &p.dv8})
      for (uint8_t c : b->download()) out.push_back(c);
    return out;
  }
  std::vector<float> out = p.dk.download(), v = p.dv.download();
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

class DecodeFusedQkvTest : public ::testing::TestWithParam<FusedCase> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
};

TEST_P(DecodeFusedQkvTest, SameBitsAsQkvPostThenAttention) {
  const FusedCase& c = GetParam();
  constexpr int kD = 128;
  std::mt19937 rng(23 + c.heads + c.block_size);
  const std::vector<SeqSpec> seqs = {{1, 1}, {17, 1}, {130, 1}, {300, 1}, {2049, 1}};
  AttentionProblem prob(c.dt, c.heads, c.kv_heads, kD, c.block_size, seqs, rng, c.kv);
  const int T = static_cast<int>(seqs.size()), width = (c.heads + 2 * c.kv_heads) * kD;
  // The step's token of each sequence: position ctx - 1, its slot through the block table.
  std::vector<int32_t> positions;
  std::vector<int64_t> slots;
  for (int s = 0; s < T; ++s) {
    const int pos = prob.context_lens[s] - 1;
    positions.push_back(pos);
    slots.push_back(int64_t{prob.block_table[prob.block_table_start[s] + pos / c.block_size]} *
                        c.block_size +
                    pos % c.block_size);
  }
  std::vector<float> inv_freq(kD / 2);
  for (int i = 0; i < kD / 2; ++i) inv_freq[i] = std::pow(500000.f, -2.f * i / kD);
  DevTensor qkv = DevTensor::upload(
      c.dt, testing::rounded(c.dt, testing::random_vec(size_t{1} * T * width, rng, -2, 2)));
  DevTensor bias = DevTensor::upload(c.dt, testing::rounded(c.dt, testing::random_vec(width, rng)));
  DevTensor q_out = DevTensor::poisoned(c.dt, size_t{1} * T * c.heads * kD);
  DeviceBuffer d_pos = testing::upload_raw(positions), d_slots = testing::upload_raw(slots);
  DeviceBuffer d_freq = testing::upload_raw(inv_freq);

  auto plan = plan_decode_attention(prob.context_lens, c.heads, c.kv_heads, kD, 132,
                                    c.partition_size, DecodeKernel::kTc);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  plan->tc_ring_stages = c.ring;
  ASSERT_TRUE(decode_fuses_qkv_post(*plan));
  auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
  ASSERT_TRUE(ws.ok());

  // Unfused: qkv_post writes q and the new K/V, then attention.
  QkvPostParams qp;
  qp.dtype = c.dt;
  qp.kv_dtype = c.kv;
  qp.num_tokens = T;
  qp.num_heads = c.heads;
  qp.num_kv_heads = c.kv_heads;
  qp.head_dim = kD;
  qp.qkv = qkv.data();
  qp.bias = c.bias ? bias.data() : nullptr;
  qp.positions = d_pos.as<int32_t>();
  qp.inv_freq = d_freq.as<float>();
  qp.slot_mapping = d_slots.as<int64_t>();
  qp.q_out = q_out.data();
  PagedAttentionParams p = prob.params();
  qp.k_cache = const_cast<void*>(p.k_cache);
  qp.v_cache = const_cast<void*>(p.v_cache);
  FOLIO_ASSERT_OK(qkv_post(qp, nullptr));
  p.q = q_out.data();
  FOLIO_ASSERT_OK(decode_attention(p, *plan, ws->data(), nullptr));
  const std::vector<float> want_out = prob.dout.download(), want_caches = caches(prob);

  // Fused, from the same initial caches into a re-poisoned output; q is never read.
  prob.upload_caches();
  prob.dout.poison();
  p = prob.params();
  p.q = nullptr;
  p.qkv_post.qkv = qkv.data();
  p.qkv_post.bias = qp.bias;
  p.qkv_post.positions = qp.positions;
  p.qkv_post.inv_freq = qp.inv_freq;
  p.qkv_post.slot_mapping = qp.slot_mapping;
  FOLIO_ASSERT_OK(decode_attention(p, *plan, ws->data(), nullptr));
  FOLIO_ASSERT_OK(synchronize());
  EXPECT_EQ(prob.dout.download(), want_out);
  EXPECT_EQ(caches(prob), want_caches);
  // The attention read the token it wrote: the output moved from the one over the old caches.
  EXPECT_GT(testing::rel_error(want_out, prob.ref), 1e-3);
}

const FusedCase kCases[] = {
    {DType::kBF16, 32, 8, 16},
    {DType::kBF16, 32, 8, 16, KvCacheDtype::kAuto, 64},  // split into 64-token partitions
    {DType::kBF16, 32, 8, 16, KvCacheDtype::kAuto, 0, 2},
    {DType::kFP16, 28, 4, 1, KvCacheDtype::kAuto, 0, -1, true},  // Qwen2.5-7B's group of 7
    {DType::kBF16, 8, 1, 16, KvCacheDtype::kAuto, 256, -1, true},
    {DType::kBF16, 32, 8, 16, KvCacheDtype::kFp8E4m3},
    {DType::kFP16, 32, 8, 8, KvCacheDtype::kFp8E4m3, 64, 2, true},
    {DType::kBF16, 32, 8, 16, KvCacheDtype::kFp8E4m3, 0, 3},
};
INSTANTIATE_TEST_SUITE_P(Cases, DecodeFusedQkvTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return name(info.param); });

TEST(DecodeFusedQkv, RefusesWhatItCannotFuse) {
  FOLIO_REQUIRE_GPU();
  auto v2 = plan_decode_attention_bounded(2, 512, 32, 8, 128, 132, 0, DecodeKernel::kV2);
  ASSERT_TRUE(v2.ok());
  EXPECT_FALSE(decode_fuses_qkv_post(*v2));
  auto wide = plan_decode_attention_bounded(2, 512, 32, 2, 128, 132, 0, DecodeKernel::kTc);
  ASSERT_TRUE(wide.ok());
  EXPECT_FALSE(decode_fuses_qkv_post(*wide));  // 16 q heads per KV head: two blocks each
  auto tc = plan_decode_attention_bounded(2, 512, 32, 8, 128, 132, 0, DecodeKernel::kTc);
  ASSERT_TRUE(tc.ok());
  EXPECT_TRUE(decode_fuses_qkv_post(*tc));
  PagedAttentionParams p;
  p.num_seqs = 2;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.block_size = 16;
  p.scale = 0.1f;
  auto ws = DeviceBuffer::allocate(std::max(tc->workspace_bytes, v2->workspace_bytes));
  ASSERT_TRUE(ws.ok());
  int dummy = 0;
  p.qkv_post.qkv = &dummy;  // set, but positions and the rest missing
  const Status missing = decode_attention(p, *tc, ws->data(), nullptr);
  EXPECT_NE(missing.message().find("positions"), std::string::npos) << missing.message();
  p.qkv_post.positions = &dummy;
  const Status other_kernel = decode_attention(p, *v2, ws->data(), nullptr);
  EXPECT_NE(other_kernel.message().find("kernel tc"), std::string::npos) << other_kernel.message();
}

}  // namespace
}  // namespace folio::cuda
